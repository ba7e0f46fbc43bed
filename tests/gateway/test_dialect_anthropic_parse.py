"""The Anthropic dialect's request parser (issue 36): the tested inverse of the provider's
request builder. A context and options built into a Messages API request parse back to
the same context and options (as the builder normalizes them), and the parsed request
builds the same payload again; then the requests a client such as Claude Code sends
(system blocks, cache_control everywhere, server tools, thinking, unknown fields) and the
fields that cannot be read, named."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stream_core import (
    AssistantMessage,
    Context,
    FileContent,
    ImageContent,
    Message,
    Model,
    ServerTool,
    ServerToolCall,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import CARRIER_PREFIX, RequestFieldError, dialect
from stream_core.providers._anthropic_blocks import read_citation, read_result
from stream_core.providers.anthropic import WIRE

API = "anthropic-messages"
DIALECT = dialect(API)
MODEL = Model(
    id="claude-sonnet-4-5",
    api=API,
    provider="anthropic",
    base_url="https://api.anthropic.com",
    reasoning=True,
    input=["text", "image"],
    max_tokens=64_000,
)
ORIGIN = {"api": API, "provider": "anthropic", "model": MODEL.id}
"""Where the history's assistant turns come from: the model itself (signatures kept)."""


# --- strategies ---------------------------------------------------------------------------

TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda s: s.strip())
WORD = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
B64 = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode())
JSONISH = st.dictionaries(WORD, st.integers() | WORD | st.booleans(), max_size=3)
RECORDS = [
    {
        "type": "char_location",
        "cited_text": "a",
        "document_index": 0,
        "document_title": "d",
        "start_char_index": 0,
        "end_char_index": 1,
    },
    {
        "type": "web_search_result_location",
        "url": "https://a.example",
        "title": "A",
        "cited_text": "b",
        "encrypted_index": "Eo8=",
    },
]

user_blocks = st.one_of(
    TEXT.map(lambda t: TextContent(text=t)),
    st.tuples(B64, st.sampled_from(["image/png", "image/jpeg"])).map(
        lambda x: ImageContent(data=x[0], mime_type=x[1])
    ),
    st.tuples(B64, st.none() | WORD, st.none() | st.just(True)).map(
        lambda x: FileContent(data=x[0], mime_type="application/pdf", name=x[1], citations=x[2])
    ),
    TEXT.map(
        lambda t: FileContent(data=base64.b64encode(t.encode()).decode(), mime_type="text/plain")
    ),
    WORD.map(lambda w: FileContent(url=f"https://f.example/{w}.pdf", mime_type="application/pdf")),
    WORD.map(lambda w: FileContent(file_id=f"file_{w}")),
    WORD.map(lambda w: VendorContent(api=API, data={"type": "search_result", "title": w})),
)


@st.composite
def assistant_turn(draw: Any, turn: int) -> tuple[AssistantMessage, list[ToolCall]]:
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(ThinkingContent(thinking=draw(TEXT), signature=draw(B64)))
    if draw(st.booleans()):
        blocks.append(ThinkingContent(signature=draw(B64), redacted=True))
    if draw(st.booleans()):
        call_id = f"srvtoolu_{turn}"
        raw = {
            "type": "server_tool_use",
            "id": call_id,
            "name": "web_search",
            "input": {"query": draw(WORD)},
        }
        blocks.append(
            ServerToolCall(
                id=call_id, name="web_search", kind="web_search", input=raw["input"], raw=raw
            )
        )
        found = {
            "type": "web_search_tool_result",
            "tool_use_id": call_id,
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://w.example",
                    "title": "W",
                    "encrypted_content": "x",
                }
            ],
        }
        blocks.append(read_result(found, "web_search")[0])
    cites = draw(st.lists(st.sampled_from(RECORDS), max_size=2))
    blocks.append(TextContent(text=draw(TEXT), citations=[read_citation(c) for c in cites] or None))
    if draw(st.booleans()):
        blocks.append(VendorContent(api=API, data={"type": "compaction", "content": draw(WORD)}))
    calls = [
        ToolCall(id=f"toolu_{turn}_{k}", name=name, arguments=draw(JSONISH))
        for k, name in enumerate(draw(st.lists(st.sampled_from(["alpha", "beta"]), max_size=2)))
    ]
    stop = "tool_use" if calls else "stop"
    return AssistantMessage(**ORIGIN, content=blocks + calls, stop_reason=stop), calls


