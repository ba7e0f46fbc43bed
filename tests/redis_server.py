"""A real `redis-server` on loopback for the tests: the one `.ci/run` started (its URL in
`STREAM_CORE_TEST_REDIS`), else one started here from the `redis-server` on the PATH
(Debian's package: `apt-get install redis-server`). With neither, the Redis tests skip,
unless `STREAM_CORE_REQUIRE_REDIS=1` (set by `.ci/run`), which makes them fail instead."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """A redis-server process this test session started (stopped by PID, never by name)."""

    def __init__(self, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("STREAM_CORE_REQUIRE_REDIS") == "1":
                pytest.fail("redis-server is not installed (apt-get install redis-server)")
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.port = port or _free_port()
        self.dir = tempfile.mkdtemp(prefix="stream-core-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.binary = binary

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


def session_url() -> tuple[str, RedisServer | None]:
    """The URL of the session's Redis, and the server when this process started it."""
    given = os.environ.get("STREAM_CORE_TEST_REDIS")
    if given:
        port = int(given.rsplit(":", 1)[1].split("/")[0])
        deadline = time.monotonic() + 10
        while not _ping(port):  # .ci/run starts it just before the tests
            if time.monotonic() > deadline:
                pytest.fail(f"no redis-server answers at {given}")
            time.sleep(0.05)
        return given, None
    server = RedisServer().start()
    return server.url, server
