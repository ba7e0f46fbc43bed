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
import io
import json
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
from ._batch_serve import BatchBackend, dispatch
from ._faux import FauxTurn
from ._replay import chunked, load_recording
from ._scenarios import (
    ANY_MODEL,
    MODEL_IN_PATH,
    OURS,
    ROUTES,
    Recording,
    ScenarioItem,
    ScenarioSource,
    exhausted_body,
    frames,
    index_recordings,
    load_scenario,
    media_type,
    not_found_body,
    server_error_body,
    shape_of,
)
from ._serve_guard import (
    MAX_BODIES_IN_FLIGHT,
    MAX_CONNECTIONS,
    MAX_KEPT_BODY,
    MAX_KEPT_BYTES,
    MAX_KEPT_REQUESTS,
    MAX_REQUEST_BODY,
    READ_TIMEOUT,
    BodyBudget,
    DeadlineReader,
    HostRule,
    model_in,
)
from ._serve_quota import QuotaBook, QuotaSpec
from ._synthesize import vendor_bytes

__all__ = [
    "ANY_MODEL",
    "MAX_BODIES_IN_FLIGHT",
    "MAX_CONNECTIONS",
    "MAX_KEPT_BODY",
    "MAX_KEPT_BYTES",
    "MAX_KEPT_REQUESTS",
    "MAX_REQUEST_BODY",
    "READ_TIMEOUT",
    "FakeVendor",
    "PortInUse",
    "ScenarioSource",
    "ServedRequest",
    "fake_vendor",
    "frames",
    "index_recordings",
    "load_scenario",
    "serve",
]

# One parse of a kept body at a time for the request log (a hostile 1 MiB body of `{}`
# builds some 25 MB of objects while parsed).
_PARSING = threading.Lock()


@dataclass
class _Scenario:
    recordings: list[ScenarioItem]
    served: int = 0


@dataclass
class ServedRequest:
    """One request the fake vendor got, and what it answered."""

    method: str
    path: str
    model: str
    headers: dict[str, str]
    status: int
    """The status answered: 200 (or the recording's own), 404, 400 past a scenario's end,
    500 when the fake vendor could not answer (a recording it could not read)."""
    answer: str
    """What answered: `<api>/<name>` of a recording, `<model>[n]` of a scenario's n-th
    recording (from 1), or `not found` / `scenario exhausted`."""
    raw: bytes = field(default=b"", repr=False)
    """The request body's bytes (at most `MAX_KEPT_BODY` of them: see `truncated`)."""
    truncated: bool = False
    """The body was longer than `MAX_KEPT_BODY`: `raw` is its start, `body` None."""

    @property
    def body(self) -> Any:
        """The request's JSON body, parsed from `raw` at each access (None when it had
        none, was not JSON, or was `truncated`): the server keeps bytes, never objects."""
        if self.truncated or not self.raw:
            return None
        try:
            return json.loads(self.raw)
        except ValueError:
            return None

    @property
    def size(self) -> int:
        """The bytes this record holds (its body and headers), as `MAX_KEPT_BYTES` counts."""
        return len(self.raw) + sum(len(k) + len(v) for k, v in self.headers.items())

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


_SAFE_HEADERS = frozenset({"content-type", "retry-after", "retry-after-ms", "x-request-id"})


