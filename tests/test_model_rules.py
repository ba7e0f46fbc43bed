"""Per-model request rules (issue 27), from the user's side: what a model refuses raises at
`stream()` naming the model and the control; what has a faithful equivalent is converted
(adaptive thinking with an effort, Gemini's levels, an image type as a note, the tools a
Bedrock history calls); a model no rule names keeps its API's behaviour; and
`Model.capabilities()` agrees with `stream()` for every catalog model and control."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    ImageContent,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    get_model,
    list_models,
)
from stream_core._capabilities import PROBES
from stream_core.provider import CONTROLS


@pytest.fixture(autouse=True)
def _vertex_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vertex AI's and Azure's models need a project or resource to build their URL (no
    request is sent)."""
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj")
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "res")


TOOL = Tool(name="look", description="Look.", parameters={"type": "object", "properties": {}})
CTX = Context(system_prompt="Be brief.", messages=[UserMessage(content="Hi.")], tools=[TOOL])


def payload(provider: str, model_id: str, context: Context = CTX, **opts: Any) -> dict[str, Any]:
    """The request body `stream()` builds (seen through `on_payload`, before any I/O)."""
    seen: list[dict[str, Any]] = []
    options = StreamOptions(api_key="k", on_payload=lambda p, m: seen.append(p), **opts)
    stream_core.stream(get_model(provider, model_id), context, options)
    return seen[0]


def refusal(provider: str, model_id: str, **opts: Any) -> str:
    with pytest.raises(ValueError) as info:
        stream_core.stream(get_model(provider, model_id), CTX, StreamOptions(api_key="k", **opts))
    return str(info.value)


# --- Claude ---------------------------------------------------------------------------------

ADAPTIVE_ONLY = [
    (m.provider, m.id)
    for m in list_models()
    if m.api in ("anthropic-messages", "bedrock-converse-stream")
    and any(r.name == "claude-adaptive-only" for r in stream_core._rules.rules_for(m))
]


def test_the_adaptive_only_claude_models_are_in_the_catalog() -> None:
    ids = {i for _, i in ADAPTIVE_ONLY}
    assert "claude-opus-4-7" in ids and any("claude-sonnet-5" in i for i in ids)


@pytest.mark.parametrize(("provider", "model_id"), ADAPTIVE_ONLY)
def test_claude_4_7_and_later_think_adaptively_and_refuse_sampling(
    provider: str, model_id: str
) -> None:
    sent = payload(provider, model_id, reasoning="medium")
    fields = sent.get("additionalModelRequestFields", sent)
    assert fields["thinking"] == {"type": "adaptive"}
    assert fields["output_config"]["effort"] == "medium"
    for control, value in (("temperature", 0.3), ("top_p", 0.9)):
        message = refusal(provider, model_id, **{control: value})
        assert message.startswith(f"StreamOptions.{control}: ") and model_id in message


def test_claude_4_6_is_converted_to_adaptive_and_keeps_temperature() -> None:
    sent = payload("anthropic", "claude-opus-4-6", reasoning="high")
    assert sent["thinking"] == {"type": "adaptive"} and sent["output_config"] == {"effort": "high"}
    assert "budget_tokens" not in str(sent)
    assert payload("anthropic", "claude-opus-4-6", temperature=0.2)["temperature"] == 0.2


def test_adaptive_effort_joins_a_native_output_format() -> None:
    sent = payload(
        "anthropic",
        "claude-opus-4-7",
        reasoning="low",
        output_schema={"type": "object", "properties": {"a": {"type": "string"}}},
    )
    assert sent["output_config"]["effort"] == "low" and "format" in sent["output_config"]


def test_a_claude_no_rule_names_keeps_budget_thinking() -> None:
    sent = payload("anthropic", "claude-sonnet-4-20250514", reasoning="low")
    assert sent["thinking"]["type"] == "enabled" and sent["thinking"]["budget_tokens"] > 0


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-opus-4-1")],
)
def test_claude_4_5_refuses_temperature_with_top_p(provider: str, model_id: str) -> None:
    message = refusal(provider, model_id, temperature=0.3, top_p=0.9)
    assert "does not take temperature and top_p together" in message and model_id in message
    assert payload(provider, model_id, temperature=0.3)["temperature"] == 0.3
    assert payload(provider, model_id, top_p=0.9)["top_p"] == 0.9
    both = payload("anthropic", "claude-sonnet-4-20250514", temperature=0.3, top_p=0.9)
    assert (both["temperature"], both["top_p"]) == (0.3, 0.9)


