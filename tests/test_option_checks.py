"""An option that cannot be sent as given raises at the call, naming the field (issue 23,
Low): an id with CR, LF or NUL, an `extra` value of the wrong type, a seed no vendor holds.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

import stream_core
from stream_core import Context, Model, StreamOptions, UserMessage

pytestmark = pytest.mark.anyio

CONTEXT = Context(messages=[UserMessage(content="hi")])
KEY = "sk-test-0123456789abcdef"


def _model(api: str, provider: str, base_url: str) -> Model:
    return Model(id="m", api=api, provider=provider, base_url=base_url)


MISTRAL = _model("mistral-conversations", "mistral", "https://api.mistral.ai")
ANTHROPIC = _model("anthropic-messages", "anthropic", "https://api.anthropic.com")
RESPONSES = _model("openai-responses", "openai", "https://api.openai.com/v1")
GEMINI = _model(
    "google-generative-ai", "google", "https://generativelanguage.googleapis.com/v1beta"
)
BEDROCK = _model(
    "bedrock-converse-stream", "amazon-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com"
)


@pytest.fixture
def sent() -> Any:
    with respx.mock(assert_all_called=False) as mock:
        yield mock.route().mock(return_value=httpx.Response(400, json={"error": {"message": "x"}}))


@pytest.mark.parametrize("bad", ["abc\r\nx-injected: 1", "abc\n", "a\x00b", "tab\there", "é"])
@pytest.mark.parametrize("model", [MISTRAL, RESPONSES], ids=["mistral", "responses"])
async def test_a_session_id_that_cannot_be_a_header_raises_naming_it(
    bad: str, model: Model, sent: Any
) -> None:
    with pytest.raises(ValueError, match="StreamOptions.session_id"):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY, session_id=bad))
    with pytest.raises(ValueError, match="StreamOptions.session_id"):
        StreamOptions(session_id=bad)
    assert sent.call_count == 0


async def test_a_session_id_too_long_raises() -> None:
    with pytest.raises(ValueError, match="StreamOptions.session_id: is 513 characters"):
        StreamOptions(session_id="x" * 513)


async def test_a_plain_session_id_is_sent_as_the_affinity_header(sent: Any) -> None:
    await stream_core.complete(MISTRAL, CONTEXT, StreamOptions(api_key=KEY, session_id="conv-42"))
    assert sent.calls.last.request.headers["x-affinity"] == "conv-42"


@pytest.mark.parametrize("bad", ["user\r\n", "a\x00", "x" * 257])
async def test_a_metadata_user_id_with_a_control_character_raises(bad: str, sent: Any) -> None:
    with pytest.raises(ValueError, match=r"StreamOptions.metadata: \['user_id'\]"):
        stream_core.stream(
            ANTHROPIC, CONTEXT, StreamOptions(api_key=KEY, metadata={"user_id": bad})
        )
    assert sent.call_count == 0


async def test_a_metadata_user_id_of_another_type_raises() -> None:
    with pytest.raises(TypeError, match=r"StreamOptions.metadata: \['user_id'\] expected a string"):
        StreamOptions(metadata={"user_id": 42})


async def test_a_plain_user_id_is_sent(sent: Any) -> None:
    options = StreamOptions(api_key=KEY, metadata={"user_id": "user-ü-7"})
    await stream_core.complete(ANTHROPIC, CONTEXT, options)
    assert json.loads(sent.calls.last.request.content)["metadata"] == {"user_id": "user-ü-7"}


@pytest.mark.parametrize(
    ("model", "key", "value"),
    [
        (RESPONSES, "store", "false"),
        (RESPONSES, "store", 0),
        (RESPONSES, "service_tier", 3),
        (RESPONSES, "deployment", ["d"]),
        (RESPONSES, "api_version", 2025),
        (RESPONSES, "reasoning_summary", True),
        (GEMINI, "cached_content", {"name": "c"}),
        (BEDROCK, "profile", 1),
        (BEDROCK, "region", None),
    ],
)
async def test_an_extra_value_of_the_wrong_type_raises_naming_the_key(
    model: Model, key: str, value: Any, sent: Any
) -> None:
    with pytest.raises(TypeError, match=rf"StreamOptions.extra\['{key}'\]"):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY, extra={key: value}))
    assert sent.call_count == 0


async def test_store_is_sent_only_as_the_boolean_given(sent: Any) -> None:
    for store in (True, False):
        options = StreamOptions(api_key=KEY, extra={"store": store})
        await stream_core.complete(RESPONSES, CONTEXT, options)
        assert json.loads(sent.calls.last.request.content)["store"] is store


@pytest.mark.parametrize("seed", [10**5000, 2**63, -(2**63) - 1], ids=["huge", "2**63", "-2**63-1"])
async def test_a_seed_no_vendor_holds_raises_naming_it(seed: int) -> None:
    with pytest.raises(ValueError, match="StreamOptions.seed: must fit in a signed 64-bit"):
        StreamOptions(seed=seed)


async def test_the_largest_64_bit_seed_is_sent(sent: Any) -> None:
    await stream_core.complete(GEMINI, CONTEXT, StreamOptions(api_key=KEY, seed=2**63 - 1))
    sent_seed = json.loads(sent.calls.last.request.content)["generationConfig"]["seed"]
    assert sent_seed == 2**63 - 1


@pytest.mark.parametrize("field", ["temperature", "top_p", "presence_penalty", "frequency_penalty"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), float("-inf")])
async def test_a_non_finite_number_raises_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"StreamOptions.{field}"):
        StreamOptions(**{field: value})
