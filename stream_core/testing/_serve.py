"""`stream-core serve DIR`: a folder of recordings served as a fake vendor on loopback.

Every API's path is answered (`/v1/messages`, `/chat/completions`, `/v1/responses`,
Gemini's `:streamGenerateContent`, Ollama's `/api/chat`, Bedrock's `converse-stream`, ...);
the model the request names picks the recording `DIR/<api>/<model>.body` (or a flat
`DIR/<model>.body` whose `.json` names its `api`). Scenarios answer a model with an ordered
list of recordings instead, one per request, in turn (a tool loop: the call, then the
answer). The body goes out as it was recorded, one HTTP chunk per vendor event, so a harness
in any language sees real vendor bytes; every request is kept (`FakeVendor.requests`).
"""

from __future__ import annotations

import errno
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO
from urllib.parse import unquote

from .._checks import SECRET_HEADERS, clip
from .._types import AssistantMessage
from ._faux import FauxTurn
from ._replay import chunked, load_recording
from ._synthesize import vendor_bytes

_OURS = "(the fake vendor's own error)"

ANY_MODEL = "*"
"""The scenario key answering every model that no other scenario or recording names."""

ScenarioSource = str | Path | Sequence[str | Path | bytes | FauxTurn | AssistantMessage]
"""A scenario: a folder of `.body` files (in file-name order, numbers compared as
numbers), a text file listing recordings (one path a line, relative to the file; blank
lines and `#` comments skipped), one `.body` file, or a list of recordings and scripted
turns (a `FauxTurn` such as `faux_text("Hi")`, or an `AssistantMessage`: written in the
wire format of the API the request came through, `vendor_bytes`)."""

# Path ending -> (the APIs it may be, in preference order; the vendor's 404 body shape).
# An API not listed here is still served: the model name alone then picks the recording.
_ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/messages", ("anthropic-messages",), "anthropic"),
    ("/chat/completions", ("openai-completions", "mistral-conversations"), "openai"),
    ("/conversations", ("mistral-conversations",), "openai"),
    ("/responses", ("openai-responses", "azure-openai-responses"), "openai"),
    (":streamGenerateContent", ("google-generative-ai", "google-vertex"), "google"),
    (":generateContent", ("google-generative-ai", "google-vertex"), "google"),
    ("/converse-stream", ("bedrock-converse-stream",), "bedrock"),
    ("/api/chat", ("ollama-chat",), "ollama"),
    ("/api/generate", ("ollama-generate",), "ollama"),
)

_MODEL_IN_PATH = re.compile(r"/models?/([^/:]+)")


def _not_found(shape: str, model: str) -> dict[str, Any]:
    text = f"model {model!r} not found (no recording or scenario of that name)"
    if shape == "anthropic":
        return {"type": "error", "error": {"type": "not_found_error", "message": text}}
    if shape == "google":
        return {"error": {"code": 404, "message": text, "status": "NOT_FOUND"}}
    if shape == "ollama":
        return {"error": text}
    if shape == "bedrock":
        return {"message": text}
    return {
        "error": {
            "message": text,
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
    }


def _exhausted(shape: str, text: str) -> dict[str, Any]:
    """A 400 invalid-request body in the vendor's shape (not retried by clients)."""
    if shape == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    if shape == "google":
        return {"error": {"code": 400, "message": text, "status": "INVALID_ARGUMENT"}}
    if shape == "ollama":
        return {"error": text}
    if shape == "bedrock":
        return {"message": text}
    return {"error": {"message": text, "type": "invalid_request_error", "code": None}}


def _natural(path: Path) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name)]


