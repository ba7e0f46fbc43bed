"""The testing kit against hostile servers (issue 23, point 10 and the Low items on
`serve`): `stream-core record` writes no fragment of a key, however the vendor echoes it;
`serve` keeps bounded records, refuses bodies it should not read, and never shows a key.
"""

from __future__ import annotations

import gzip
import json
import socket
import time
from pathlib import Path

import pytest
from threaded_loopback import GUARD, Connection, loopback

import stream_core
from stream_core import StreamOptions
from stream_core._cli import main
from stream_core.testing import fake_vendor
from stream_core.testing._serve import MAX_KEPT_BODY, MAX_REQUEST_BODY, FakeVendor

KEY = "sk-or-v1-Zq8Hc3Lm0Pw7Rt5Yx2Vb9Nk4Jd6Gf1Ss"
FRAGMENT = 8


def _chunk(text: str) -> bytes:
    delta = {"id": "c1", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(delta).encode() + b"\n\n"


_END = (
    b"data: "
    + json.dumps(
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    ).encode()
    + b"\n\ndata: [DONE]\n\n"
)


def _http(body: bytes, *, status: str = "200 OK", headers: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status.encode()
        + b"\r\n"
        + headers
        + b"content-length: %d\r\n\r\n" % len(body)
        + body
    )


SSE = b"content-type: text/event-stream\r\n"
_half = len(KEY) // 2
_escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
BODIES: dict[str, bytes] = {
    "whole": _http(_chunk(f"your key is {KEY}.") + _END, headers=SSE),
    "split across deltas": _http(
        _chunk(f"your key is {KEY[:_half]}") + _chunk(f"{KEY[_half:]}, really.") + _END,
        headers=SSE,
    ),
    "in three pieces": _http(
        _chunk(KEY[:7]) + _chunk(KEY[7:14]) + _chunk(KEY[14:]) + _END, headers=SSE
    ),
    "unicode-escaped": _http(
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"key '
        + _escaped.encode()
        + b'"}}]}\n\n'
        + _END,
        headers=SSE,
    ),
    "gzip": _http(
        gzip.compress(_chunk(f"key {KEY}") + _END), headers=SSE + b"content-encoding: gzip\r\n"
    ),
    "401 with an ellipsis": _http(
        json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {KEY[:12]}...{KEY[-9:]}",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        ).encode(),
        status="401 Unauthorized",
        headers=b"content-type: application/json\r\n",
    ),
    "in a tool call's arguments": _http(
        b"data: "
        + json.dumps(
            {
                "id": "c1",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": "f", "arguments": json.dumps({"k": KEY})},
                                }
                            ]
                        },
                    }
                ],
            }
        ).encode()  # fmt: skip
        + b"\n\n"
        + _END,
        headers=SSE,
    ),
}


def _fragments(secret: str) -> list[bytes]:
    return [secret[i : i + FRAGMENT].encode() for i in range(len(secret) - FRAGMENT + 1)]


def _views(data: bytes) -> list[bytes]:
    """The bytes, and every JSON string in them decoded (escapes undone)."""
    views = [data]
    for line in data.splitlines():
        text = line.decode("utf-8", "replace")
        if text.startswith(("data: ", "{")):
            try:
                views.append(
                    json.dumps(json.loads(text.removeprefix("data: ")), ensure_ascii=False).encode()
                )
            except ValueError:
                pass
    return views