@st.composite
def histories(draw: Any) -> list[Message]:
    messages: list[Message] = []
    for turn in range(draw(st.integers(0, 2))):
        messages.append(_user(draw))
        assistant, calls = draw(assistant_turn(turn))
        messages.append(assistant)
        for call in calls:
            content = draw(st.lists(user_blocks, min_size=1, max_size=2))
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=content,
                    is_error=draw(st.booleans()),
                )
            )
    messages.append(_user(draw))
    return messages


def _user(draw: Any) -> UserMessage:
    if draw(st.booleans()):
        return UserMessage(content=draw(TEXT))
    return UserMessage(content=draw(st.lists(user_blocks, min_size=1, max_size=3)))


TOOLS = [
    Tool(
        name="alpha",
        description="A.",
        parameters={"type": "object", "properties": {"x": {"type": "string"}}},
    ),
    Tool(name="beta", parameters={"type": "object", "properties": {}}),
    ServerTool(kind="web_search", max_uses=3, allowed_domains=["a.example"]),
    ServerTool(kind="web_search", user_location={"city": "Paris", "country": "FR"}),
    ServerTool(
        kind="web_fetch", blocked_domains=["b.example"], options={"max_content_tokens": 900}
    ),
    ServerTool(kind="code_execution"),
    ServerTool(kind="tool_search"),
    ServerTool.native(API, {"type": "bash_20250124", "name": "bash"}),
]
EFFORTS = st.sampled_from(["minimal", "low", "medium", "high"])


@st.composite
def calls(draw: Any) -> tuple[Context, StreamOptions]:
    tools = draw(st.lists(st.sampled_from(TOOLS), unique_by=id, max_size=4)) or None
    names = [t.name for t in tools or () if isinstance(t, Tool)]
    choices = [
        None,
        "auto",
        "none",
        *(["required"] if names else []),
        *({"tool": n} for n in names),
    ]
    reasoning = draw(st.none() | EFFORTS)
    options = StreamOptions(
        max_tokens=draw(st.integers(1, 64_000)),
        temperature=draw(st.none() | st.floats(0, 1)),
        top_p=draw(st.none() | st.floats(0, 1)),
        top_k=draw(st.none() | st.integers(1, 500)),
        stop=draw(st.none() | st.lists(TEXT, min_size=1, max_size=2)),
        tool_choice=draw(st.sampled_from(choices)),
        parallel_tool_calls=draw(st.sampled_from([None, False])),
        reasoning=reasoning,
        thinking_budgets=draw(
            st.just({})
            | st.integers(1024, 40_000).map(lambda n: {reasoning: n} if reasoning else {})
        ),
        metadata=draw(st.just({}) | WORD.map(lambda w: {"user_id": w})),
        output_schema=draw(
            st.none()
            | st.just({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}})
        ),
    )
    context = Context(system_prompt=draw(st.none() | TEXT), messages=draw(histories()), tools=tools)
    return context, options


# --- the property -------------------------------------------------------------------------