def load_scenario(source: ScenarioSource) -> list[Path | bytes | FauxTurn | AssistantMessage]:
    """The recordings of a scenario, in the order they answer."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            bodies = sorted(path.glob("*.body"), key=_natural)
            found: list[Path | bytes | FauxTurn | AssistantMessage] = list(bodies)
            if not found:
                raise ValueError(f"scenario {path}: no .body recordings in the folder")
            return found
        if not path.is_file():
            raise ValueError(f"scenario {path}: no such folder or file")
        if path.suffix == ".body":
            return [path]
        listed: list[Path | bytes | FauxTurn | AssistantMessage] = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            entry = line.strip()
            if not entry or entry.startswith("#"):
                continue
            item = path.parent / entry
            if not item.is_file() and not item.with_suffix(".body").is_file():
                raise ValueError(f"scenario {path}, line {n}: no such recording: {entry}")
            listed.append(item if item.suffix == ".body" else item.with_suffix(".body"))
        if not listed:
            raise ValueError(f"scenario {path}: lists no recordings")
        return listed
    items = list(source)
    if not items:
        raise ValueError("a scenario needs at least one recording")
    return [
        item if isinstance(item, (bytes, FauxTurn, AssistantMessage)) else Path(item)
        for item in items
    ]


@dataclass
class _Scenario:
    recordings: list[Path | bytes | FauxTurn | AssistantMessage]
    served: int = 0


@dataclass
class ServedRequest:
    """One request the fake vendor got, and what it answered."""

    method: str
    path: str
    model: str
    body: Any
    """The request's JSON body, parsed (None when it had none or it was not JSON)."""
    headers: dict[str, str]
    status: int
    """The status answered: 200 (or the recording's own), 404, 400 past a scenario's end."""
    answer: str
    """What answered: `<api>/<name>` of a recording, `<model>[n]` of a scenario's n-th
    recording (from 1), or `not found` / `scenario exhausted`."""
    raw: bytes = field(default=b"", repr=False)
    """The request body's bytes (at most `MAX_KEPT_BODY` of them: see `truncated`)."""
    truncated: bool = False
    """The body was longer than `MAX_KEPT_BODY`: `raw` is its start, `body` None."""

    def __repr__(self) -> str:
        # The headers hold the caller's key: shown redacted, as in every error and log.
        headers = {
            k: "[redacted]" if k.lower() in SECRET_HEADERS else v for k, v in self.headers.items()
        }
        body = clip(repr(self.body), 200)
        return (
            f"ServedRequest(method={self.method!r}, path={self.path!r}, model={self.model!r}, "
            f"status={self.status}, answer={self.answer!r}, headers={headers!r}, body={body})"
        )


@dataclass(frozen=True)
class Recording:
    api: str
    name: str
    path: Path

    def load(self) -> tuple[bytes, dict[str, Any]]:
        meta_path = self.path.with_suffix(".json")
        meta = json.loads(meta_path.read_text("utf-8")) if meta_path.is_file() else {}
        return self.path.read_bytes(), meta


def index_recordings(root: Path) -> dict[str, dict[str, Recording]]:
    """api -> recording name -> recording, for every `.body` under `root`."""
    out: dict[str, dict[str, Recording]] = {}
    for body in sorted(root.rglob("*.body")):
        meta_path = body.with_suffix(".json")
        api = body.parent.name if body.parent != root else ""
        if meta_path.is_file():
            try:
                api = str(json.loads(meta_path.read_text("utf-8")).get("api") or api)
            except ValueError:
                pass
        out.setdefault(api, {})[body.stem] = Recording(api, body.stem, body)
    return out


def frames(body: bytes, media_type: str) -> list[bytes]:
    """The body cut where the vendor wrote one event: SSE events, NDJSON lines."""
    if "event-stream" in media_type:
        parts = re.split(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)", body)
    elif "ndjson" in media_type or "jsonl" in media_type:
        parts = body.splitlines(keepends=True)
    else:
        return [body]
    return [p for p in parts if p]


def _media_type(body: bytes, meta: dict[str, Any]) -> str:
    for key, value in (meta.get("headers") or {}).items():
        if key.lower() == "content-type":
            return str(value)
    head = body.lstrip()[:1]
    return "application/x-ndjson" if head == b"{" else "text/event-stream"


_SAFE_HEADERS = frozenset({"content-type", "retry-after", "retry-after-ms", "x-request-id"})

