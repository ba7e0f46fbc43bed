"""Pointing a model anywhere: base URL variables, a per-call base URL, an injected client's
own headers, and `Model.compat` keys checked at the call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

import stream_core
from stream_core import Context, Model, UserMessage
from stream_core.contract_tests.kit import options, sse_response

HELLO = Context(messages=[UserMessage(content="hi")])
OPENAI_OK = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}'
    b"\n\ndata: [DONE]\n\n"
)
ANTHROPIC_OK = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1","usage":'
    b'{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"ok"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
VLLM = Model(id="qwen", api="openai-completions", provider="vllm", base_url="http://gpu:8000/v1")
# As the catalog has them: each vendor at its default host.
GPT = Model(id="gpt-x", api="openai-completions", provider="openai",
            base_url="https://api.openai.com/v1")  # fmt: skip
CLAUDE = Model(id="claude-x", api="anthropic-messages", provider="anthropic",
               base_url="https://api.anthropic.com")  # fmt: skip
GROQ = Model(id="llama-x", api="openai-completions", provider="groq",
             base_url="https://api.groq.com/openai/v1")  # fmt: skip

pytestmark = pytest.mark.anyio


async def ask(model: Model, url: str, body: bytes, **overrides: Any) -> httpx.Request:
    """Stream once; the only URL answered is `url` (anything else fails the test)."""
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(url).mock(return_value=sse_response([body]))
        message = await stream_core.complete(model, HELLO, options(**overrides))
    assert message.error is None, message.error
    assert message.text() == "ok"
    return route.calls[0].request


# --- base URLs ------------------------------------------------------------------------------


async def test_openai_base_url_redirects_the_openai_default_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")

    await ask(GPT, "http://127.0.0.1:4000/v1/chat/completions",
              OPENAI_OK)  # fmt: skip


async def test_anthropic_base_url_redirects_the_anthropic_default_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000/gateway")

    request = await ask(
        CLAUDE,
        "http://127.0.0.1:4000/gateway/v1/messages",
        ANTHROPIC_OK,
    )

    assert request.headers["x-api-key"]  # auth still goes where the model's key goes


@pytest.mark.parametrize(
    ("model", "url"),
    [
        (GROQ, "https://api.groq.com/openai/v1"),
        (VLLM, "http://gpu:8000/v1"),
    ],
    ids=["another-vendor", "own-base-url"],
)
async def test_the_variable_leaves_other_hosts_alone(
    monkeypatch: pytest.MonkeyPatch, model: Model, url: str
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")

    await ask(model, url + "/chat/completions", OPENAI_OK)


async def test_a_per_call_base_url_wins_over_model_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1")
    for model in (GPT, VLLM):
        await ask(model, "http://proxy.local/v1/chat/completions", OPENAI_OK,
                  base_url="http://proxy.local/v1")  # fmt: skip


async def test_an_empty_variable_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "")

    await ask(GPT, "https://api.openai.com/v1/chat/completions",
              OPENAI_OK)  # fmt: skip


# --- an injected client -----------------------------------------------------------------------


async def test_an_injected_clients_default_headers_are_sent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return sse_response([OPENAI_OK])

    headers = {"X-Gateway-Team": "search", "User-Agent": "my-harness/1.0"}
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), headers=headers) as c:
        message = await stream_core.complete(VLLM, HELLO, options(client=c, headers={"x-b": "1"}))

    assert message.text() == "ok"
    sent = seen[0].headers
    assert sent["x-gateway-team"] == "search" and sent["user-agent"] == "my-harness/1.0"
    assert sent["x-b"] == "1"
    # Ours still win where the stream needs them.
    assert sent["accept"] == "text/event-stream" and sent["accept-encoding"] == "identity"


@pytest.mark.parametrize("header", ["Authorization", "x-api-key", "api-key", "x-goog-api-key"])
async def test_a_clients_auth_header_never_appears_in_an_error(header: str) -> None:
    token = "gw-token-0123456789abcdef"
    value = f"Bearer {token}" if header == "Authorization" else token

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers[header] == value
        echo = f"token {token} is not allowed here (header {value})"
        return httpx.Response(401, json={"error": {"message": echo, "type": "auth"}})

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(handler), headers={header: value}
    ) as client:
        message = await stream_core.complete(VLLM, HELLO, options(client=client, api_key=None))

    assert message.error is not None and message.error.kind == "auth"
    assert "not allowed" in message.error.message
    assert token not in message.error.message and token[:8] not in message.error.message


# --- compat keys ------------------------------------------------------------------------------


def test_an_unknown_compat_key_raises_at_the_call_naming_it() -> None:
    model = VLLM.model_copy(update={"compat": {"include_usgae": False}})

    with pytest.raises(
        ValueError, match=r"model\.compat: unknown key 'include_usgae'.*include_usage"
    ):
        stream_core.stream(model, HELLO)


def test_a_compat_value_of_the_wrong_type_raises_naming_the_key() -> None:
    for compat in ({"include_usage": "no"}, {"max_tokens_field": "max_output_tokens"}):
        model = VLLM.model_copy(update={"compat": compat})
        with pytest.raises(ValueError, match=rf"model\.compat\.{next(iter(compat))}: "):
            stream_core.stream(model, HELLO)


def test_compat_on_an_api_without_flags_raises() -> None:
    model = Model(
        id="mistral-x",
        api="mistral-conversations",
        provider="mistral",
        base_url="https://api.mistral.ai/v1",
        compat={"include_usage": False},
    )

    with pytest.raises(ValueError, match="mistral-conversations takes no compat flags"):
        stream_core.stream(model, HELLO)


def test_an_unknown_compat_key_raises_listing_the_known_ones() -> None:
    model = CLAUDE.model_copy(update={"compat": {"include_usage": False}})

    with pytest.raises(ValueError, match=r"unknown key 'include_usage'.*structured_output_beta"):
        stream_core.stream(model, HELLO)


async def test_known_compat_keys_still_apply() -> None:
    model = VLLM.model_copy(update={"compat": {"include_usage": False, "auth": "api-key"}})

    request = await ask(model, "http://gpu:8000/v1/chat/completions", OPENAI_OK)

    assert b"stream_options" not in request.content
    assert "api-key" in request.headers


def test_a_base_url_variable_that_is_not_a_url_raises_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:4000/v1")
    with pytest.raises(ValueError, match=r"OPENAI_BASE_URL \(from the environment\)"):
        stream_core.stream(GPT, {"messages": [{"role": "user", "content": "hi"}]},
                           stream_core.StreamOptions(api_key="k"))  # fmt: skip


def test_a_base_url_variable_with_a_trailing_newline_is_used_stripped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1\n")
    s = stream_core.stream(GPT, {"messages": [{"role": "user", "content": "hi"}]},
                           stream_core.StreamOptions(api_key="k"))  # fmt: skip
    assert s._request is not None
    assert str(s._request.url) == "http://127.0.0.1:4000/v1/chat/completions"