@pytest.mark.parametrize("mime", ["image/bmp", "image/tiff"])
def test_an_image_type_claude_does_not_take_becomes_a_note(mime: str) -> None:
    ctx = Context(
        messages=[
            UserMessage(
                content=[TextContent(text="see"), ImageContent(data="AA==", mime_type=mime)]
            )
        ]
    )
    blocks = payload("anthropic", "claude-sonnet-4-5", ctx)["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert mime in blocks[1]["text"] and "png" in blocks[1]["text"]
    png = Context(
        messages=[UserMessage(content=[ImageContent(data="AA==", mime_type="image/png")])]
    )
    assert (
        payload("anthropic", "claude-sonnet-4-5", png)["messages"][0]["content"][0]["type"]
        == "image"
    )


# --- OpenAI, Gemini, Mistral ----------------------------------------------------------------


def test_openai_reasoning_models_take_only_the_default_temperature() -> None:
    for model_id in ("o4-mini", "gpt-5"):
        message = refusal("openai", model_id, temperature=0.3)
        assert "takes only the default (1)" in message and model_id in message
    assert payload("openai", "gpt-4.1-mini", temperature=0.3)["temperature"] == 0.3


def test_the_o_series_takes_no_minimal_effort() -> None:
    message = refusal("openai", "o4-mini", reasoning="minimal")
    assert "'low', 'medium', 'high'" in message
    assert payload("openai", "o4-mini", reasoning="low")["reasoning_effort"] == "low"
    assert payload("openai", "gpt-5", reasoning="minimal")["reasoning_effort"] == "minimal"


@pytest.mark.parametrize(
    ("provider", "model_id"), [("openai", "gpt-4.1-mini"), ("mistral", "mistral-large-latest")]
)
def test_reasoning_on_a_model_that_does_not_reason_raises(provider: str, model_id: str) -> None:
    message = refusal(provider, model_id, reasoning="high")
    assert message.startswith("StreamOptions.reasoning: ") and "does not reason" in message


def test_gemini_3_1_pro_gets_a_level_it_takes() -> None:
    config = payload("google", "gemini-3.1-pro-preview", reasoning="minimal")["generationConfig"]
    assert config["thinkingConfig"]["thinkingLevel"] == "low"
    flash = payload("google", "gemini-3-flash-preview", reasoning="minimal")["generationConfig"]
    assert flash["thinkingConfig"]["thinkingLevel"] == "minimal"
    older = payload("google", "gemini-2.5-pro", reasoning="low")["generationConfig"]
    assert "thinkingBudget" in older["thinkingConfig"]


def test_mistral_takes_top_k() -> None:
    assert payload("mistral", "mistral-large-latest", top_k=40)["top_k"] == 40


# --- Bedrock: a history with tool blocks and no tools declared -------------------------------


def test_bedrock_declares_the_tools_a_history_calls() -> None:
    call = ToolCall(id="t1", name="look", arguments={"at": "x"})
    ctx = Context(
        messages=[
            UserMessage(content="Look."),
            AssistantMessage(
                api="bedrock-converse-stream",
                provider="amazon-bedrock",
                model="m",
                content=[call],
                stop_reason="tool_use",
            ),  # fmt: skip
            ToolResultMessage(
                tool_call_id="t1", tool_name="look", content=[TextContent(text="ok")]
            ),
            UserMessage(content="And now?"),
        ]
    )
    model_id = next(m.id for m in list_models("amazon-bedrock") if "claude-sonnet-4-5" in m.id)
    sent = payload("amazon-bedrock", model_id, ctx)
    (tool,) = sent["toolConfig"]["tools"]
    assert tool["toolSpec"]["name"] == "look"
    assert "toolConfig" not in payload(
        "amazon-bedrock", model_id, Context(messages=[UserMessage(content="Hi.")])
    )


# --- the capability query agrees with stream() ---------------------------------------------


PROBE_CTX = Context(
    messages=[UserMessage(content="Hi.")],
    tools=[Tool(name="probe", description="A probe.", parameters={"type": "object"})],
)


def _raises(model: stream_core.Model, **opts: Any) -> str | None:
    try:
        stream_core.stream(model, PROBE_CTX, StreamOptions(api_key="k", **opts))
    except ValueError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("provider", sorted({m.provider for m in list_models()}))
def test_capabilities_and_stream_agree_for_every_catalog_model(provider: str) -> None:
    assert set(PROBES) == {"temperature", *CONTROLS}
    checked = 0
    for model in list_models(provider):
        if _raises(model) is not None:
            continue  # an endpoint to configure first (a placeholder host): no call to compare
        checked += 1
        caps = model.capabilities()
        for control, values in PROBES.items():
            for value in values:
                error = _raises(model, **{control: value})
                if control in caps.refused:
                    expected: str | None = caps.refused[control]
                else:
                    expected = caps.refused_values.get(control, {}).get(repr(value))
                assert error == expected, (model.id, control, value)
        for pair in caps.together:
            assert _raises(model, **{c: PROBES[c][-1] for c in pair}), (model.id, pair)
        for effort in ("minimal", "low", "medium", "high"):
            refused = _raises(model, reasoning=effort) is not None
            assert refused == (effort not in caps.reasoning), (model.id, effort)
    assert checked or provider in ("azure-openai",)


def test_capabilities_say_what_the_rules_say() -> None:
    opus = get_model("anthropic", "claude-opus-4-7").capabilities()
    assert opus.thinking == "adaptive" and "temperature" in opus.refused
    assert any(r.startswith("claude-adaptive-only: ") for r in opus.rules)
    o4 = get_model("openai", "o4-mini").capabilities()
    assert o4.reasoning == ["low", "medium", "high"] and "0.5" in o4.refused_values["temperature"]
    mini = get_model("openai", "gpt-4.1-mini").capabilities()
    assert mini.reasoning == [] and mini.priced and "native" in mini.output_modes
    sonnet = get_model("anthropic", "claude-sonnet-4-5").capabilities()
    assert sonnet.together == [["temperature", "top_p"]]
    assert sonnet.image_types == ["image/gif", "image/jpeg", "image/png", "image/webp"]


# --- one price per model ---------------------------------------------------------------------


# A moment the shipped list prices hold (after the table's last dated change, within
# DeepSeek's standard hours): dated and time-of-day prices never depend on when tests run.
_PRICED_AT = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
_OFF_PEAK = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)  # DeepSeek's discount hours


