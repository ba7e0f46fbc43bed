"""Loopback pieces for the gateway's hostile-input tests: an upstream that answers
whatever bytes a test scripts (cut, reset, junk, any status), the gateway on uvicorn behind
an ASGI wrapper that records every exception escaping the app, and checkers for what a
client receives (the dialect's error shape, each dialect's event-stream grammar with
exactly one terminal event)."""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from ops_upstreams import LoopbackServer

from stream_core import Usage
from stream_core.gateway import GatewayConfig, Upstream, create_app
from stream_core.testing import FauxTurn, faux_text, vendor_bytes
from stream_core.testing._synthesize import APIS

__all__ = [
    "RESET",
    "UPSTREAMS",
    "VENDOR_ENV",
    "Answer",
    "GatewayServer",
    "RawUpstream",
    "answer_for",
    "check_error",
    "check_stream",
    "frames",
    "upstream",
    "upstream_api",
]

GUARD = 20.0  # seconds: a guard against hangs, never a timing assertion

RESET = object()
"""In `Answer.chunks`: reset the connection here (RST, not a clean close)."""


@dataclass
class Answer:
    """One scripted answer: its status line and headers, then `chunks` (bytes, or `RESET`)
    written in turn; `chunked`: with `transfer-encoding: chunked` (a cut then leaves the
    HTTP framing unfinished), else delimited by the connection's close."""

    status: int = 200
    content_type: str = "text/event-stream"
    chunks: list[Any] = field(default_factory=list)
    chunked: bool = False
    reason: str = "OK"


Script = Callable[[str, bytes], Answer]
"""(request path, request body) -> the answer to write."""

VENDOR_ENV = {
    "ANTHROPIC_API_KEY": "hostile-vendor-key",
    "OPENAI_API_KEY": "hostile-vendor-key",
    "MISTRAL_API_KEY": "hostile-vendor-key",
    "GEMINI_API_KEY": "hostile-vendor-key",
    "AWS_BEARER_TOKEN_BEDROCK": "hostile-vendor-key",
    "AWS_REGION": "us-east-1",
}
"""The vendors' keys as the gateway reads them from its environment (fakes)."""

UPSTREAMS = {
    "anthropic-messages": ("anthropic/claude-sonnet-4-5", None),
    "openai-completions": ("openai/gpt-4.1", None),
    "mistral-conversations": ("mistral/mistral-medium-2604", None),
    "openai-responses": ("openai/gpt-4.1", "openai-responses"),
    "google-generative-ai": ("google/gemini-2.5-flash", None),
    "bedrock-converse-stream": (
        "amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        None,
    ),
    "ollama-chat": ("ollama/qwen3", None),
    "ollama-generate": ("ollama/qwen3", "ollama-generate"),
}
"""Each upstream wire API: a catalog model that speaks it (and an `api` override)."""

OK_TURN = faux_text('{"city": "Paris"}', usage=Usage(input=12, output=3))
"""An answer that is also what the requests' schemas ask for."""


def upstream(api: str, url: str) -> Upstream:
    """The catalog model of `api` (`UPSTREAMS`) served at `url` (the catalog's base URL
    path kept: `/v1`, `/v1beta`)."""
    spec, override = UPSTREAMS[api]
    path = urlsplit(Upstream(spec, api=override).resolve().base_url).path.rstrip("/")
    return Upstream(spec, api=override, base_url=url + path)


def upstream_api(path: str, body: bytes) -> str:
    """The wire API a request to the raw upstream was sent in (by its path)."""
    path = path.split("?", 1)[0]
    if path.endswith("/messages"):
        return "anthropic-messages"
    if path.endswith("/chat/completions"):
        return "mistral-conversations" if b"mistral-" in body else "openai-completions"
    if path.endswith("/responses"):
        return "openai-responses"
    if "generatecontent" in path.lower():
        return "google-generative-ai"
    if "converse" in path:
        return "bedrock-converse-stream"
    return "ollama-generate" if path.endswith("/api/generate") else "ollama-chat"


def answer_for(path: str, body: bytes, turn: FauxTurn = OK_TURN) -> Answer:
    """`turn` as the vendor the request went to streams it."""
    api = upstream_api(path, body)
    return Answer(content_type=APIS[api][1], chunks=[vendor_bytes(turn, api).body])


