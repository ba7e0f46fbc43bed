"""The fake vendor's batch side: files, batches and their results, offline.

`BatchBackend` keeps what a vendor's batch API keeps (uploaded files and objects, batches,
their clock) for every vendor at once; each vendor's module (`_batch_routes_<vendor>.py`)
adds `ROUTES` that speak that vendor's paths and shapes, reading its batch codec's
tables (`providers/_<vendor>_batch.py`), and turn requests into calls here.

A batch's requests are answered from the fake vendor's scenarios, each request taking the
next answer of its model's scenario in turn, as a streamed call would (`answer`): a
recording or a scripted turn is read by the real provider into a message, and the vendor's
whole answer for that message is written with the codec's `answer_body`. Timing is data:
a batch ends `delay` seconds after it is created; with `expiry` shorter than that, the
requests not yet run when it runs out end `expired` (`expire_after` of them are run
first, so a test sees both).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._types import AssistantMessage, Context, UserMessage
from ._batch_hold import Holds

if TYPE_CHECKING:
    from ._serve import FakeVendor

__all__ = [
    "BATCH_ROUTES",
    "BatchBackend",
    "FakeBatch",
    "FakeResult",
    "HTTPAnswer",
    "HTTPAsk",
    "StoredFile",
    "route",
]


@dataclass
class HTTPAsk:
    """One request to a batch or file endpoint."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    match: re.Match[str]

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class HTTPAnswer:
    status: int
    body: bytes
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, status: int, data: Any, **headers: str) -> HTTPAnswer:
        return cls(status, json.dumps(data).encode(), headers=dict(headers))


Handler = Callable[["BatchBackend", HTTPAsk], HTTPAnswer]