def _messages(messages: list[Message]) -> list[Any]:
    """Messages as compared: what the builder sends of them (a user's string as one text
    block), without the facts no request carries (timestamps, usage)."""
    out = []
    for m in messages:
        if isinstance(m, UserMessage) and isinstance(m.content, str):
            m = UserMessage(content=[TextContent(text=m.content)])
        keep = {"role", "content", "tool_call_id", "tool_name", "is_error"}
        out.append(m.model_dump(mode="json", include=keep))
    return out


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(calls())
def test_a_built_request_parses_back_to_its_context_and_options(call: Any) -> None:
    context, options = call
    try:
        built = WIRE.build_request(MODEL, context, options)
    except ValueError:
        assume(False)  # a combination the builder refuses (thinking with top_k, ...)
        return
    inbound = DIALECT.parse_request(built.payload, built.headers)
    got = inbound.context
    assert inbound.model == MODEL.id and inbound.stream is True
    assert inbound.unmodeled == {} and inbound.carriers == {}
    assert inbound.headers == {k: v for k, v in built.headers.items() if k.startswith("anthropic-")}
    assert got.system_prompt == context.system_prompt
    assert _messages(got.messages) == _messages(context.messages)
    # The builder sends the function tools first, then the server tools.
    tools = sorted(context.tools or (), key=lambda t: isinstance(t, ServerTool))
    assert [t.model_dump() for t in got.tools or ()] == [t.model_dump() for t in tools]
    parsed, payload = inbound.options, built.payload
    assert parsed.max_tokens == payload["max_tokens"]
    assert parsed.top_p == options.top_p and parsed.top_k == options.top_k
    assert parsed.stop == options.stop and parsed.metadata == options.metadata
    thinking = payload.get("thinking")
    if thinking is None:
        assert parsed.reasoning is None and parsed.temperature == options.temperature
        assert parsed.max_tokens == options.max_tokens
    else:
        assert parsed.thinking_budget() == thinking["budget_tokens"]
        if not options.thinking_budgets and thinking["budget_tokens"] == options.thinking_budget():
            assert parsed.reasoning == options.reasoning  # a default budget: its own effort
    if "tool_choice" in payload:
        assert parsed.tool_choice == (options.tool_choice or "auto")
        single = options.parallel_tool_calls is False and options.tool_choice != "none"
        assert parsed.parallel_tool_calls == (False if single else None)
    # ...and the parsed request builds the same request again.
    again = WIRE.build_request(MODEL, got, parsed)
    assert again.payload == built.payload and again.headers == built.headers


# --- what clients send --------------------------------------------------------------------

CACHE = {"type": "ephemeral"}


def _body(**more: Any) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        **more,
    }


def test_a_claude_code_request_reads_its_system_tools_thinking_and_metadata() -> None:
    body = _body(
        system=[
            {"type": "text", "text": "You are Claude Code.", "cache_control": CACHE},
            {"type": "text", "text": "Be brief.", "cache_control": CACHE},
        ],
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                    {"type": "text", "text": "run ls", "cache_control": CACHE},
                ],
            }
        ],
        tools=[
            {
                "name": "Bash",
                "description": "Runs.",
                "input_schema": {"type": "object"},
                "cache_control": CACHE,
            }
        ],
        thinking={"type": "enabled", "budget_tokens": 31999},
        metadata={"user_id": "user_abc_account__session_123"},
        stream=True,
        context_management={"edits": []},
    )
    headers = {
        "Anthropic-Beta": "interleaved-thinking-2025-05-14",
        "anthropic-version": "2023-06-01",
        "x-api-key": "k",
    }
    inbound = DIALECT.parse_request(body, headers)
    assert inbound.context.system_prompt == "You are Claude Code.\n\nBe brief."
    assert inbound.options.reasoning == "high" and inbound.options.thinking_budget() == 31999
    assert inbound.options.metadata == {"user_id": "user_abc_account__session_123"}
    assert inbound.unmodeled == {"context_management": {"edits": []}}  # cache_control: not read
    assert inbound.headers == {
        "anthropic-beta": "interleaved-thinking-2025-05-14",
        "anthropic-version": "2023-06-01",
    }
    assert inbound.stream and [t.name for t in inbound.context.tools or ()] == ["Bash"]  # type: ignore[union-attr]


def test_tool_results_come_before_the_rest_of_their_turn_with_images_and_errors() -> None:
    png = base64.b64encode(b"png").decode()
    body = _body(
        messages=[
            {"role": "user", "content": "look"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "half"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": png,
                                },
                            },
                        ],
                    },
                    {"type": "text", "text": "and now?"},
                ],
            },
        ]
    )
    messages = DIALECT.parse_request(body, {}).context.messages
    assert [m.role for m in messages] == ["user", "assistant", "tool_result", "user"]
    result = messages[2]
    assert isinstance(result, ToolResultMessage) and result.is_error and result.tool_name == "shot"
    assert [b.type for b in result.content] == ["text", "image"]


