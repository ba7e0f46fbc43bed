"""A loopback HTTP/1.1 server in threads of its own, outside the test's event loop: it keeps
serving while that loop ends, and it sees each TCP connection's own life (how many were
opened, when the client closed one)."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from anyio.abc import SocketStream

from stream_core import Model

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
END = b"0\r\n\r\n"
GUARD = 10.0  # seconds: a guard against hangs, not a timing assertion


def content_length(head: bytes) -> int:
    """The `content-length` of a request head (the lines after the request line), else 0."""
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return length


async def read_request(conn: SocketStream, buf: bytes) -> bytes:
    """Read one request (head and body) from `conn`, `buf` being what was read past the
    last one; returns what was read past this one. Raises `anyio.EndOfStream` at a close."""
    while b"\r\n\r\n" not in buf:
        buf += await conn.receive()
    head, buf = buf.split(b"\r\n\r\n", 1)
    length = content_length(head)
    while len(buf) < length:
        buf += await conn.receive()
    return buf[length:]


EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"ab"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]
"""An Anthropic answer "ab"; the first three events are its head (some text, no end)."""


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Connection:
    """One accepted TCP connection, as the server saw it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.requests = 0
        self.closed = threading.Event()
        """Set when the client closed (or reset) the connection."""

    def send(self, data: bytes) -> bool:
        """Send; False when the client has gone."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed.set()
            return False
        return True

    def hold(self) -> None:
        """Send nothing more; return when the client closes the connection."""
        self.sock.settimeout(GUARD * 3)
        try:
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.closed.set()


Answer = Callable[[Connection], None]
"""Writes one whole answer (status line and all) on the connection."""


class Loopback:
    def __init__(self, answers: list[Answer] | Answer) -> None:
        self.answers = answers
        self.connections: list[Connection] = []
        self.port = 0

    def next_answer(self) -> Answer:
        if callable(self.answers):
            return self.answers
        return self.answers.pop(0)

    def serve(self, sock: socket.socket) -> None:
        conn = Connection(sock)
        self.connections.append(conn)
        buf = b""
        sock.settimeout(GUARD * 3)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        conn.closed.set()
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = content_length(head)
                while len(buf) < length:
                    buf += sock.recv(65536)
                buf = buf[length:]
                conn.requests += 1
                self.next_answer()(conn)
                if conn.closed.is_set():
                    return
        except OSError:
            conn.closed.set()

    def model(self) -> Model:
        return Model(
            id="claude-x",
            api="anthropic-messages",
            provider="local",
            base_url=f"http://127.0.0.1:{self.port}",
        )


@contextmanager
def loopback(answers: list[Answer] | Answer) -> Iterator[Loopback]:
    server = Loopback(answers)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            server.serve(self.request)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as srv:
        srv.daemon_threads = True
        server.port = srv.server_address[1]
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            srv.shutdown()
            for conn in server.connections:
                try:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def whole_answer(conn: Connection) -> None:
    conn.send(HEAD + b"\r\n" + b"".join(chunk(e) for e in EVENTS) + END)


def head_then_hold(conn: Connection, headers: bytes = b"") -> None:
    """Some text, then nothing: the body stays open until the client closes it."""
    if conn.send(HEAD + headers + b"\r\n" + b"".join(chunk(e) for e in EVENTS[:3])):
        conn.hold()
