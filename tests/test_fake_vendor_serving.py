"""`fake_vendor` / `stream-core serve` as a harness meets them: a scripted tool loop over
kept-alive connections, a client that never blames the vendor for a reused connection the
server had dropped, and the server's bounds (body size, kept requests, hosts, slow heads).
"""

from __future__ import annotations

import io
import json
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from threaded_loopback import GUARD, Connection, loopback, whole_answer

import stream_core
from stream_core import StreamOptions, complete, complete_sync
from stream_core.testing import FauxTurn, fake_vendor, faux_text, faux_tool_call, vendor_bytes

ASK = {"messages": [{"role": "user", "content": "Rain in Paris?"}]}


@pytest.mark.parametrize(
    ("provider", "model_id"), [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o")]
)
def test_a_scripted_tool_loop_answers_both_calls(provider: str, model_id: str) -> None:
    model = stream_core.get_model(provider, model_id)
    script: list[str | FauxTurn] = [faux_tool_call("get_forecast", {"city": "Paris"}), "final"]
    with fake_vendor(scenarios={model.id: script}) as server:
        base = server.url + ("/v1" if model.api == "openai-completions" else "")
        options = StreamOptions(base_url=base, api_key="test-key", max_retries=0)
        first = complete_sync(model, ASK, options)
        second = complete_sync(model, ASK, options)
    assert first.error is None and first.stop_reason == "tool_use", first.error
    assert [c.name for c in first.tool_calls()] == ["get_forecast"]
    assert second.error is None and second.stop_reason == "stop", second.error
    assert second.text() == "final"
    assert [r.status for r in server.requests] == [200, 200]


def test_the_same_client_keeps_its_connection_across_a_scripted_loop() -> None:
    model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    script: list[str | FauxTurn] = [faux_tool_call("get_forecast", {"city": "Paris"})]
    script += [faux_text("a"), "b"]
    with fake_vendor(scenarios={model.id: script}) as server:
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)

        async def three() -> list[stream_core.AssistantMessage]:
            return [await complete(model, ASK, options) for _ in range(3)]

        answers = anyio.run(three)
    assert [a.stop_reason for a in answers] == ["tool_use", "stop", "stop"]
    assert [a.text() for a in answers[1:]] == ["a", "b"]


def test_a_recording_that_cannot_be_read_is_answered_not_dropped(tmp_path: Path) -> None:
    gone = tmp_path / "gone.body"
    gone.write_bytes(b"x")
    model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    with fake_vendor(scenarios={model.id: [gone]}) as server:
        gone.unlink()  # the server fails to read it: an answer, never a dropped connection
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
        answer = complete_sync(model, ASK, options)
    assert answer.error is not None and answer.error.status_code == 500, answer.error
    assert "fake vendor" in answer.error.message


def _answer_first_then_drop(conn: Connection) -> None:
    """The first request of a connection is answered; the next one on it meets a server
    that closed the idle connection just as it came (no byte of a response)."""
    if conn.requests == 1:
        whole_answer(conn)
        return
    conn.sock.close()
    conn.closed.set()


@pytest.mark.anyio
async def test_a_reused_connection_dropped_before_any_byte_is_retried_on_a_new_one() -> None:
    with loopback(_answer_first_then_drop) as server:
        model = server.model()
        options = StreamOptions(api_key="test-key", max_retries=0)
        with anyio.fail_after(GUARD):
            first = await complete(model, ASK, options)
            second = await complete(model, ASK, options)
        requests = [c.requests for c in server.connections]
    assert first.error is None and first.text() == "ab", first.error
    assert second.error is None and second.text() == "ab", second.error
    # The second call went out on the kept connection, met the close, and was sent again
    # once, on a new connection.
    assert requests[:2] == [2, 1], requests


@pytest.mark.anyio
async def test_a_new_connection_dropped_before_any_byte_is_the_vendors_failure() -> None:
    def drop(conn: Connection) -> None:
        conn.sock.close()
        conn.closed.set()

    with loopback(drop) as server:
        options = StreamOptions(api_key="test-key", max_retries=0)
        with anyio.fail_after(GUARD):
            answer = await complete(server.model(), ASK, options)
        connections = len(server.connections)
    assert answer.error is not None and answer.error.kind == "network", answer.error
    assert connections == 1  # not sent again: a fresh connection has no stale excuse


