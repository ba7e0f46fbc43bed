"""Loopback pieces for the gateway's operations tests: a Chat Completions upstream that
streams as slowly (or as much) as asked and says when its client hung up, an upstream
answering fixed JSON (a vendor's count endpoint), and the gateway on uvicorn in a thread
or as a real `stream-core gateway` process."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn


def _read_request(conn: socket.socket) -> tuple[str, dict[str, str], bytes]:
    """The request line, lower-cased headers and body of one HTTP/1.1 request."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the request ended")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return lines[0], headers, body


def chat_chunk(text: str) -> bytes:
    payload = {
        "id": "chatcmpl-ops",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def chat_end(prompt_tokens: int = 5) -> bytes:
    stop = {
        "id": "chatcmpl-ops",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 7,
            "total_tokens": prompt_tokens + 7,
        },
    }
    return b"data: " + json.dumps(stop).encode() + b"\n\ndata: [DONE]\n\n"


@dataclass
class Served:
    """What the upstream saw of one request."""

    request_line: str
    headers: dict[str, str]
    body: bytes
    sent: int = 0
    """Bytes of the answer written so far (the socket took them)."""
    closed: threading.Event = field(default_factory=threading.Event)
    """Set when the client hung up (a read saw the end, or a write failed)."""
    finished: threading.Event = field(default_factory=threading.Event)
    """Set when the whole answer was written."""


class LoopbackServer:
    """A thread accepting connections on `_sock` (loopback), each served by `_serve` on a
    thread of its own; `close` ends it. A subclass opens `_sock`, then calls `_start`."""

    _sock: socket.socket

    def _start(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


class ChatUpstream(LoopbackServer):
    """A Chat Completions vendor on loopback: each request is answered with `events`
    chunks of `size` characters of text, `interval` seconds apart, then the end with
    `prompt_tokens` of input used. `requests` holds what it saw."""

    def __init__(
        self, events: int = 3, interval: float = 0.0, size: int = 8, prompt_tokens: int = 5
    ) -> None:
        self.events = events
        self.prompt_tokens = prompt_tokens
        self.interval = interval
        self.size = size
        self.requests: list[Served] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        try:
            line, headers, body = _read_request(conn)
        except (ConnectionError, OSError):
            conn.close()
            return
        served = Served(line, headers, body)
        self.requests.append(served)

        def watch() -> None:  # the client's end: recv returns b"" when it closes
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass
            served.closed.set()

        threading.Thread(target=watch, daemon=True).start()
        try:
            head = (
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )
            conn.sendall(head)
            text = "x" * self.size
            for _ in range(self.events):
                if served.closed.is_set() or self._stop.is_set():
                    return
                chunk = chat_chunk(text)
                conn.sendall(chunk)
                served.sent += len(chunk)
                if self.interval:
                    time.sleep(self.interval)
            conn.sendall(chat_end(self.prompt_tokens))
            served.finished.set()
        except OSError:
            served.closed.set()
        finally:
            if served.finished.is_set():
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                served.closed.wait(5)
            conn.close()


class JsonUpstream:
    """Answers every request with `status` and the JSON `answer`; keeps what it saw."""

    def __init__(self, answer: Any, status: int = 200) -> None:
        self.answer = answer
        self.status = status
        self.requests: list[Served] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            with conn:
                try:
                    line, headers, body = _read_request(conn)
                except (ConnectionError, OSError):
                    continue
                self.requests.append(Served(line, headers, body))
                data = json.dumps(self.answer).encode()
                conn.sendall(
                    f"HTTP/1.1 {self.status} X\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
                    + data
                )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@contextmanager
def gateway_in_thread(app: Any, **options: Any) -> Iterator[str]:
    """`app` on uvicorn (h11) in a thread, on a free loopback port: its base URL."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        access_log=False,
        log_config=None,
        http="h11",
        **options,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def _answers(url: str) -> bool:
    """Whether a server answers there (several workers listen only once started)."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


_MAIN = "import sys; from stream_core._cli import main; sys.exit(main())"


class GatewayProcess:
    """A real `stream-core gateway` process (its PID kept; stopped by it, never by name);
    `url` once uvicorn says where it listens; `output()` is what it wrote."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self._out = open(cwd / "gateway.out", "w+b")  # noqa: SIM115
        self._err = open(cwd / "gateway.err", "w+b")  # noqa: SIM115
        script = Path(sys.executable).parent / "stream-core"
        command = [str(script)] if script.exists() else [sys.executable, "-c", _MAIN]
        self.proc = subprocess.Popen(
            [*command, "gateway", "--port", "0", *args],
            stdout=self._out,
            stderr=self._err,
            env={**os.environ, **env},
            cwd=cwd,
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._err.seek(0)
            found = re.search(rb"running on (http://127\.0\.0\.1:\d+)", self._err.read())
            if found and _answers(found.group(1).decode() + "/health"):
                return found.group(1).decode()
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the gateway did not start: {self.output()}")

    def output(self) -> str:
        self._out.seek(0)
        self._err.seek(0)
        return (self._out.read() + self._err.read()).decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(20)
        self._out.close()
        self._err.close()
