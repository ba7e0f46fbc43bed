"""The gateway's operations, from the client's side: a client that hangs up or stops
reading, shutdown mid-stream, request size limits, per-key limits and budgets, the
health endpoint, the access log, the library's spans, and no vendor key anywhere a
client or a log reader could see it.

Upstreams are loopback servers (`ops_upstreams`); the gateway runs on uvicorn in a
thread, or as a real `stream-core gateway` process where signals are the point."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ops_upstreams import ChatUpstream, GatewayProcess, JsonUpstream, gateway_in_thread

from stream_core.gateway import GatewayConfig, GatewayKey, Upstream, create_app, hash_key

VENDOR_KEY = "sk-vendor-0p5-T3st-9f2c7d1e5a"
KEY_ENV = "OPS_TEST_VENDOR_KEY"
ALICE = "gk-alice-7c1d2e"  # a gateway key

ANTHROPIC = ("/v1/messages", {"anthropic-version": "2023-06-01"})
CHAT = ("/v1/chat/completions", {})
DIALECTS = {"anthropic-messages": ANTHROPIC, "openai-completions": CHAT}


def request(dialect: str, prompt: str = "hello", *, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
    if dialect == "anthropic-messages":
        body["max_tokens"] = 100
    if stream:
        body["stream"] = True
    return body


@pytest.fixture
def vendor_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, VENDOR_KEY)
    return VENDOR_KEY


def config_for(upstream_url: str, **kw: Any) -> GatewayConfig:
    model = Upstream("openai/gpt-4o-mini", base_url=upstream_url, api_key_env=KEY_ENV)
    return GatewayConfig(models={"m": model}, **kw)


@pytest.fixture
def slow() -> Iterator[ChatUpstream]:
    """An upstream that would stream for about a minute."""
    up = ChatUpstream(events=6000, interval=0.01)
    yield up
    up.close()


def raw_stream(base: str, dialect: str, extra: dict[str, str] | None = None) -> socket.socket:
    """A streaming request sent on a bare socket (the test decides when to read)."""
    path, headers = DIALECTS[dialect]
    port = int(base.rsplit(":", 1)[1])
    data = json.dumps(request(dialect)).encode()
    head = [f"POST {path} HTTP/1.1", "host: 127.0.0.1", "content-type: application/json"]
    head += [f"content-length: {len(data)}"]
    head += [f"{k}: {v}" for k, v in {**headers, **(extra or {})}.items()]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    return sock


def read_until(sock: socket.socket, marker: bytes, limit: float = 20) -> bytes:
    sock.settimeout(limit)
    seen = b""
    while marker not in seen:
        chunk = sock.recv(65536)
        assert chunk, f"closed before {marker!r}: {seen[-300:]!r}"
        seen += chunk
    return seen


# --- a client that goes away, a client that stops reading ------------------------------


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_client_that_hangs_up_cancels_the_upstream_call(
    dialect: str, slow: ChatUpstream, vendor_key: str
) -> None:
    with gateway_in_thread(create_app(config_for(slow.url))) as base:
        sock = raw_stream(base, dialect)
        read_until(sock, b"xxxxxxxx")  # content is streaming
        sock.close()
        served = slow.requests[-1]
        assert served.closed.wait(10), "the upstream call went on after the client left"
        assert not served.finished.is_set()


@pytest.mark.slow
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_client_that_stops_reading_stops_the_upstream_read(dialect: str, vendor_key: str) -> None:
    total = 40_000 * 8192  # 320 MiB, were it all read
    up = ChatUpstream(events=40_000, size=8192)
    sock: socket.socket | None = None
    try:
        with gateway_in_thread(create_app(config_for(up.url))) as base:
            sock = raw_stream(base, dialect)
            read_until(sock, b"xxxxxxxx")
            # The client reads nothing more: the gateway must stop reading the upstream.
            served = up.requests[-1]
            last, still = -1, 0.0
            deadline = time.monotonic() + 60
            while still < 1.0 and time.monotonic() < deadline:
                time.sleep(0.25)
                now = served.sent
                still = still + 0.25 if now == last else 0.0
                last = now
            assert not served.finished.is_set()
            assert served.sent < total // 4, served.sent
            # Flow control, not a failure: reading again lets the stream go on.
            sock.settimeout(10)
            deadline = time.monotonic() + 60
            while served.sent == last and time.monotonic() < deadline:
                assert sock.recv(65536)
            assert served.sent > last
            sock.close()
            assert served.closed.wait(10)
    finally:
        if sock is not None:
            sock.close()
        up.close()


# --- shutdown -------------------------------------------------------------------------


def write_config(tmp_path: Path, upstream_url: str, extra: str = "") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(
        "[models]\n"
        f'm = {{ model = "openai/gpt-4o-mini", base_url = "{upstream_url}", '
        f'api_key_env = "{KEY_ENV}" }}\n' + extra,
        encoding="utf-8",
    )
    return path


def sse_events(body: bytes) -> list[str]:
    return [line[6:].strip() for line in body.decode().splitlines() if line.startswith("event:")]


@pytest.mark.slow
def test_sigterm_mid_stream_ends_the_stream_cleanly(tmp_path: Path) -> None:
    up = ChatUpstream(events=6000, interval=0.01)  # about a minute
    gw = GatewayProcess(
        ["--config", str(write_config(tmp_path, up.url)), "--graceful-timeout", "3"],
        {KEY_ENV: VENDOR_KEY},
        tmp_path,
    )
    try:
        path, headers = ANTHROPIC
        body = b""
        with httpx.stream(
            "POST", gw.url + path, json=request("anthropic-messages"), headers=headers, timeout=30
        ) as r:
            assert r.status_code == 200
            parts = r.iter_raw()
            while b"xxxxxxxx" not in body:
                body += next(parts)
            gw.proc.send_signal(signal.SIGTERM)
            for part in parts:  # a truncated body would raise here
                body += part
        events = sse_events(body)
        assert events[0] == "message_start"
        # Ended in the dialect, as an error the client's SDK retries: not cut mid-frame.
        assert events[-1] == "error", events[-3:]
        assert json.loads(body.decode().rstrip().rsplit("data: ", 1)[1]) == {
            "type": "error",
            "error": {
                "type": "overloaded_error",
                "message": "the gateway is shutting down; try again",
            },
        }
        assert up.requests[-1].closed.wait(10)
        assert gw.proc.wait(20) == 0
        assert VENDOR_KEY not in gw.output()
    finally:
        gw.stop()
        up.close()


@pytest.mark.slow
def test_sigterm_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    up = ChatUpstream(events=30, interval=0.03)
    gw = GatewayProcess(
        ["--config", str(write_config(tmp_path, up.url)), "--graceful-timeout", "20"],
        {KEY_ENV: VENDOR_KEY},
        tmp_path,
    )
    try:
        path, headers = ANTHROPIC
        body = b""
        with httpx.stream(
            "POST", gw.url + path, json=request("anthropic-messages"), headers=headers, timeout=30
        ) as r:
            parts = r.iter_raw()
            while b"xxxxxxxx" not in body:
                body += next(parts)
            gw.proc.send_signal(signal.SIGTERM)
            for part in parts:
                body += part
        assert sse_events(body)[-1] == "message_stop"
        text = "".join(
            json.loads(line[5:])["delta"].get("text", "")
            for line in body.decode().splitlines()
            if line.startswith("data:") and '"content_block_delta"' in line
        )
        assert text == "x" * 8 * 30
        assert gw.proc.wait(20) == 0
    finally:
        gw.stop()
        up.close()


def test_health_answers_and_says_when_the_gateway_drains() -> None:
    app = create_app(GatewayConfig())

    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            before = await client.get("/health")
            app.drain(30)
            after = await client.get("/health")
        return [before, after]

    before, after = asyncio.run(main())
    assert (before.status_code, before.json()) == (200, {"status": "ok"})
    assert (after.status_code, after.json()) == (503, {"status": "draining"})


def test_a_stream_stopped_by_shutdown_before_content_is_an_overloaded_error(
    slow: ChatUpstream, vendor_key: str
) -> None:
    """Stopped before any content (the upstream still silent): the client's dialect's
    retryable error, not an empty answer."""
    app = create_app(config_for(slow.url))
    app._stop_all()  # as `drain` does when the grace runs out
    with gateway_in_thread(app) as base:
        path, headers = ANTHROPIC
        r = httpx.post(base + path, json=request("anthropic-messages"), headers=headers)
    assert r.json()["error"]["type"] == "overloaded_error"
    assert r.status_code == 529


# --- request size ---------------------------------------------------------------------


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_request_over_the_size_limit_is_a_413_in_the_dialect(dialect: str) -> None:
    app = create_app(GatewayConfig(max_request_bytes=2000))
    path, headers = DIALECTS[dialect]
    big = request(dialect, "y" * 5000)
    with gateway_in_thread(app) as base:
        declared = httpx.post(base + path, json=big, headers=headers)

        def chunks() -> Iterator[bytes]:  # no content-length: counted as it comes
            data = json.dumps(big).encode()
            for i in range(0, len(data), 1000):
                yield data[i : i + 1000]

        streamed = httpx.post(base + path, content=chunks(), headers=headers)
    for r in (declared, streamed):
        assert r.status_code == 413
        error = r.json()["error"]
        if dialect == "anthropic-messages":
            assert r.json()["type"] == "error" and error["type"] == "request_too_large"
        else:
            assert error["code"] == "request_too_large"


# --- keys: hashed, constant time, limits, budgets --------------------------------------


def test_gateway_keys_are_kept_hashed_and_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_core.gateway import _app, load_config

    path = tmp_path / "gw.toml"
    path.write_text(f'[keys.alice]\nsha256 = "{hash_key(ALICE)}"\n', encoding="utf-8")
    config = load_config(path)
    assert config.keys[0].sha256 == hashlib.sha256(ALICE.encode()).hexdigest()
    assert ALICE not in repr(config) and ALICE not in path.read_text()
    compared: list[tuple[str, str]] = []
    real = _app.hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(_app.hmac, "compare_digest", spy)
    app = create_app(config)
    with gateway_in_thread(app) as base:
        ok = httpx.get(base + "/v1/models", headers={"authorization": f"Bearer {ALICE}"})
        wrong = httpx.get(base + "/v1/models", headers={"x-api-key": ALICE + "x"})
        none = httpx.post(base + "/v1/messages", json={}, headers=dict(ANTHROPIC[1]))
    assert ok.status_code == 200
    assert wrong.status_code == 401 and none.status_code == 401
    assert none.json()["error"]["type"] == "authentication_error"
    assert compared and all(ALICE not in pair for pair in compared)


def test_max_concurrent_refuses_the_extra_request_with_a_429_in_its_dialect(
    slow: ChatUpstream, vendor_key: str
) -> None:
    quick = ChatUpstream()
    key = GatewayKey("alice", hash_key(ALICE), max_concurrent=1)
    config = config_for(slow.url, keys=[key])
    config.models["quick"] = Upstream("openai/gpt-4o-mini", base_url=quick.url, api_key_env=KEY_ENV)
    auth = {"x-api-key": ALICE}
    path, headers = ANTHROPIC
    try:
        with gateway_in_thread(create_app(config)) as base:
            first = raw_stream(base, "anthropic-messages", auth)
            read_until(first, b"xxxxxxxx")
            body = request("anthropic-messages", stream=False) | {"model": "quick"}
            second = httpx.post(base + path, json=body, headers=headers | auth)
            chat = httpx.post(base + CHAT[0], json=request("openai-completions"), headers=auth)
            first.close()
            deadline = time.monotonic() + 10
            while True:  # the first request's slot is given back once it is cancelled
                third = httpx.post(base + path, json=body, headers=headers | auth)
                if third.status_code != 429 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
    finally:
        quick.close()
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert second.json()["error"]["type"] == "rate_limit_error"
    assert chat.status_code == 429 and "rate_limit" in json.dumps(chat.json()["error"])
    assert third.status_code == 200, third.text


def test_a_key_budget_holds_without_a_limit_store(vendor_key: str) -> None:
    up = ChatUpstream()
    try:
        keys = [
            GatewayKey("alice", hash_key(ALICE), budget_usd=0.0),
            GatewayKey("bob", hash_key("gk-bob")),
        ]
        app = create_app(config_for(up.url, keys=keys))
        path, headers = ANTHROPIC
        body = request("anthropic-messages", stream=False)
        with gateway_in_thread(app) as base:
            alice = httpx.post(base + path, json=body, headers=headers | {"x-api-key": ALICE})
            bob = httpx.post(base + path, json=body, headers=headers | {"x-api-key": "gk-bob"})
        assert alice.status_code >= 400 and alice.json()["type"] == "error"
        assert "budget" in alice.json()["error"]["message"]
        assert bob.status_code == 200
        assert len(up.requests) == 1  # alice's call was never sent
    finally:
        up.close()


@pytest.mark.slow
def test_a_key_budget_is_shared_by_gateway_processes_through_redis(tmp_path: Path) -> None:
    from redis_server import session_url

    url, redis = session_url()
    up = ChatUpstream(prompt_tokens=100_000)  # $0.015 at gpt-4o-mini's price
    name = f"alice-{uuid.uuid4().hex[:8]}"  # a budget no other run of the store has spent
    extra = f'[gateway]\nlimits_store = "{url}"\n[keys.{name}]\n'
    extra += f'sha256 = "{hash_key(ALICE)}"\nbudget_usd = 0.001\n'
    config = write_config(tmp_path, up.url, extra)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    env = {KEY_ENV: VENDOR_KEY}
    first = GatewayProcess(["--config", str(config)], env, tmp_path / "a")
    second = GatewayProcess(["--config", str(config)], env, tmp_path / "b")
    try:
        path, headers = ANTHROPIC
        body = request("anthropic-messages", stream=False)
        auth = headers | {"x-api-key": ALICE}
        spent = httpx.post(first.url + path, json=body, headers=auth, timeout=30)
        refused = httpx.post(second.url + path, json=body, headers=auth, timeout=30)
        again = httpx.post(first.url + path, json=body, headers=auth, timeout=30)
    finally:
        first.stop()
        second.stop()
        up.close()
        if redis is not None:
            redis.stop()
    assert spent.status_code == 200, spent.text
    for r in (refused, again):
        assert r.status_code >= 400 and "budget" in r.json()["error"]["message"], r.text
    assert len(up.requests) == 1


# --- the access log, spans, secrets ---------------------------------------------------


def test_one_access_line_per_request_with_no_key_and_no_prompt(
    caplog: pytest.LogCaptureFixture, vendor_key: str
) -> None:
    up = ChatUpstream()
    try:
        app = create_app(config_for(up.url, keys=[GatewayKey("alice", hash_key(ALICE))]))
        prompt = "the launch codes are 0000"
        caplog.set_level(logging.INFO, logger="stream_core.gateway.access")
        with gateway_in_thread(app) as base:
            path, headers = ANTHROPIC
            r = httpx.post(
                base + path,
                json=request("anthropic-messages", prompt),
                headers=headers | {"x-api-key": ALICE},
            )
            assert r.status_code == 200
            httpx.get(base + "/health")
        lines = [r.getMessage() for r in caplog.records if r.name == "stream_core.gateway.access"]
    finally:
        up.close()
    assert len(lines) == 2, lines
    assert lines[0].startswith("POST /v1/messages 200 key=alice model=m ms=")
    assert "in=5 out=7" in lines[0] and "stop=stop" in lines[0]
    assert lines[1].startswith("GET /health 200")
    for line in lines:
        assert ALICE not in line and VENDOR_KEY not in line and "launch codes" not in line


def test_the_library_spans_are_still_produced(
    monkeypatch: pytest.MonkeyPatch, vendor_key: str
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from stream_core import _otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(_otel, "_tracer", provider.get_tracer("stream_core"))
    up = ChatUpstream()
    try:
        with gateway_in_thread(create_app(config_for(up.url))) as base:
            path, headers = CHAT
            r = httpx.post(base + path, json=request("openai-completions"), headers=headers)
            assert r.status_code == 200
    finally:
        up.close()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat gpt-4o-mini"]
    attributes = spans[0].attributes or {}
    assert attributes["gen_ai.usage.input_tokens"] == 5
    assert attributes["gen_ai.usage.output_tokens"] == 7


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_vendor_key_is_never_in_an_answer_or_a_log_line(
    dialect: str, stream: bool, caplog: pytest.LogCaptureFixture, vendor_key: str
) -> None:
    """Even when the vendor echoes the key in its error."""
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {VENDOR_KEY}.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    refusing = JsonUpstream(echo, status=401)
    working = ChatUpstream()
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    try:
        for up in (refusing, working):
            app = create_app(config_for(up.url if up is working else up.url + "/v1"))
            path, headers = DIALECTS[dialect]
            with gateway_in_thread(app) as base:
                r = httpx.post(base + path, json=request(dialect, stream=stream), headers=headers)
                seen.append(f"{r.status_code} {r.headers} {r.text}")
        assert refusing.requests[0].headers["authorization"] == f"Bearer {VENDOR_KEY}"
    finally:
        refusing.close()
        working.close()
    assert seen[0].startswith("401 ") and seen[1].startswith("200 ")
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for text in [*seen, logged]:
        assert VENDOR_KEY not in text
        assert VENDOR_KEY[6:20] not in text


def test_log_prompts_quotes_the_last_user_message_clipped(
    caplog: pytest.LogCaptureFixture, vendor_key: str
) -> None:
    """`log_prompts = true`: the access line quotes the start of the last user message
    (off by default: the test above holds that no prompt is logged)."""
    up = ChatUpstream()
    try:
        config = config_for(up.url)
        config.log_prompts = True
        caplog.set_level(logging.INFO, logger="stream_core.gateway.access")
        with gateway_in_thread(create_app(config)) as base:
            path, headers = ANTHROPIC
            body = request("anthropic-messages", "x" * 500)
            assert httpx.post(base + path, json=body, headers=headers).status_code == 200
        lines = [r.getMessage() for r in caplog.records if r.name == "stream_core.gateway.access"]
    finally:
        up.close()
    assert len(lines) == 1
    assert f' prompt="{"x" * 200}"' in lines[0]
    assert "x" * 201 not in lines[0]


def test_a_model_name_cannot_forge_an_access_line(
    caplog: pytest.LogCaptureFixture, vendor_key: str
) -> None:
    """The model name is the client's: a newline in it is written escaped, as is a lone
    surrogate (which would break a log handler that writes UTF-8)."""
    up = ChatUpstream()
    try:
        caplog.set_level(logging.INFO, logger="stream_core.gateway.access")
        with gateway_in_thread(create_app(config_for(up.url))) as base:
            path, headers = ANTHROPIC
            body = request("anthropic-messages") | {"model": "m\nPOST /v1/x 200 key=admin\ud800"}
            sent = json.dumps(body).encode()  # the surrogate as its JSON escape
            httpx.post(base + path, content=sent, headers=headers)
        lines = [r.getMessage() for r in caplog.records if r.name == "stream_core.gateway.access"]
    finally:
        up.close()
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "model=m\\nPOST /v1/x 200 key=admin\\ud800 " in lines[0]
    lines[0].encode("utf-8")
