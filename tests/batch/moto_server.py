"""A real S3-compatible server on loopback for the Bedrock batch tests: moto in server mode
(`moto_server`, from the dev dependency `moto[s3,server]`), started on 127.0.0.1 at a free
port, waited for until it answers, and stopped by its PID (never by name). When moto is
not installed or does not start, the tests that need it skip, saying why."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from stream_core.providers import _aws, _s3

CREDENTIALS = _aws.Credentials("testing-access-key", "testing-secret-key")
"""moto takes any keys; these never reach a real account."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command() -> list[str] | None:
    here = Path(sys.executable).parent / "moto_server"
    binary = str(here) if here.exists() else shutil.which("moto_server")
    if binary is not None:
        return [binary]
    if importlib.util.find_spec("moto") is not None:
        return [sys.executable, "-m", "moto.server"]
    return None


class MotoServer:
    """One `moto_server` process this test session started."""

    def __init__(self) -> None:
        command = _command()
        if command is None:
            pytest.skip("moto is not installed (uv sync: it is a dev dependency)")
        self.command = command
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkdtemp(prefix="stream-core-moto-")) / "moto.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/moto-api/", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    def start(self) -> MotoServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [*self.command, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                said = self.log.read_text(errors="replace")[-500:]
                self.stop()
                pytest.skip(f"moto_server did not start on port {self.port}: {said}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        shutil.rmtree(self.log.parent, ignore_errors=True)

    def bucket(self, name: str) -> _s3.BlockingS3:
        """A new bucket (path-style `PUT /<bucket>`), and a client of it."""
        client = httpx.Client(timeout=10)
        s3 = _s3.BlockingS3(_s3.S3(self.url, name, "us-east-1", CREDENTIALS), client)
        request = client.build_request("PUT", s3.s3.url())
        s3.s3.sign(request)
        response = client.send(request)
        assert response.status_code == 200, response.text
        return s3
