"""What vendors say without saying it plainly (issue 27): the wait in a 429's words or in
its rate-limit headers becomes `retry_after`, and a stream that stops at its length limit
with no output because its input did not fit ends `context_overflow`."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from stream_core import Context, Model, StreamOptions, UserMessage, complete
from stream_core._error_text import retry_delay_in_body

pytestmark = pytest.mark.anyio

URL = "https://api.example.test/v1"
MODEL = Model(
    id="m", api="openai-completions", provider="openai", base_url=URL, context_window=1000
)
CTX = Context(messages=[UserMessage(content="hello")])
NO_RETRY = StreamOptions(api_key="k", max_retries=0)


def _sse(*chunks: dict[str, object]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def test_a_retry_wait_said_in_words_is_read() -> None:
    body = (
        b'{"error":{"code":429,"message":"Quota exceeded. Please retry in 52.4s.",'
        b'"status":"RESOURCE_EXHAUSTED"}}'
    )
    assert retry_delay_in_body(body) == 52.4
    assert retry_delay_in_body(b'{"error":{"message":"retry later"}}') is None


async def test_a_429_without_retry_after_waits_for_the_reported_reset() -> None:
    headers = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "20s",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "900",
        "x-ratelimit-reset-tokens": "1s",
    }
    with respx.mock:
        respx.post(f"{URL}/chat/completions").mock(
            return_value=httpx.Response(429, headers=headers, json={"error": {"message": "slow"}})
        )
        m = await complete(MODEL, CTX, NO_RETRY)
    assert m.error is not None and m.error.kind == "rate_limit"
    assert m.error.retry_after == pytest.approx(20, abs=1)  # the used-up limit's reset


async def test_length_with_no_output_and_input_past_the_window_is_an_overflow() -> None:
    body = _sse(
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 5000, "completion_tokens": 0}},
    )
    with respx.mock:
        respx.post(f"{URL}/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        m = await complete(MODEL, CTX, NO_RETRY)
    assert m.stop_reason == "error" and m.error is not None
    assert m.error.kind == "context_overflow"
    assert "5,000 input tokens" in m.error.message and "1,000 tokens" in m.error.message


async def test_length_with_no_output_and_a_request_past_the_window_is_an_overflow() -> None:
    long = Context(messages=[UserMessage(content="word " * 2000)])  # ~2,500 tokens estimated
    body = _sse({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    with respx.mock:
        respx.post(f"{URL}/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        m = await complete(MODEL, long, NO_RETRY)
    assert m.error is not None and m.error.kind == "context_overflow"


async def test_an_answer_cut_at_its_length_limit_stays_length() -> None:
    body = _sse(
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "partial"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
        {"id": "c", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
    )
    with respx.mock:
        respx.post(f"{URL}/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        m = await complete(MODEL, CTX, NO_RETRY)
    assert m.stop_reason == "length" and m.error is None and m.text() == "partial"