def _read_request(conn: socket.socket) -> tuple[str, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the request ended")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return lines[0].split(" ")[1], body


class RawUpstream(LoopbackServer):
    """A vendor on loopback writing exactly what `script` says (set it per test)."""

    def __init__(self) -> None:
        self.script: Script = lambda path, body: Answer(chunks=[b""])
        self.paths: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(GUARD)
        reset = False
        try:
            path, body = _read_request(conn)
            self.paths.append(path)
            answer = self.script(path, body)
            head = (
                f"HTTP/1.1 {answer.status} {answer.reason}\r\n"
                f"content-type: {answer.content_type}\r\nconnection: close\r\n"
            )
            if answer.chunked:
                head += "transfer-encoding: chunked\r\n"
            conn.sendall(head.encode() + b"\r\n")
            for chunk in answer.chunks:
                if chunk is RESET:
                    reset = True
                    break
                if answer.chunked:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunk else b"")
                else:
                    conn.sendall(chunk)
            else:
                if answer.chunked and answer.chunks and answer.chunks[-1] != b"":
                    conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        finally:
            if reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class GatewayServer:
    """The gateway on uvicorn (loopback), its app swappable (`serve`); `escaped` holds the
    exceptions that left the app, `errors` the error-log lines of uvicorn and of the
    gateway (its last resort), `access` the gateway's access-log lines."""

    def __init__(self) -> None:
        self.app: Any = None
        self.escaped: list[BaseException] = []
        self._access = _Lines()
        self._errors = _Lines()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(
            self._asgi, interface="asgi3", http="auto", lifespan="off", log_level="warning",
            access_log=False, timeout_keep_alive=30,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    async def _asgi(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except BaseException as e:
            self.escaped.append(e)
            raise

    def serve(self, config: GatewayConfig) -> None:
        self.app = create_app(config)

    @property
    def access(self) -> list[str]:
        return [r.getMessage() for r in self._access.records]

    @property
    def errors(self) -> list[str]:
        return [r.getMessage() for r in self._errors.records if r.levelno >= logging.ERROR]

    def reset_logs(self) -> None:
        self._access.records.clear()
        self._errors.records.clear()
        self.escaped.clear()

    def access_lines(self, count: int) -> list[str]:
        """The access-log lines once `count` are there (the line is written after the
        client's last byte, so it may come a moment after the answer)."""
        deadline = time.monotonic() + GUARD
        while len(self.access) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.01)  # any extra line would come now
        return self.access

    def __enter__(self) -> GatewayServer:
        for name, handler in (
            ("stream_core.gateway.access", self._access),
            ("stream_core.gateway", self._errors),
            ("uvicorn.error", self._errors),
            ("uvicorn.asgi", self._errors),
        ):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            if name.endswith("access"):
                logger.setLevel(logging.INFO)
        self.thread.start()
        deadline = time.monotonic() + GUARD
        while not self.server.started:
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(GUARD)
        self.sock.close()
        for name, handler in (
            ("stream_core.gateway.access", self._access),
            ("stream_core.gateway", self._errors),
            ("uvicorn.error", self._errors),
            ("uvicorn.asgi", self._errors),
        ):
            logging.getLogger(name).removeHandler(handler)


# --- what a client receives ----------------------------------------------------------------


def check_error(api: str, status: int, body: bytes, server: bool = False) -> dict[str, Any]:
    """An HTTP error in the dialect's shape: Anthropic `{"type": "error", "error": {type,
    message}}`, OpenAI `{"error": {message, type, ...}}`; no traceback (a 500 only with
    `server`: the upstream failed, and the dialect says so with a 500)."""
    assert 400 <= status < 600 and (server or status != 500), (status, body[:300])
    assert b"Traceback" not in body, body[:300]
    payload = json.loads(body)
    assert isinstance(payload, dict), body[:300]
    error = payload.get("error")
    assert isinstance(error, dict), body[:300]
    assert isinstance(error.get("message"), str) and error["message"], body[:300]
    assert isinstance(error.get("type"), str) and error["type"], body[:300]
    if api == "anthropic-messages":
        assert payload.get("type") == "error", body[:300]
    return error


def frames(body: bytes) -> Iterator[tuple[str | None, str]]:
    """The SSE frames of `body`: (event name, data), comments skipped. A line that is
    neither a field nor a comment fails (the gateway's own bytes are never junk)."""
    text = body.decode("utf-8").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            name, sep, value = line.partition(":")
            assert sep, f"not an SSE line: {line[:120]!r}"
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        if data:
            yield event, "\n".join(data)


TERMINALS = {
    "anthropic-messages": {"message_stop", "error"},
    "openai-responses": {"response.completed", "response.incomplete", "response.failed"},
}


def check_stream(api: str, body: bytes) -> str:
    """A streamed answer's grammar in dialect `api`: every frame's data is a JSON object
    (of the type its event names), exactly one terminal event, and it is the last.
    Returns the terminal (Chat Completions: `[DONE]` or `error`)."""
    seen: list[tuple[str | None, str]] = list(frames(body))
    assert seen, f"an empty stream: {body[:200]!r}"
    terminals: list[str] = []
    for n, (event, data) in enumerate(seen):
        if api == "openai-completions" and data == "[DONE]":
            terminals.append("[DONE]")
            continue
        payload = json.loads(data)
        assert isinstance(payload, dict), data[:200]
        if api == "openai-completions":
            if "error" in payload:
                terminals.append("error")
            else:
                assert isinstance(payload.get("choices"), list), data[:200]
            continue
        kind = payload.get("type")
        assert isinstance(kind, str), data[:200]
        if event is not None:
            assert event == kind, (event, data[:200])
        if n == 0 and api == "anthropic-messages":
            assert kind in ("message_start", "error"), data[:200]
        if n == 0 and api == "openai-responses":
            assert kind in ("response.created", "error", "response.failed"), data[:200]
        if kind in TERMINALS[api]:
            terminals.append(kind)
    assert len(terminals) == 1, f"terminal events {terminals} in {body[-600:]!r}"
    last = seen[-1]
    last_kind = "[DONE]" if last[1] == "[DONE]" else None
    if last_kind is None:
        payload = json.loads(last[1])
        last_kind = "error" if api == "openai-completions" else payload.get("type")
    assert last_kind == terminals[0], f"{terminals[0]} is not last: {body[-600:]!r}"
    return terminals[0]