@pytest.mark.parametrize("case", list(BODIES))
def test_record_writes_no_fragment_of_the_key(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(conn: Connection) -> None:
        conn.send(BODIES[case])

    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    out = tmp_path / "rec"
    with loopback(answer) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        status = main(["record", "openrouter/leaky", "hi", "-o", str(out), "--base-url", base])
    written = [tmp_path / "rec.body", tmp_path / "rec.json"]
    if status != 0 and not written[0].exists():
        return  # refused: nothing written at all is also no fragment written
    assert all(p.exists() for p in written)
    data = b"".join(p.read_bytes() for p in written)
    # The assembled answer is the decoded view of split deltas: check it too.
    meta = json.loads(written[1].read_text())
    views = [*_views(data), json.dumps(meta["expect"], ensure_ascii=False).encode()]
    joined = b"".join(
        block.get("text", "").encode()
        for block in meta["expect"]["content"]
        if isinstance(block, dict)
    )
    views.append(joined)
    for view in views:
        for fragment in _fragments(KEY):
            assert fragment not in view, (case, fragment)
    assert b"content-encoding" not in written[1].read_bytes()
    if case == "gzip":
        assert written[0].read_bytes().startswith(b"data: ")  # stored decoded


def test_record_keeps_a_clean_answer_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _chunk("nothing secret here") + _END

    def answer(conn: Connection) -> None:
        conn.send(_http(body, headers=SSE))

    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    with loopback(answer) as server:
        status = main(
            ["record", "openrouter/clean", "hi", "-o", str(tmp_path / "rec"),
             "--base-url", f"http://127.0.0.1:{server.port}/v1"]
        )  # fmt: skip
    assert status == 0
    assert (tmp_path / "rec.body").read_bytes() == body
    expect = json.loads((tmp_path / "rec.json").read_text())["expect"]
    assert expect["content"] == [{"type": "text", "text": "nothing secret here"}]


# --- serve: bounded, and never showing a key -----------------------------------------------

SCENARIO = {"*": [_chunk("hi") + _END]}


def _raw(port: int, data: bytes, *, wait: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(data)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except TimeoutError:
            pass
        return got


def test_repr_of_a_served_request_hides_the_key() -> None:
    with fake_vendor(scenarios=SCENARIO) as server:
        model = stream_core.Model(
            id="m", api="openai-completions", provider="openai", base_url=server.url + "/v1"
        )
        message = stream_core.complete_sync(
            model, {"messages": [{"role": "user", "content": "hi"}]}, StreamOptions(api_key=KEY)
        )
        assert message.text() == "hi"
        shown = repr(server.requests[0]) + str(server.requests) + f"{server.requests[0]}"
    assert KEY not in shown and KEY[:FRAGMENT] not in shown
    assert "[redacted]" in shown
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # kept for tests


@pytest.mark.parametrize("length", ["-1", "abc", "1e9"])
def test_a_bad_content_length_is_refused_unread(length: str) -> None:
    with fake_vendor(scenarios=SCENARIO) as server:
        port = int(server.url.rsplit(":", 1)[1])
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-length: {length}\r\n\r\n"
        )
        answer = _raw(port, head.encode() + b"{}" * 100)
    assert answer.startswith(b"HTTP/1.1 400")


def test_a_body_over_the_limit_is_refused_unread() -> None:
    with fake_vendor(scenarios=SCENARIO) as server:
        port = int(server.url.rsplit(":", 1)[1])
        size = MAX_REQUEST_BODY + 1
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-length: {size}\r\n\r\n"
        )
        answer = _raw(port, head.encode())  # the body is never sent: nor is it waited for
    assert answer.startswith(b"HTTP/1.1 413")
    assert server.requests == []


def test_a_half_sent_head_is_closed_after_the_read_timeout() -> None:
    with fake_vendor(scenarios=SCENARIO, read_timeout=0.3) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # never ends
            assert sock.recv(65536) == b""  # closed by the server, not held open


def test_stored_requests_are_bounded() -> None:
    with fake_vendor(scenarios={"*": [_chunk("hi") + _END] * 3}) as server:
        port = int(server.url.rsplit(":", 1)[1])
        big = b'{"model": "m", "pad": "' + b"x" * (2 * MAX_KEPT_BODY) + b'"}'
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-length: {len(big)}\r\nconnection: close\r\n\r\n"
        )
        _raw(port, head.encode() + big)
    (kept,) = server.requests
    assert kept.truncated and len(kept.raw) == MAX_KEPT_BODY and kept.body is None


def test_connections_past_the_bound_are_closed_at_once() -> None:
    with FakeVendor(scenarios=SCENARIO, max_connections=2) as server:
        port = int(server.url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port), timeout=GUARD) for _ in range(2)]
        try:
            for sock in held:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")  # half a head: held
            time.sleep(0.2)
            with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as extra:
                assert extra.recv(65536) == b""  # refused: no thread for it
        finally:
            for sock in held:
                sock.close()