def test_thinking_signatures_and_carriers() -> None:
    carrier = CARRIER_PREFIX + "abc"
    body = _body(
        messages=[
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "a", "citations": None},
                    {"type": "redacted_thinking", "data": carrier},
                ],
            },
            {"role": "user", "content": "more"},
        ]
    )
    inbound = DIALECT.parse_request(body, {})
    answer = inbound.context.messages[1]
    assert isinstance(answer, AssistantMessage)
    assert answer.content == [
        ThinkingContent(thinking="hm", signature="sig"),
        ThinkingContent(signature="opaque", redacted=True),
        TextContent(text="a"),
    ]
    assert inbound.carriers == {1: carrier}


def test_server_tools_become_their_kind_or_stay_native() -> None:
    tools = [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 5,
            "cache_control": CACHE,
        },
        {"type": "web_search_20260209", "name": "web_search"},
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ]
    got = DIALECT.parse_request(_body(tools=tools), {}).context.tools or []
    assert got[0] == ServerTool(kind="web_search", max_uses=5)
    assert got[1] == ServerTool.native(API, tools[1])
    assert got[2] == ServerTool(kind="code_execution")
    assert got[3] == ServerTool.native(API, tools[3])


def test_adaptive_thinking_structured_output_and_tool_choice() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    body = _body(
        thinking={"type": "adaptive"},
        output_config={"effort": "medium", "format": {"type": "json_schema", "schema": schema}},
        tools=[{"name": "f", "input_schema": {"type": "object"}}],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    )
    options = DIALECT.parse_request(body, {}).options
    assert options.reasoning == "medium" and options.output_schema == schema
    assert options.tool_choice == "required" and options.parallel_tool_calls is False
    beta = DIALECT.parse_request(_body(output_format={"type": "json_schema", "schema": schema}), {})
    assert beta.options.output_schema == schema
    none = DIALECT.parse_request(
        _body(thinking={"type": "disabled"}, tool_choice={"type": "none"}), {}
    )
    assert none.options.reasoning is None and none.options.tool_choice == "none"


def test_fields_with_no_place_are_kept_by_their_path() -> None:
    body = _body(
        tools=[{"name": "f", "input_schema": {"type": "object"}, "defer_loading": True}],
        output_config={"effort": "low"},
        service_tier="auto",
        metadata={"user_id": "u", "other": 1},
    )
    inbound = DIALECT.parse_request(body, {})
    assert inbound.unmodeled == {
        "tools[0].defer_loading": True,
        "output_config.effort": "low",
        "service_tier": "auto",
        "metadata": {"user_id": "u", "other": 1},
    }
    assert inbound.options.metadata == {"user_id": "u"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model": 3}, "model"),
        ({"max_tokens": None}, "max_tokens"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": 2.0}, "top_p"),
        ({"stop_sequences": [""]}, "stop_sequences"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"type": "ftp"}}]}
                ]
            },
            "messages[0].content[0].source.type",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": []}],
                    }
                ]
            },
            "messages[0].content[0].input",
        ),
        ({"tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
        (
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "extreme"}},
            "output_config.effort",
        ),
        ({"system": [{"type": "image"}]}, "system[0].type"),
        ({"output_config": {"format": {"type": "regex"}}}, "output_config.format.type"),
    ],
)
def test_a_field_that_cannot_be_read_is_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestFieldError) as caught:
        DIALECT.parse_request(_body(**change), {})
    assert caught.value.field == field


def test_a_system_turn_among_the_messages_joins_the_system_prompt() -> None:
    """Claude Code 2.1 sends `{"role": "system"}` at messages[1] (mid-conversation system)."""
    body = _body(
        system=[{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "system", "content": "Tools run in /tmp."},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "go"},
        ],
    )
    context = DIALECT.parse_request(body, {}).context
    assert context.system_prompt == (
        "x-anthropic-billing-header: cc_version=2.1\n\nTools run in /tmp.\n\nBe brief."
    )
    assert [m.role for m in context.messages] == ["user", "assistant", "user"]