def _raw(port: int, data: bytes, *, host: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=GUARD) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def _post(host_header: str, extra: str = "", body: bytes = b'{"model": "m"}') -> bytes:
    return (
        f"POST /v1/messages HTTP/1.1\r\nhost: {host_header}\r\n{extra}"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


SCRIPT = {"*": ["hi"] * 20}


@pytest.mark.parametrize(
    "host_header", ["127.0.0.1", "localhost", "LOCALHOST:8765", "127.0.0.1:80", "[::1]:9"]
)
def test_loopback_hosts_are_answered(host_header: str) -> None:
    with fake_vendor(scenarios=SCRIPT) as server:
        answer = _raw(server.port, _post(host_header))
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


@pytest.mark.parametrize(
    "host_header", ["evil.example", "evil.example:8765", "localhost.evil.example", "10.0.0.1"]
)
def test_other_hosts_are_refused_unanswered(host_header: str) -> None:
    with fake_vendor(scenarios=SCRIPT) as server:
        answer = _raw(server.port, _post(host_header))
    assert answer.startswith(b"HTTP/1.1 421"), answer[:200]
    assert server.requests == [] and server.scenarios["*"].served == 0


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil"])
def test_a_web_page_of_another_origin_is_refused(origin: str) -> None:
    with fake_vendor(scenarios=SCRIPT) as server:
        answer = _raw(server.port, _post("127.0.0.1", f"origin: {origin}\r\n"))
        local = _raw(server.port, _post("127.0.0.1", "origin: http://localhost:3000\r\n"))
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert local.startswith(b"HTTP/1.1 200"), local[:200]
    assert len(server.requests) == 1


def test_allowed_hosts_are_answered() -> None:
    with fake_vendor(scenarios=SCRIPT, allow_hosts=["vendor.test"]) as server:
        named = _raw(server.port, _post("vendor.test:443", "origin: https://vendor.test\r\n"))
        other = _raw(server.port, _post("evil.example"))
    with fake_vendor(scenarios=SCRIPT, allow_hosts=["*"]) as server:
        anything = _raw(server.port, _post("evil.example", "origin: https://evil.example\r\n"))
    assert named.startswith(b"HTTP/1.1 200"), named[:200]
    assert other.startswith(b"HTTP/1.1 421"), other[:200]
    assert anything.startswith(b"HTTP/1.1 200"), anything[:200]


def test_a_half_sent_head_does_not_hold_other_clients() -> None:
    with fake_vendor(scenarios=SCRIPT, read_timeout=30) as server:
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=GUARD)
        try:
            slow.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: 127")  # and nothing more
            answer = _raw(server.port, _post("127.0.0.1"))
        finally:
            slow.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_a_head_sent_a_byte_at_a_time_ends_at_the_read_timeout() -> None:
    head = b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\n" + b"x-pad: 1\r\n" * 500
    with fake_vendor(scenarios=SCRIPT, read_timeout=0.5) as server:
        started = time.monotonic()
        closed = False
        with socket.create_connection(("127.0.0.1", server.port), timeout=GUARD) as sock:
            for byte in head:  # a byte every 20 ms: each read well within the timeout
                if time.monotonic() - started > GUARD:
                    break
                try:
                    sock.sendall(bytes([byte]))
                    readable, _, _ = select.select([sock], [], [], 0.02)
                    if readable:
                        closed = sock.recv(65536) == b""
                        break
                except OSError:
                    closed = True
                    break
    assert closed, "a head trickled in byte by byte held its connection past the timeout"


def test_the_request_log_holds_parsed_bodies() -> None:
    log = io.StringIO()
    with fake_vendor(scenarios=SCRIPT, request_log=log) as server:
        _raw(server.port, _post("127.0.0.1", body=b'{"model": "m", "n": 1}'))
    (kept,) = server.requests
    assert kept.body == {"model": "m", "n": 1} and kept.model == "m"
    assert json.loads(log.getvalue())["body"] == {"model": "m", "n": 1}


def test_serve_answers_the_hosts_it_is_told_to(tmp_path: Path) -> None:
    vendor_bytes(faux_text("Hi"), "anthropic-messages").write(tmp_path / "hi")
    code = "import sys; from stream_core._cli import main; raise SystemExit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--scenario", str(tmp_path / "hi.body"),
         "--port", "0", "--allow-host", "vendor.test"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        port = int(proc.stderr.readline().strip().rsplit(":", 1)[1])
        allowed = _raw(port, _post("vendor.test:8765"))
        other = _raw(port, _post("evil.example"))
    finally:
        proc.terminate()
        proc.wait(GUARD)
        if proc.stderr is not None:
            proc.stderr.close()
    assert allowed.startswith(b"HTTP/1.1 200"), allowed[:200]
    assert other.startswith(b"HTTP/1.1 421"), other[:200]
