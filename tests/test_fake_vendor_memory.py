"""`stream-core serve` holds bounded memory, whatever it is sent: the peak RSS of a server
process (Linux `/proc`) across many large requests, and across hostile bodies sent at once.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stream_core.testing._serve import MAX_REQUEST_BODY

FIXTURES = Path(__file__).parents[1] / "contract_tests" / "fixtures"
SERVE = "import sys; from stream_core._cli import main; raise SystemExit(main(sys.argv[1:]))"
GUARD = 120.0

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").is_file(), reason="reads the server's peak RSS from /proc"
)


class Served:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port

    def _status(self, key: str) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) / 1024
        raise AssertionError(f"no {key} for the server")

    def rss(self) -> float:
        return self._status("VmRSS:")

    def peak(self) -> float:
        return self._status("VmHWM:")

    def post(self, body: bytes) -> bytes:
        """One request; the status line of the answer."""
        head = (
            "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=GUARD) as sock:
            sock.sendall(head.encode() + body)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return answer.split(b"\r\n", 1)[0]


@contextmanager
def served() -> Iterator[Served]:
    reader: threading.Thread | None = None
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, "serve", str(FIXTURES), "--port", "0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        url = proc.stderr.readline().split(" on ")[-1].strip()
        stderr = proc.stderr
        reader = threading.Thread(target=lambda: [None for _ in stderr], daemon=True)
        reader.start()
        yield Served(proc, int(url.rsplit(":", 1)[1]))
    finally:
        proc.terminate()
        proc.wait(30)
        if reader is not None:
            reader.join(30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_many_large_requests_are_kept_in_bounded_memory() -> None:
    body = json.dumps({"model": "nobody", "pad": "x" * (1024 * 1024 - 40)}).encode()
    with served() as server:
        before = server.rss()
        statuses = {server.post(body) for _ in range(300)}
        grown = server.peak() - before
    assert statuses == {b"HTTP/1.1 404 Not Found"}
    # 300 MB were sent; the server keeps a bounded window of them (was +600 MB).
    assert grown < 120, f"the server grew {grown:.0f} MB over 300 requests of 1 MB"


def test_bodies_that_parse_into_millions_of_objects_cost_bounded_memory() -> None:
    body = b"[" + b"{}," * ((MAX_REQUEST_BODY - 3) // 3) + b"{}]"
    assert len(body) <= MAX_REQUEST_BODY
    with served() as server:
        before = server.rss()
        statuses: list[bytes] = []
        senders = [
            threading.Thread(target=lambda: statuses.append(server.post(body))) for _ in range(8)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(GUARD)
        grown = server.peak() - before
    assert statuses == [b"HTTP/1.1 404 Not Found"] * 8
    # Eight 32 MiB bodies of `{}` at once (was +800 MB for one, +1.8 GB for eight here).
    assert grown < 300, f"the server grew {grown:.0f} MB over eight hostile bodies"
