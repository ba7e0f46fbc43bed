"""`fake_vendor(..., quota=Quota(...))` (issue 37): windowed quotas answered with each
vendor's real rate-limit headers and, over quota, its 429 with `retry-after`, so a harness
tests its own limits offline; and the library itself learns those limits from the headers
and waits (`configure_limits`). The fake's clock is pinned where a window matters; the one
real wait is a window of 0.3 s."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    Context,
    Model,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
    get_model,
)
from stream_core._limits.headers import limits_from_headers
from stream_core.testing import Quota, fake_vendor, faux_text, vendor_bytes

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])
GUARD = 10.0  # seconds: a guard against hangs, not a timing assertion
ASK = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def _pin(server: Any, at: float) -> None:
    server.quota.clock = lambda: at


def _openai(server: Any, model_id: str = "gpt-4o") -> Model:
    return get_model("openai", model_id).replace(base_url=server.url + "/v1")


def _anthropic(server: Any) -> Model:
    return get_model("anthropic", "claude-haiku-4-5").replace(base_url=server.url)


# --- the quota --------------------------------------------------------------------------


def test_a_quota_is_checked() -> None:
    with pytest.raises(ValueError, match="requests, tokens or both"):
        Quota()
    with pytest.raises(ValueError, match="window"):
        Quota(requests=1, window=0)
    with pytest.raises(ValueError, match="requests"):
        Quota(requests=0)
    with pytest.raises(ValueError, match="tokens"):
        Quota(tokens=True)
    with pytest.raises(TypeError, match="quota"):
        fake_vendor(scenarios={"*": ["a"]}, quota={"m": 5})  # type: ignore[dict-item]


def test_openai_headers_count_down_then_a_429_with_retry_after() -> None:
    with fake_vendor(scenarios={"*": ["a"] * 5}, quota=Quota(requests=2, window=60)) as server:
        _pin(server, 1_200_000.0 + 15.25)  # 44.75 s left of its minute
        with httpx.Client(base_url=server.url) as client:
            answers = [client.post("/v1/chat/completions", json=ASK) for _ in range(3)]
    first, second, third = answers
    assert first.status_code == second.status_code == 200
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert second.headers["x-ratelimit-remaining-requests"] == "0"
    assert first.headers["x-ratelimit-reset-requests"] == "44.75s"  # a Go duration
    assert "x-ratelimit-limit-tokens" not in first.headers  # no token quota: not said
    assert third.status_code == 429
    assert third.headers["retry-after"] == "45"  # whole seconds, rounded up
    error = third.json()["error"]
    assert error["type"] == "rate_limit_exceeded" or "rate" in json.dumps(error)
    assert [r.status for r in server.requests] == [200, 200, 429]
    assert [r.answer for r in server.requests][-1] == "over quota"
    assert server.scenarios["*"].served == 2  # a refused request takes no scripted answer
    # What the library reads of them.
    read = limits_from_headers(first.headers, time.time())
    assert read is not None and (read[0].name, read[0].limit, read[0].remaining) == (
        "requests",
        2,
        1,
    )


def test_anthropic_headers_are_rfc3339_resets() -> None:
    now = math.floor(time.time() / 60) * 60 + 20.5  # the Date header must agree: real time
    quota = Quota(requests=5, tokens=1_000, window=60)
    with fake_vendor(scenarios={"*": ["a"] * 3}, quota=quota) as server:
        _pin(server, now)
        with httpx.Client(base_url=server.url) as client:
            ok = client.post("/v1/messages", json=ASK)
            big = client.post("/v1/messages", json={**ASK, "max_tokens": 5_000})
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 20.5 + 60))
    assert ok.status_code == 200
    assert ok.headers["anthropic-ratelimit-requests-limit"] == "5"
    assert ok.headers["anthropic-ratelimit-requests-remaining"] == "4"
    assert ok.headers["anthropic-ratelimit-requests-reset"] == reset
    # Charged as it arrives: its text ("user", "hi": 6 characters) / 4, and max_tokens.
    left = int(ok.headers["anthropic-ratelimit-tokens-remaining"])
    assert left == 1_000 - 2 - 10
    assert ok.headers["anthropic-ratelimit-tokens-reset"] == reset
    # Over the token quota: Anthropic's 429 body, retry-after, nothing counted.
    assert big.status_code == 429 and big.headers["retry-after"] == "40"
    body = big.json()
    assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    assert big.headers["anthropic-ratelimit-tokens-remaining"] == str(left)
    read = limits_from_headers(ok.headers, time.time())
    assert read is not None
    assert {r.name: r.remaining for r in read} == {"requests": 4, "tokens": left}


def test_each_model_has_its_own_quota_and_window() -> None:
    quota = {"tight": Quota(requests=1, window=60), "*": Quota(requests=3, window=60)}
    with fake_vendor(scenarios={"*": ["a"] * 10}, quota=quota) as server:
        _pin(server, 2_000_000.0)
        with httpx.Client(base_url=server.url) as client:
            statuses = [
                client.post("/v1/chat/completions", json={**ASK, "model": m}).status_code
                for m in ("tight", "tight", "other", "other", "third", "other", "other")
            ]
        # The next window: counted afresh.
        _pin(server, 2_000_060.0)
        with httpx.Client(base_url=server.url) as client:
            again = client.post("/v1/chat/completions", json={**ASK, "model": "tight"})
    assert statuses == [200, 429, 200, 200, 200, 200, 429]
    assert again.status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"model": "m", "max_tokens": 1e400, "max_completion_tokens": "9"}',
        b'{"model": "m", "max_tokens": 100000000000000000000, "messages": null}',
        b'{"model": "m"' + b"\xff" * 10,
    ],
    ids=["deep", "huge-float", "huge-int", "junk"],
)
def test_a_hostile_body_is_charged_never_dropped(body: bytes) -> None:
    with fake_vendor(scenarios={"*": ["a"] * 3}, quota=Quota(tokens=10**6, window=60)) as server:
        with httpx.Client(base_url=server.url) as client:
            answer = client.post(
                "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
            )
    assert answer.status_code in (200, 400, 404), answer.text[:200]
    left = answer.headers.get("x-ratelimit-remaining-tokens")
    assert left is None or 0 <= int(left) <= 10**6


# --- every API's 429, as the library reads it ----------------------------------------------


@pytest.mark.parametrize(
    ("api", "provider", "suffix"),
    [
        ("anthropic-messages", "anthropic", ""),
        ("openai-completions", "openai", "/v1"),
        ("openai-responses", "openai", "/v1"),
        ("google-generative-ai", "google", "/v1beta"),
        ("ollama-chat", "ollama", ""),
    ],
)
async def test_each_apis_429_is_read_as_a_rate_limit_with_its_wait(
    api: str, provider: str, suffix: str
) -> None:
    configure_limits(enabled=False)  # the call is sent: the vendor's refusal is what is read
    with fake_vendor(scenarios={"*": ["a", "b"]}, quota=Quota(requests=1, window=60)) as server:
        _pin(server, 1_200_000.0 + 30.0)
        model = Model(
            id="m-1", api=api, provider=provider, base_url=server.url + suffix, max_tokens=20
        )
        opts = StreamOptions(api_key="k", max_retries=0)
        with anyio.fail_after(GUARD):
            first = await complete(model, CONTEXT, opts)
            second = await complete(model, CONTEXT, opts)
    assert first.error is None and first.text() == "a", first.error
    assert second.error is not None and second.error.kind == "rate_limit", second.error
    assert second.error.status_code == 429 and second.error.retry_after == 30.0
    assert [r.status for r in server.requests] == [200, 429]


# --- the library learns the limits and waits -----------------------------------------------


async def test_the_library_learns_the_limit_and_sends_nothing_it_knows_is_refused() -> None:
    # OpenAI's headers say 0 requests left for 45 s: a call that may wait 0.1 s ends at
    # once, unsent, rather than meet the vendor's 429.
    with fake_vendor(scenarios={"*": ["a", "b"]}, quota=Quota(requests=1, window=60)) as server:
        _pin(server, 1_200_000.0 + 15.0)
        model = _openai(server)
        with anyio.fail_after(GUARD):
            first = await complete(model, CONTEXT, StreamOptions(api_key="k"))
            second = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=0.1))
    assert first.error is None
    assert second.error is not None and second.error.kind == "rate_limit"
    assert "nothing was sent" in second.error.message
    assert second.error.retry_after is not None and 40 < second.error.retry_after <= 46
    assert [r.status for r in server.requests] == [200]


async def test_the_library_learns_anthropics_limit_too() -> None:
    now = time.time()
    with fake_vendor(scenarios={"*": ["a", "b"]}, quota=Quota(requests=1, window=60)) as server:
        _pin(server, now)
        model = _anthropic(server)
        with anyio.fail_after(GUARD):
            first = await complete(model, CONTEXT, StreamOptions(api_key="k"))
            second = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=0.0))
    assert first.error is None
    assert second.error is not None and second.error.kind == "rate_limit"
    assert "nothing was sent" in second.error.message
    assert [r.status for r in server.requests] == [200]


async def test_the_library_waits_for_the_window_and_meets_no_429() -> None:
    # One request a window of 0.3 s, on the real clock: each call after the first waits
    # for the reset the headers told it, and none is refused.
    with fake_vendor(scenarios={"*": ["a", "b", "c"]}, quota=Quota(requests=1, window=0.3)) as (
        server
    ):
        model = _openai(server)
        with anyio.fail_after(GUARD):
            answers = [await complete(model, CONTEXT, StreamOptions(api_key="k")) for _ in range(3)]
    assert [a.text() for a in answers] == ["a", "b", "c"]
    assert [r.status for r in server.requests] == [200, 200, 200]


async def test_a_token_quota_is_learned_and_waited_for_too() -> None:
    # 50 tokens a window of 0.3 s; each call asks for 20 out and a few in: two fit a
    # window, the third waits for the next.
    quota = Quota(tokens=50, window=0.3)
    with fake_vendor(scenarios={"*": ["a", "b", "c"]}, quota=quota) as server:
        model = _openai(server)
        opts = StreamOptions(api_key="k", max_tokens=20)
        with anyio.fail_after(GUARD):
            answers = [await complete(model, CONTEXT, opts) for _ in range(3)]
    assert [a.text() for a in answers] == ["a", "b", "c"]
    assert [r.status for r in server.requests] == [200, 200, 200]


# --- stream-core serve ----------------------------------------------------------------------


def _script(tmp_path: Any) -> str:
    path = tmp_path / "hi.body"
    path.write_bytes(vendor_bytes(faux_text("hi"), "anthropic-messages").body)
    return str(path)


def test_serve_takes_the_quota_flags(tmp_path: Any) -> None:
    code = "import sys\nfrom stream_core._cli import main\nsys.exit(main(sys.argv[1:]))\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--scenario", _script(tmp_path), "--port", "0",
         "--quota-requests", "1", "--quota-window", "60"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:"), line
        with httpx.Client(base_url=url, timeout=GUARD) as client:
            ok = client.post("/v1/messages", json=ASK)
            over = client.post("/v1/messages", json=ASK)
        # Unless the minute turned between the two: then both are answered.
        assert ok.status_code == 200 and "anthropic-ratelimit-requests-remaining" in ok.headers
        if ok.headers["anthropic-ratelimit-requests-reset"] == over.headers.get(
            "anthropic-ratelimit-requests-reset"
        ):
            assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
    finally:
        proc.terminate()
        proc.wait(GUARD)
        if proc.stderr is not None:
            proc.stderr.close()


def test_serve_refuses_a_bad_quota(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from stream_core._cli import main

    script = _script(tmp_path)
    assert main(["serve", "--scenario", script, "--quota-requests", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    code = main(["serve", "--scenario", script, "--quota-requests", "1", "--quota-window", "0"])
    assert code == 2 and "more than 0" in capsys.readouterr().err