class FakeVendor(ThreadingHTTPServer):
    """A fake vendor on loopback; `stream_core.testing.fake_vendor` makes a started one.

    `root`: a folder of recordings, picked by the model the request names. `scenarios`:
    model -> recordings answered in turn (`ANY_MODEL`, `"*"`, for any other model); a
    request past a scenario's end gets a 400 in the vendor's shape. `requests` holds the
    latest requests, in order; `request_log` gets one JSON line per request. Only
    loopback `Host`s and `Origin`s are answered, and those in `allow_hosts` (`"*"`: any).
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
        allow_hosts: Sequence[str] = (),
        batch_delay: float = 0.0,
        batch_expiry: float | None = None,
        quota: QuotaSpec = None,
    ) -> None:
        self.read_timeout = read_timeout
        self.quota = QuotaBook(quota)  # windows and rate-limit headers: `_serve_quota`
        self.batches = BatchBackend(self, delay=batch_delay, expiry=batch_expiry)
        """Batch and file endpoints' state (`_batch_serve`): batches end `batch_delay`
        seconds after they are created; with `batch_expiry` shorter, they expire."""
        self.hosts = HostRule(allow_hosts, address[0])
        self.bodies = BodyBudget(MAX_BODIES_IN_FLIGHT)
        self.max_connections = max_connections
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
        """The latest requests (`MAX_KEPT_REQUESTS`, `MAX_KEPT_BYTES`), in order: method,
        path, model, body, headers, status, answer."""
        self._kept_bytes = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://[{name}]:{port}" if ":" in name else f"http://{name}:{port}"

    @property
    def port(self) -> int:
        """The port it listens on (the free one picked for port 0)."""
        return int(self.server_address[1])

    def find(self, path: str, model: str) -> tuple[Recording | None, str]:
        """(the recording for this request, the vendor's error shape)."""
        apis: tuple[str, ...] = ()
        shape = "openai"
        for suffix, candidates, vendor in ROUTES:
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
                data = json.dumps(exhausted_body(shape, text)).encode()
                return 400, "scenario exhausted", data, {OURS: True}, shape
            item = scenario.recordings[n]
            if isinstance(item, (FauxTurn, AssistantMessage)):
                api = next((a for s, apis, _ in ROUTES if path.endswith(s) for a in apis), None)
                if api is None:
                    text = f"a scripted turn for model {model!r}: no API serves {path}"
                    data = json.dumps(not_found_body(shape, text)).encode()
                    return 404, "not found", data, {OURS: True}, shape
                synth = vendor_bytes(item, api, model=model)
                body, meta = synth.body, synth.meta
                label = f"{model}[{n + 1}] scripted"
                return int(meta.get("status") or 200), label, body, meta, shape
            body, meta = load_recording(item)
            label = f"{model}[{n + 1}]" + (f" {item.name}" if isinstance(item, Path) else "")
            return int(meta.get("status") or 200), label, body, meta, shape
        if found is None:
            data = json.dumps(not_found_body(shape, model)).encode()
            return 404, "not found", data, {OURS: True}, shape
        body, meta = found.load()
        return int(meta.get("status") or 200), f"{found.api}/{found.name}", body, meta, shape

    def note(self, line: str) -> None:
        if self.log is not None:
            with self._lock:
                self.log.write(line + "\n")
                self.log.flush()

    def keep(self, request: ServedRequest) -> None:
        """Keep a request: the oldest go past `MAX_KEPT_REQUESTS` or `MAX_KEPT_BYTES`."""
        line = None
        if self.request_log is not None:
            with _PARSING:
                entry = {
                    "method": request.method,
                    "path": request.path,
                    "model": request.model,
                    "status": request.status,
                    "answer": request.answer,
                    "body": request.body,
                }
                line = json.dumps(entry, ensure_ascii=False)
        with self._lock:
            kept = self.requests
            kept.append(request)
            self._kept_bytes += request.size
            while len(kept) > 1 and (
                len(kept) > MAX_KEPT_REQUESTS or self._kept_bytes > MAX_KEPT_BYTES
            ):
                self._kept_bytes -= kept.pop(0).size
                self.requests_dropped += 1
            if self.request_log is not None and line is not None:
                n = len(kept) + self.requests_dropped
                self.request_log.write(f'{{"n": {n}, {line[1:]}\n')
                self.request_log.flush()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return  # a client closing its kept-alive connection: normal
        self.note(f"error answering {client_address}: {type(exc).__name__}: {exc}")

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.note(f"refused {client_address}: {self.max_connections} connections open")
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
            self._thread = threading.Thread(
                target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
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
    allow_hosts: Sequence[str] = (),
    batch_delay: float = 0.0,
    batch_expiry: float | None = None,
    quota: QuotaSpec = None,
) -> FakeVendor:
    """A fake vendor serving from a daemon thread; `with` it (or call `stop()`) to end it.

    Point a model at `server.url` (`StreamOptions(base_url=server.url)`; Chat Completions
    clients add `/v1`). `scenarios` maps a model id (a catalog id works) to the recordings
    it answers in turn; `root` is a folder of recordings picked by model name. The latest
    requests are in `server.requests` (at most `MAX_KEPT_REQUESTS` and `MAX_KEPT_BYTES`,
    each body cut to `MAX_KEPT_BODY`); their `repr` hides the key headers. A connection
    that takes longer than `read_timeout` seconds to send its request is closed; a body
    over `MAX_REQUEST_BODY`, or with a bad `content-length`, is refused unread (413, 400).
    A `Host` or `Origin` that is not loopback gets a 421 or 403, unless `allow_hosts`
    names its host (`"*"`: any; for a server other machines or containers reach).
    Each vendor's batch and file endpoints are answered too (`server.batches`): a batch
    ends `batch_delay` seconds after it is created, its requests answered from the
    scenarios in turn; with `batch_expiry` shorter than that, they expire. `quota` (a
    `Quota`, or model -> `Quota`) counts each model's requests and tokens in windows,
    answering with the vendor's rate-limit headers, and its 429 once over (`_serve_quota`).
    """
    if root is None and not scenarios:
        raise ValueError("fake_vendor needs a folder of recordings or scenarios")
    server = FakeVendor(
        root, (host, port), scenarios=scenarios, chunk_size=chunk_size, delay=delay, log=log,
        request_log=request_log, read_timeout=read_timeout, allow_hosts=allow_hosts,
        batch_delay=batch_delay, batch_expiry=batch_expiry, quota=quota,
    )  # fmt: skip
    server.start()
    return server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeVendor
    _reader: DeadlineReader

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is written by `note`, with what matters

    def setup(self) -> None:
        super().setup()
        timeout = self.server.read_timeout
        self.connection.settimeout(timeout)
        # Each read gets what is left of the request's time, so a head (or body) sent a
        # byte at a time still ends within `read_timeout`.
        self.rfile.close()
        self._reader = DeadlineReader(self.connection, timeout)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        self._reader.restart()  # the next request's head: `read_timeout` from now
        super().handle_one_request()

    def do_GET(self) -> None:
        if not self._refused():
            self._answer(b"")

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_PUT(self) -> None:
        self.do_POST()

    def do_POST(self) -> None:
        if self._refused():
            return
        text = (self.headers.get("content-length") or "0").strip()
        if not text.isdigit():
            # Negative, or not a number: no length to read (never "read until the end").
            self._refuse(400, f"bad content-length {text[:40]!r}")
            return
        length = int(text)
        if length > MAX_REQUEST_BODY:
            self._refuse(413, f"request body of {length:,} bytes; at most {MAX_REQUEST_BODY:,}")
            return
        server = self.server
        cost = 2 * length  # the body, and what finding its model may copy of it
        if not server.bodies.take(cost, server.read_timeout):
            self._refuse(503, "too many request bodies being read at once; retry")
            return
        try:
            self._reader.restart()  # the body gets `read_timeout` of its own
            self._answer(self.rfile.read(length) if length else b"")
        finally:
            server.bodies.give(cost)

    def _refused(self) -> bool:
        """Refuse (421, 403) a request naming a host or origin that is not allowed."""
        refusal = self.server.hosts.refusal(self.headers.get("host"), self.headers.get("origin"))
        if refusal is not None:
            self._refuse(*refusal)
        return refusal is not None

    def _refuse(self, status: int, text: str) -> None:
        """An error of the fake vendor's own, before the request was read: the connection
        is closed after it (its body, if any, was never read)."""
        self.server.note(f"{self.command} {self.path[:200]} -> {status} ({text})")
        shape = shape_of(unquote(self.path.split("?", 1)[0]))
        data = json.dumps(exhausted_body(shape, f"fake vendor: {text}"))
        self.close_connection = True
        self._send_json(status, data.encode())

    def _answer(self, raw: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        batch = dispatch(self.server.batches, self.command, self.path, headers, raw)
        if batch is not None:
            self.server.note(f"{self.command} {self.path[:200]} -> {batch.status} (batch)")
            self.send_response(batch.status)
            for key, value in batch.headers.items():
                self.send_header(key, value)
            self.send_header("content-type", batch.media_type)
            self.send_header("content-length", str(len(batch.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(batch.body)
            return
        path = unquote(self.path.split("?", 1)[0])
        model = model_in(raw) if raw else ""
        if not model:
            # Read in the path as sent: a Bedrock id is quoted whole (an ARN's `/` too).
            match = MODEL_IN_PATH.search(self.path.split("?", 1)[0])
            model = unquote(match.group(1)) if match else ""
        server = self.server
        limits = server.quota.charge(self.command, path, model, raw)
        try:
            status, label, body, meta, _ = limits.refusal or server.pick(path, model)
        except Exception as exc:  # a recording that cannot be read: an answer, not a drop
            text = f"fake vendor: cannot answer {model!r}: {type(exc).__name__}: {exc}"
            status, label = 500, "fake vendor error"
            body, meta = json.dumps(server_error_body(shape_of(path), text)).encode(), {OURS: 1}
        cut = len(raw) > MAX_KEPT_BODY
        server.keep(
            ServedRequest(
                method=self.command, path=path, model=model,
                headers={k.lower(): v for k, v in self.headers.items()}, status=status,
                answer=label, raw=raw[:MAX_KEPT_BODY], truncated=cut,
            )
        )  # fmt: skip
        del raw
        if meta.get(OURS):
            server.note(f"{self.command} {path} model={model!r} -> {status} ({label})")
            self._send_json(status, body, limits.headers)
            return
        server.note(f"{self.command} {path} model={model!r} -> {label} {status}")
        media = media_type(body, meta)
        self.send_response(status)
        for key, value in (meta.get("headers") or {}).items():
            if key.lower() in _SAFE_HEADERS and key.lower() != "content-type":
                self.send_header(key, str(value))
        for key, value in limits.headers:
            self.send_header(key, value)
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

    def _send_json(self, status: int, data: bytes, headers: Sequence[Any] = ()) -> None:
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if self.close_connection:
            # Said, so a client never reuses a connection this server is about to close.
            self.send_header("connection", "close")
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
    allow_hosts: Sequence[str] = (),
    quota: QuotaSpec = None,
    batch_delay: float = 0.0,
    batch_expiry: float | None = None,
) -> int:
    try:
        server = FakeVendor(
            root, (host, port), scenarios=scenarios, chunk_size=chunk_size, delay=delay,
            log=out, request_log=request_log, allow_hosts=allow_hosts, quota=quota,
            batch_delay=batch_delay, batch_expiry=batch_expiry,
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