def test_every_catalog_model_is_priced_as_its_cost_is_computed() -> None:
    from stream_core import Usage
    from stream_core.provider import compute_cost

    checked = 0
    for model in list_models():
        p = model.prices
        for at in (_PRICED_AT, _OFF_PEAK):
            if at is _OFF_PEAK and model.provider == "deepseek":
                continue  # only DeepSeek's own API has an off-peak price
            cost = compute_cost(model, Usage(input=1000, output=1000), at=at)
            if p.input is None or p.output is None or cost is None:
                continue
            checked += 1
            assert (round(cost.input * 1000, 9), round(cost.output * 1000, 9)) == (
                round(p.input, 9),
                round(p.output, 9),
            ), (model.provider, model.id, p, cost, at)
    assert checked > 1000
    mistral = get_model("mistral", "mistral-large-latest")
    cost = compute_cost(mistral, Usage(input=1_000_000, output=1_000_000))
    assert cost is not None and cost.input == mistral.prices.input


# --- Claude's structured-output schema subset ------------------------------------------------

_CLAUDE_KEYS = {
    "type", "enum", "const", "anyOf", "allOf", "description", "title", "$defs",
    "definitions", "$ref", "properties", "required", "additionalProperties", "items",
    "format", "minItems",
}  # fmt: skip


