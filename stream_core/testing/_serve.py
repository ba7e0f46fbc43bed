"""`stream-core serve DIR`: a folder of recordings served as a fake vendor on loopback.

Every API's path is answered (`/v1/messages`, `/chat/completions`, `/v1/responses`,
Gemini's `:streamGenerateContent`, Ollama's `/api/chat`, Bedrock's `converse-stream`, ...);
the model the request names picks the recording `DIR/<api>/<model>.body` (or a flat
`DIR/<model>.body` whose `.json` names its `api`). The body goes out as it was recorded,
one HTTP chunk per vendor event, so a harness in any language sees real vendor bytes.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote

from ._replay import chunked

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
    text = f"model {model!r} not found (no recording of that name)"
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


class FakeVendor(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        root: Path,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        chunk_size: int | None = None,
        delay: float = 0.0,
        log: TextIO | None = None,
    ) -> None:
        self.recordings = index_recordings(root)
        self.chunk_size = chunk_size
        self.delay = delay
        self.log = log
        self.requests: list[tuple[str, str, str]] = []
        """(method, path, model) of every request, in order."""
        self._lock = threading.Lock()
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

    def note(self, line: str) -> None:
        if self.log is not None:
            with self._lock:
                self.log.write(line + "\n")
                self.log.flush()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            return  # a client closing its kept-alive connection: normal
        self.note(f"error answering {client_address}: {type(exc).__name__}: {exc}")

    def start(self) -> threading.Thread:
        """Serve from a daemon thread (tests); `shutdown()` stops it."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeVendor

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is written by `note`, with what matters

    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._answer(self.rfile.read(length) if length else b"")

    def _answer(self, raw: bytes) -> None:
        path = unquote(self.path.split("?", 1)[0])
        model = ""
        try:
            payload = json.loads(raw) if raw else {}
            if isinstance(payload, dict) and isinstance(payload.get("model"), str):
                model = payload["model"]
        except ValueError:
            pass
        if not model:
            match = _MODEL_IN_PATH.search(path)
            model = match.group(1) if match else ""
        server = self.server
        server.requests.append((self.command, path, model))
        found, shape = server.find(path, model)
        if found is None:
            server.note(f"{self.command} {path} model={model!r} -> 404 (no recording)")
            self._send_json(404, _not_found(shape, model))
            return
        body, meta = found.load()
        status = int(meta.get("status") or 200)
        server.note(f"{self.command} {path} model={model!r} -> {found.api}/{found.name} {status}")
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

    def _send_json(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(
    root: Path,
    host: str,
    port: int,
    *,
    chunk_size: int | None,
    delay: float,
    out: TextIO = sys.stderr,
    ready: Callable[[FakeVendor], None] | None = None,
) -> int:
    server = FakeVendor(root, (host, port), chunk_size=chunk_size, delay=delay, log=out)
    count = sum(len(v) for v in server.recordings.values())
    apis = ", ".join(sorted(a or "(no api)" for a in server.recordings))
    out.write(f"serving {count} recordings ({apis}) on {server.url}\n")
    out.flush()
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