BATCH_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = []
"""(method, path pattern, handler): every vendor module's batch and file endpoints."""


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register a handler for `method` and a path matching `pattern` (fully)."""

    def add(handler: Handler) -> Handler:
        BATCH_ROUTES.append((method, re.compile(pattern), handler))
        return handler

    return add


@dataclass
class StoredFile:
    """An uploaded file or object: its id (or key), name, purpose and bytes."""

    id: str
    name: str
    data: bytes
    purpose: str = "batch"
    created_at: float = 0.0
    media_type: str = "application/jsonl"


@dataclass
class FakeResult:
    """One request's fate: `outcome` is succeeded, errored, expired or cancelled; `message`
    the answer the scenario gave (for `answer_body`), `status`/`error` the vendor error's
    status and kind and text for an errored one."""

    custom_id: str
    outcome: str
    message: AssistantMessage | None = None
    status: int = 200
    kind: str | None = None
    error: str = ""


@dataclass
class FakeBatch:
    """A batch as the fake vendor keeps it."""

    id: str
    vendor: str
    created_at: float
    ends_at: float
    expires_at: float | None
    requests: list[tuple[str, str, str, dict[str, Any]]]
    """(custom id, API, model, payload) each."""
    meta: dict[str, Any] = field(default_factory=dict)
    """What the vendor keeps of the create call (tag, metadata, display name, input file)."""
    cancelled_at: float | None = None
    results: list[FakeResult] | None = None
    result_files: dict[str, str] = field(default_factory=dict)
    """Kind (`output`, `error`) -> the stored file holding those lines, once written."""

    def state(self, now: float) -> str:
        """`running`, `ended` (results final) or `cancelling` (asked, still ending)."""
        if self.results is not None:
            return "ended"
        if self.cancelled_at is not None:
            return "cancelling"
        return "running"


class BatchBackend:
    """Files and batches for every vendor (see the module docstring); thread-safe."""

    def __init__(
        self,
        server: FakeVendor,
        *,
        delay: float = 0.0,
        expiry: float | None = None,
        expire_after: int = 0,
        cancel_delay: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.server = server
        # The vendors' route modules and the codecs the answers use are imported here, on
        # the thread that starts the fake, never on a request's thread: CPython 3.11 keeps
        # the compiler's recursion count per interpreter, so two threads compiling at once
        # can fail with "AST constructor recursion depth mismatch" (a dropped request).
        _load_routes()
        self.delay = delay
        self.expiry = expiry
        self.expire_after = expire_after
        self.cancel_delay = cancel_delay
        self.clock = clock
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self.created = 0
        """Batches created, ever (a test's count of what was billed)."""
        self.queue_limit: int | None = None
        """Requests in unfinished batches a create may bring the queue to; over it, the
        vendor's queue-full error (each vendor module says it its own way)."""
        self.validation = 0.0
        """Seconds a new batch stays `validating` before its validation's verdict shows
        (OpenAI's: a queue-full refusal is found after the create was accepted)."""
        self.holds = Holds()
        """Requests to stop before or after they are handled (`_batch_hold`)."""

    def new_id(self, prefix: str) -> str:
        with self.lock:
            return f"{prefix}{next(self._ids):06d}"

    # --- files ---------------------------------------------------------------------------

    def put_file(
        self, data: bytes, *, name: str, purpose: str = "batch", id: str = ""
    ) -> StoredFile:
        with self.lock:
            stored = StoredFile(id or self.new_id("file-"), name, data, purpose, self.clock())
            self.files[stored.id] = stored
            return stored

    def file(self, id: str) -> StoredFile | None:
        with self.lock:
            return self.files.get(id)

    def delete_file(self, id: str) -> bool:
        with self.lock:
            return self.files.pop(id, None) is not None

    # --- batches -------------------------------------------------------------------------

    def queued(self) -> int:
        """Requests in batches not yet ended."""
        now = self.clock()
        with self.lock:
            return sum(len(b.requests) for b in self.batches.values() if b.state(now) != "ended")

    def create(
        self,
        vendor: str,
        requests: list[tuple[str, str, str, dict[str, Any]]],
        *,
        prefix: str,
        meta: Mapping[str, Any] | None = None,
    ) -> FakeBatch:
        now = self.clock()
        expires = None if self.expiry is None else now + self.expiry
        with self.lock:
            batch = FakeBatch(
                id=self.new_id(prefix), vendor=vendor, created_at=now, ends_at=now + self.delay,
                expires_at=expires, requests=list(requests), meta=dict(meta or {}),
            )  # fmt: skip
            self.batches[batch.id] = batch
            self.created += 1
            return batch

    def get(self, id: str, vendor: str | None = None) -> FakeBatch | None:
        """The batch, its results written if its time has come; None when `vendor` is
        given and the batch is another vendor's (each API sees only its own)."""
        with self.lock:
            batch = self.batches.get(id)
        if batch is None or vendor is not None and batch.vendor != vendor:
            return None
        self._advance(batch)
        return batch

    def listing(self, vendor: str) -> list[FakeBatch]:
        with self.lock:
            found = [b for b in self.batches.values() if b.vendor == vendor]
        for b in found:
            self._advance(b)
        return sorted(found, key=lambda b: (b.created_at, b.id), reverse=True)

    def cancel(self, id: str) -> FakeBatch | None:
        with self.lock:
            batch = self.batches.get(id)
            if batch is not None and batch.results is None and batch.cancelled_at is None:
                batch.cancelled_at = self.clock()
        if batch is not None:
            self._advance(batch)
        return batch

    def delete(self, id: str) -> bool:
        with self.lock:
            return self.batches.pop(id, None) is not None

    def _advance(self, batch: FakeBatch) -> None:
        now = self.clock()
        with self.lock:
            if batch.results is not None:
                return
            if batch.cancelled_at is not None:
                if now < batch.cancelled_at + self.cancel_delay:
                    return
                batch.results = [FakeResult(c, "cancelled") for c, _, _, _ in batch.requests]
                return
            expired = batch.expires_at is not None and batch.expires_at <= batch.ends_at
            if expired:
                assert batch.expires_at is not None
                if now < batch.expires_at:
                    return
            elif now < batch.ends_at:
                return
            results: list[FakeResult] = []
            for n, (custom_id, api, model, payload) in enumerate(batch.requests):
                if expired and n >= self.expire_after:
                    results.append(FakeResult(custom_id, "expired"))
                    continue
                results.append(self.answer(custom_id, api, model, payload))
            batch.results = results

    # --- answers -------------------------------------------------------------------------

    def answer(self, custom_id: str, api: str, model: str, payload: dict[str, Any]) -> FakeResult:
        """The next answer of `model`'s scenario, read by the real provider of `api`."""
        message = read_answer(self.server, api, model)
        error = message.error
        if error is not None and not message.content:
            status = _STATUS.get(error.kind or "server", 500)
            return FakeResult(
                custom_id, "errored", message, status=status, kind=error.kind,
                error=error.message,
            )  # fmt: skip
        return FakeResult(custom_id, "succeeded", message)


_STATUS = {
    "invalid_request": 400,
    "context_overflow": 400,
    "auth": 401,
    "not_found": 404,
    "rate_limit": 429,
    "overloaded": 529,
    "timeout": 504,
}
"""An error kind -> the status a batch's error line gives it (else 500)."""

_STREAM_PATH = {
    "anthropic-messages": "/v1/messages",
    "openai-completions": "/v1/chat/completions",
    "mistral-conversations": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "google-generative-ai": "/v1beta/models/m:streamGenerateContent",
    "bedrock-converse-stream": "/model/m/converse-stream",
}
"""Each API's streaming path: which of the scenario's answers a batch line takes."""


def read_answer(server: FakeVendor, api: str, model: str) -> AssistantMessage:
    """The model's next scripted answer as the provider of `api` reads it (through the
    sync facade's own loop: callable from the fake's threads and from a running loop).
    It never goes through the caller's limiter: a process-wide budget or a learned limit
    of the test's own process is no business of the fake vendor's."""
    import dataclasses

    from .._models import Model
    from .._options import StreamOptions
    from .._registry import get_provider
    from .._sync import SyncStream, _get_loop
    from ._replay import replay_client

    status, _, body, meta, _ = server.pick(_STREAM_PATH.get(api, "/v1/messages"), model)
    base = "http://fake-vendor.invalid" + ("/v1" if api != "anthropic-messages" else "")
    m = Model(id=model, api=api, provider="fake", base_url=base)
    context = Context(messages=[UserMessage(content="batch")])
    headers = {str(k): str(v) for k, v in (meta.get("headers") or {}).items()}
    client = replay_client(body, status=status, headers=headers)
    options = StreamOptions(client=client, api_key="fake", max_retries=0)
    wire = get_provider(api).wire
    assert wire is not None
    unlimited = dataclasses.replace(wire, rate_limited=False)
    with SyncStream(unlimited.open(m, context, options), _get_loop()) as answer:
        return answer.result()


_ROUTE_MODULES = ("anthropic", "openai", "gemini", "vertex", "mistral", "bedrock")
_loaded: list[bool] = []


def _load_routes() -> None:
    """Import each vendor's routes once (`_batch_routes_<vendor>.py`)."""
    if _loaded:
        return
    import importlib

    from .._dialects import DIALECTS, dialect

    for api in DIALECTS:  # the error bodies' codecs: imported here, not on a request's thread
        dialect(api)

    for vendor in _ROUTE_MODULES:
        name = f"stream_core.testing._batch_routes_{vendor}"
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    _loaded.append(True)


def dispatch(
    backend: BatchBackend, method: str, raw_path: str, headers: dict[str, str], body: bytes
) -> HTTPAnswer | None:
    """The answer of a batch or file endpoint, or None when the path is not one."""
    from urllib.parse import parse_qsl, unquote

    _load_routes()
    path, _, query = raw_path.partition("?")
    path = unquote(path)
    for m, pattern, handler in BATCH_ROUTES:
        if m != method:
            continue
        found = pattern.fullmatch(path)
        if found is not None:
            ask = HTTPAsk(method, path, dict(parse_qsl(query)), headers, body, found)
            backend.holds.stop("before", method, path)
            answer = handler(backend, ask)
            backend.holds.stop("after", method, path)
            return answer
    return None