def _keys(schema: Any, path: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(schema, list):
        for i, s in enumerate(schema):
            found += _keys(s, f"{path}[{i}]")
    elif isinstance(schema, dict):
        for k, v in schema.items():
            if path.endswith(("properties", "$defs")):
                found += _keys(v, f"{path}.{k}")  # names, not keywords
                continue
            found.append((path, k))
            found += _keys(v, f"{path}.{k}")
    return found


def test_claude_gets_its_schema_subset_with_the_rest_described() -> None:
    from datetime import date
    from decimal import Decimal
    from enum import Enum
    from typing import Literal

    from pydantic import BaseModel, Field

    class Colour(Enum):
        RED = "red"
        BLUE = "blue"

    class Item(BaseModel):
        """An item."""

        name: str = Field(min_length=1, max_length=20, pattern=r"^[a-z]+$")
        qty: int = Field(ge=1, le=20, default=1, multiple_of=1)
        price: Decimal = Field(gt=0, decimal_places=2)
        ratio: float = Field(lt=1.0, examples=[0.5])
        tags: list[str] = Field(default_factory=list, max_length=5)
        when: date
        colour: Colour = Colour.RED
        kind: Literal["a", "b"] = "a"
        fixed: Literal["x"] = "x"

    class Order(BaseModel):
        items: list[Item] = Field(min_length=2)
        note: str | None = None
        extra: dict[str, int] = {}

    sent = payload("anthropic", "claude-sonnet-4-5", output_schema=Order)
    schema = sent["output_config"]["format"]["schema"]
    odd = [(p, k) for p, k in _keys(schema) if k not in _CLAUDE_KEYS]
    assert odd == []
    qty = schema["$defs"]["Item"]["properties"]["qty"]
    assert "minimum" not in qty and "maximum: 20" in qty["description"]
    items = schema["properties"]["items"]
    assert "minItems" not in items and "minItems: 2" in items["description"]
    assert schema["$defs"]["Item"]["properties"]["when"]["format"] == "date"
    # Another vendor gets the schema as given.
    openai = payload("openai", "gpt-4.1-mini", output_schema=Order)
    assert "minimum" in json.dumps(openai["response_format"])


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        ("openai", "gpt-4.1-mini"),
        ("google", "gemini-2.5-flash"),
        ("mistral", "mistral-medium-latest"),
        ("anthropic", "claude-sonnet-4-5"),
    ],
)
def test_an_image_type_the_vendor_does_not_take_is_a_note_everywhere(
    provider: str, model_id: str
) -> None:
    ctx = Context(
        messages=[UserMessage(content=[ImageContent(data="AA==", mime_type="image/bmp")])]
    )
    sent = json.dumps(payload(provider, model_id, ctx))
    assert "image omitted" in sent and "image/bmp" in sent and "AA==" not in sent


# --- every model each rule names ---------------------------------------------------------

NAMED = [
    (rule.name, m.provider, m.id) for m in list_models() for rule in stream_core._rules.rules_for(m)
]


def test_every_rule_names_catalog_models() -> None:
    assert {name for name, _, _ in NAMED} == {r.name for r in stream_core._rules.RULES}


@pytest.mark.parametrize(("rule_name", "provider", "model_id"), NAMED)
def test_each_rule_holds_on_every_model_it_names(
    rule_name: str, provider: str, model_id: str
) -> None:
    rule = next(r for r in stream_core._rules.RULES if r.name == rule_name)
    model = get_model(provider, model_id)
    for control in rule.refuses:
        assert _raises(model, **{control: PROBES[control][0]}), (model_id, control)
    if rule.refuses_together:
        both = {c: PROBES[c][-1] for c in rule.refuses_together}
        assert _raises(model, **both), (model_id, both)
    if rule.only_temperature is not None:
        assert _raises(model, temperature=0.5) and not _raises(model, temperature=1.0)
    if rule.efforts is not None and model.reasoning:
        for effort in ("minimal", "low", "medium", "high"):
            assert bool(_raises(model, reasoning=effort)) == (effort not in rule.efforts)
    if model.reasoning and rule.thinking in ("adaptive", "level"):
        sent = payload(provider, model_id, reasoning="low")
        text = json.dumps(sent)
        assert '"adaptive"' in text if rule.thinking == "adaptive" else '"thinkingLevel"' in text


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        ("anthropic", "claude-sonnet-4-20250514"),
        ("openai", "gpt-4.1"),
        ("google", "gemini-2.5-pro"),
    ],
)
def test_a_model_no_rule_names_keeps_its_api_behaviour(provider: str, model_id: str) -> None:
    model = get_model(provider, model_id)
    assert stream_core._rules.rules_for(model) == ()
    assert not _raises(model, temperature=0.5)
    assert not _raises(model, temperature=0.5, top_p=0.9)


def test_max_tokens_past_the_catalogs_output_limit_raises() -> None:
    message = refusal("anthropic", "claude-sonnet-4-5", max_tokens=1_000_000)
    assert message.startswith("StreamOptions.max_tokens: ") and "64,000" in message
    assert payload("anthropic", "claude-sonnet-4-5", max_tokens=64_000)["max_tokens"] == 64_000
    custom = get_model("anthropic", "claude-sonnet-4-5").model_copy(update={"id": "my-claude"})
    stream_core.stream(custom, CTX, StreamOptions(api_key="k", max_tokens=1_000_000))  # unknown


def test_bedrock_still_takes_image_jpg_as_jpeg() -> None:
    model_id = next(m.id for m in list_models("amazon-bedrock") if "claude-sonnet-4-5" in m.id)
    ctx = Context(
        messages=[UserMessage(content=[ImageContent(data="AA==", mime_type="image/jpg")])]
    )
    blocks = payload("amazon-bedrock", model_id, ctx)["messages"][0]["content"]
    assert [b["image"]["format"] for b in blocks if "image" in b] == ["jpeg"]