MAX_REQUEST_BODY = 32 * 1024 * 1024
"""A request body longer than this is answered 413 without being read."""
MAX_KEPT_BODY = 1024 * 1024
"""At most this much of one request body is kept in `FakeVendor.requests`."""
MAX_KEPT_REQUESTS = 1000
"""`FakeVendor.requests` keeps the latest this many requests (`requests_dropped` counts
the older ones): a server answering for hours holds bounded memory."""
MAX_CONNECTIONS = 256
"""Connections served at once; one more is closed at once (each holds a thread)."""
READ_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's head or body (or to read the
answer) before it is closed: a half-sent head never holds a thread for long."""


class FakeVendor(ThreadingHTTPServer):
    """A fake vendor on loopback; `stream_core.testing.fake_vendor` makes a started one.

    `root`: a folder of recordings, picked by the model the request names. `scenarios`:
    model -> recordings answered in turn (`ANY_MODEL`, `"*"`, for any other model); a
    request past a scenario's end gets a 400 in the vendor's shape. `requests` holds every
    request (body parsed), in order; `request_log` gets one JSON line per request.
    """

    daemon_threads = True

    def __init__(
        self,
        root: Path | str | None = None,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        scenarios: Mapping[str, ScenarioSource] | None = None,
        chunk_size: int | None = None,
        delay: float = 0.0,
        log: TextIO | None = None,
        request_log: TextIO | None = None,
        read_timeout: float = READ_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.read_timeout = read_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self.requests_dropped = 0
        """How many of the oldest requests `requests` no longer holds."""
        self.recordings = index_recordings(Path(root)) if root is not None else {}
        self.scenarios = {m: _Scenario(load_scenario(src)) for m, src in (scenarios or {}).items()}
        self.chunk_size = chunk_size
        self.delay = delay
        self.log = log
        self.request_log = request_log
        self.requests: list[ServedRequest] = []
        """Every request, in order: method, path, model, parsed body, status, answer."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def find(self, path: str, model: str) -> tuple[Recording | None, str]:
        """(the recording for this request, the vendor's error shape)."""
        apis: tuple[str, ...] = ()
        shape = "openai"
        for suffix, candidates, vendor in _ROUTES:
            if path.endswith(suffix):
                apis, shape = candidates, vendor
                break
        order = [*apis, *(a for a in self.recordings if a not in apis)]
        for api in order:
            found = self.recordings.get(api, {}).get(model)
            if found is not None:
                return found, shape
        return None, shape

    def pick(self, path: str, model: str) -> tuple[int, str, bytes, dict[str, Any], str]:
        """(status, answer label, body, metadata, error shape) for one request: the model's
        scenario, else its recording by name, else the any-model scenario, else a 404."""
        found, shape = self.find(path, model)
        scenario = self.scenarios.get(model)
        if scenario is None and found is None:
            scenario = self.scenarios.get(ANY_MODEL)
        if scenario is not None:
            with self._lock:
                n = scenario.served
                scenario.served += 1
            if n >= len(scenario.recordings):
                text = (
                    f"scenario for model {model!r} exhausted: {len(scenario.recordings)} "
                    f"recording(s), this is request {n + 1}"
                )
                data = json.dumps(_exhausted(shape, text)).encode()
                return 400, "scenario exhausted", data, {_OURS: True}, shape
            item = scenario.recordings[n]
            if isinstance(item, (FauxTurn, AssistantMessage)):
                api = next((a for s, apis, _ in _ROUTES if path.endswith(s) for a in apis), None)
                if api is None:
                    text = f"a scripted turn for model {model!r}: no API serves {path}"
                    data = json.dumps(_not_found(shape, text)).encode()
                    return 404, "not found", data, {_OURS: True}, shape
                synth = vendor_bytes(item, api, model=model)
                body, meta = synth.body, synth.meta
                label = f"{model}[{n + 1}] scripted"
                return int(meta.get("status") or 200), label, body, meta, shape
            body, meta = load_recording(item)
            label = f"{model}[{n + 1}]" + (f" {item.name}" if isinstance(item, Path) else "")
            return int(meta.get("status") or 200), label, body, meta, shape
        if found is None:
            data = json.dumps(_not_found(shape, model)).encode()
            return 404, "not found", data, {_OURS: True}, shape
        body, meta = found.load()
        return int(meta.get("status") or 200), f"{found.api}/{found.name}", body, meta, shape

    def note(self, line: str) -> None:
        if self.log is not None:
            with self._lock:
                self.log.write(line + "\n")
                self.log.flush()

    def keep(self, request: ServedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            if len(self.requests) > MAX_KEPT_REQUESTS:
                del self.requests[0]
                self.requests_dropped += 1
            if self.request_log is not None:
                entry = {
                    "n": len(self.requests) + self.requests_dropped,
                    "method": request.method,
                    "path": request.path,
                    "model": request.model,
                    "status": request.status,
                    "answer": request.answer,
                    "body": request.body,
                }
                self.request_log.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self.request_log.flush()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return  # a client closing its kept-alive connection: normal
        self.note(f"error answering {client_address}: {type(exc).__name__}: {exc}")

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.note(f"refused {client_address}: {MAX_CONNECTIONS} connections already open")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def start(self) -> threading.Thread:
        """Serve from a daemon thread (tests); `shutdown()` stops it. Idempotent."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, daemon=True)
            self._thread.start()
        return self._thread

    def stop(self) -> None:
        """Stop serving (if started) and close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()

    def __enter__(self) -> FakeVendor:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def fake_vendor(
    root: Path | str | None = None,
    *,
    scenarios: Mapping[str, ScenarioSource] | None = None,
    chunk_size: int | None = None,
    delay: float = 0.0,
    host: str = "127.0.0.1",
    port: int = 0,
    log: TextIO | None = None,
    request_log: TextIO | None = None,
    read_timeout: float = READ_TIMEOUT,
) -> FakeVendor:
    """A fake vendor serving from a daemon thread; `with` it (or call `stop()`) to end it.

    Point a model at `server.url` (`StreamOptions(base_url=server.url)`; Chat Completions
    clients add `/v1`). `scenarios` maps a model id (a catalog id works) to the recordings
    it answers in turn; `root` is a folder of recordings picked by model name. The latest
    requests are in `server.requests` (`MAX_KEPT_REQUESTS`, each body cut to
    `MAX_KEPT_BODY`); their `repr` hides the key headers. A connection that takes longer
    than `read_timeout` seconds to send its request is closed; a body over
    `MAX_REQUEST_BODY`, or with a bad `content-length`, is refused unread (413, 400).
    """
    if root is None and not scenarios:
        raise ValueError("fake_vendor needs a folder of recordings or scenarios")
    server = FakeVendor(
        root, (host, port), scenarios=scenarios, chunk_size=chunk_size, delay=delay, log=log,
        request_log=request_log, read_timeout=read_timeout,
    )  # fmt: skip
    server.start()
    return server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeVendor

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is written by `note`, with what matters

    def do_GET(self) -> None:
        self._answer(b"")

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout)

    def do_POST(self) -> None:
        text = (self.headers.get("content-length") or "0").strip()
        if not text.isdigit():
            # Negative, or not a number: no length to read (never "read until the end").
            self.close_connection = True
            self._refuse(400, f"bad content-length {text[:40]!r}")
            return
        length = int(text)
        if length > MAX_REQUEST_BODY:
            self.close_connection = True
            self._refuse(413, f"request body of {length:,} bytes; at most {MAX_REQUEST_BODY:,}")
            return
        self._answer(self.rfile.read(length) if length else b"")

    def _refuse(self, status: int, text: str) -> None:
        self.server.note(f"{self.command} {self.path} -> {status} ({text})")
        data = json.dumps(
            {"error": {"message": f"fake vendor: {text}", "type": "invalid_request_error"}}
        )
        self._send_json(status, data.encode())

    def _answer(self, raw: bytes) -> None:
        path = unquote(self.path.split("?", 1)[0])
        model = ""
        payload: Any = None
        try:
            payload = json.loads(raw) if raw else None
            if isinstance(payload, dict) and isinstance(payload.get("model"), str):
                model = payload["model"]
        except ValueError:
            pass
        if not model:
            match = _MODEL_IN_PATH.search(path)
            model = match.group(1) if match else ""
        server = self.server
        status, label, body, meta, _ = server.pick(path, model)
        cut = len(raw) > MAX_KEPT_BODY
        server.keep(
            ServedRequest(
                method=self.command, path=path, model=model, body=None if cut else payload,
                headers={k.lower(): v for k, v in self.headers.items()}, status=status,
                answer=label, raw=raw[:MAX_KEPT_BODY], truncated=cut,
            )
        )  # fmt: skip
        if meta.get(_OURS):
            server.note(f"{self.command} {path} model={model!r} -> {status} ({label})")
            self._send_json(status, body)
            return
        server.note(f"{self.command} {path} model={model!r} -> {label} {status}")
        media = _media_type(body, meta)
        self.send_response(status)
        for key, value in (meta.get("headers") or {}).items():
            if key.lower() in _SAFE_HEADERS and key.lower() != "content-type":
                self.send_header(key, str(value))
        self.send_header("content-type", media)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        pieces = chunked(body, server.chunk_size) if server.chunk_size else frames(body, media)
        try:
            for piece in pieces:
                if server.delay:
                    time.sleep(server.delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-body: fine

    def _send_json(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class PortInUse(OSError):
    """The address to listen on is taken."""


def serve(
    root: Path | None,
    host: str,
    port: int,
    *,
    chunk_size: int | None,
    delay: float,
    out: TextIO = sys.stderr,
    ready: Callable[[FakeVendor], None] | None = None,
    scenarios: Mapping[str, ScenarioSource] | None = None,
    request_log: TextIO | None = None,
) -> int:
    try:
        server = FakeVendor(
            root, (host, port), scenarios=scenarios, chunk_size=chunk_size, delay=delay,
            log=out, request_log=request_log,
        )  # fmt: skip
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(exc.errno, f"port {port} is in use") from None
        raise
    count = sum(len(v) for v in server.recordings.values())
    apis = ", ".join(sorted(a or "(no api)" for a in server.recordings))
    served = f"{count} recordings ({apis})" if server.recordings else ""
    if server.scenarios:
        names = ", ".join(
            f"{m} ({len(sc.recordings)} in turn)" for m, sc in server.scenarios.items()
        )
        served += ("; " if served else "") + f"scenarios: {names}"
    out.write(f"serving {served} on {server.url}\n")
    out.flush()
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
