"""The rate limits a vendor reports on a response reach the message (issue 26, first
part): Anthropic's RFC 3339 resets, OpenAI's and Azure's Go durations, on answers and on
429s alike; unreadable values are left out, never raised."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from contract_tests.kit import contract_model, options, text_case
from stream_core import AssistantMessage, RateLimit, complete
from stream_core._limits.headers import limits_from_headers

pytestmark = pytest.mark.anyio
NOW = 1_800_000_000.0

ANTHROPIC = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2027-01-15T08:00:42Z",
    "anthropic-ratelimit-input-tokens-limit": "30000",
    "anthropic-ratelimit-input-tokens-remaining": "29000",
    "anthropic-ratelimit-input-tokens-reset": "2027-01-15T08:00:01+00:00",
    "anthropic-ratelimit-output-tokens-limit": "8000",
    "anthropic-ratelimit-output-tokens-remaining": "7990",
    "anthropic-ratelimit-tokens-limit": "38000",
    "anthropic-ratelimit-tokens-remaining": "36990",
}
OPENAI = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-limit-tokens": "2000000",
    "x-ratelimit-remaining-tokens": "1999975",
    "x-ratelimit-reset-tokens": "6m0s",
}


def _by_name(limits: list[RateLimit] | None) -> dict[str, RateLimit]:
    assert limits is not None
    return {limit.name: limit for limit in limits}


def test_anthropic_headers_give_every_limit_with_its_reset_time() -> None:
    reset = time.mktime((2027, 1, 15, 8, 0, 42, 0, 0, 0)) - time.timezone
    got = _by_name(limits_from_headers(httpx.Headers(ANTHROPIC), NOW))
    assert set(got) == {"requests", "input_tokens", "output_tokens", "tokens"}
    assert (got["requests"].limit, got["requests"].remaining) == (50, 49)
    assert got["requests"].resets_at == pytest.approx(reset)
    assert got["output_tokens"].resets_at is None
    assert got["tokens"].remaining == 36990


def test_openai_go_durations_become_reset_times() -> None:
    got = _by_name(limits_from_headers(httpx.Headers(OPENAI), NOW))
    assert got["requests"].resets_at == pytest.approx(NOW + 0.006)
    assert got["tokens"].resets_at == pytest.approx(NOW + 360)
    assert got["tokens"].resets_in(NOW) == pytest.approx(360)
    assert (got["tokens"].limit, got["tokens"].remaining) == (2_000_000, 1_999_975)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1s", 1), ("2m59.56s", 179.56), ("1h2m3.5s", 3723.5), ("20ms", 0.02), ("17", 17)],
)
def test_every_reset_form_servers_send(value: str, seconds: float) -> None:
    headers = httpx.Headers({"x-ratelimit-reset-tokens": value})
    (limit,) = limits_from_headers(headers, NOW) or []
    assert limit.resets_at == pytest.approx(NOW + seconds)


@pytest.mark.parametrize(
    "value", ["", "-5", "1e9", "ten", "9" * 40, "1.2.3s", "2030-13-45T99:00:00Z", "5y", "\x00"]
)
def test_an_unreadable_value_is_left_out_and_never_raises(value: str) -> None:
    headers = httpx.Headers(
        {
            "x-ratelimit-limit-tokens": value,
            "x-ratelimit-reset-tokens": value,
            "anthropic-ratelimit-requests-reset": value,
            "anthropic-ratelimit-requests-remaining": value,
        }
    )
    for limit in limits_from_headers(headers, NOW) or []:
        assert limit.limit is None and limit.remaining is None
        assert limit.resets_at is None or abs(limit.resets_at - NOW) <= 366 * 86_400


def test_no_rate_limit_headers_means_no_limits() -> None:
    assert limits_from_headers(httpx.Headers({"content-type": "text/event-stream"}), NOW) is None
    message = AssistantMessage(api="a", provider="p", model="m")
    assert "limits" not in message.model_dump_json()


@pytest.mark.parametrize(
    ("api", "headers"), [("anthropic-messages", ANTHROPIC), ("openai-completions", OPENAI)]
)
@pytest.mark.parametrize("status", [200, 429])
async def test_the_message_carries_what_the_response_said(
    api: str, headers: dict[str, str], status: int
) -> None:
    case = text_case(api)

    def answer(request: httpx.Request) -> httpx.Response:
        if status == 429:
            body: Any = {"error": {"type": "rate_limit_error", "message": "slow down"}}
            return httpx.Response(429, headers={**headers, "retry-after": "1"}, json=body)
        return httpx.Response(200, headers={**case.headers, **headers}, content=case.body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    before = time.time()
    message = await complete(contract_model(api), _context(), options(client=client))
    assert (message.error is None) is (status == 200)
    got = _by_name(message.limits)
    assert got["requests"].remaining in (49, 9999)
    again = AssistantMessage.model_validate_json(message.model_dump_json())
    assert again.limits == message.limits
    if api == "openai-completions":
        assert before + 359 < (got["tokens"].resets_at or 0) < time.time() + 361


def _context() -> Any:
    from contract_tests.kit import contract_context

    return contract_context()


GOOGLE_429 = {
    "error": {
        "code": 429,
        "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
        ],
    }
}


async def test_gemini_retry_delay_in_a_429_body_is_the_wait() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json=GOOGLE_429)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    model = contract_model("google-generative-ai")
    message = await complete(model, _context(), options(client=client))
    assert message.error is not None and message.error.kind == "rate_limit"
    assert message.error.retry_after == 37


@pytest.mark.parametrize("body", [{"error": {"details": "x"}}, {"error": {"details": [1, {}]}}])
async def test_a_retry_info_of_another_shape_gives_no_wait(body: Any) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json={**body, "RetryInfo": 1})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    message = await complete(
        contract_model("google-generative-ai"), _context(), options(client=client)
    )
    assert message.error is not None and message.error.retry_after is None


@pytest.mark.parametrize(("status", "header", "requests"), [(500, "false", 1), (400, "true", 3)])
async def test_x_should_retry_overrides_the_status(status: int, header: str, requests: int) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            status, headers={"x-should-retry": header}, json={"error": {"message": "no"}}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    opts = options(client=client, max_retries=2)
    message = await complete(contract_model("openai-completions"), _context(), opts)
    assert message.error is not None and len(seen) == requests
