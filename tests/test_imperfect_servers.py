"""Tool calls and reasoning from imperfect OpenAI-compatible servers (issue 6, section 3).

Inbound: calls without ids (or with empty or repeated ones) still get unique ids, and
empty argument fragments make no events. Outbound: a history with empty or repeated ids
(written by an older version) is sent with unique ones, an assistant turn with only tool
calls sends what the widest set of servers accept, a failed tool result says so, and
reasoning signatures go back to the model that wrote them.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    MessageUpdate,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    UserMessage,
    audit_tool_pairs,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Run,
    contract_model,
    options,
    run_provider,
    sse_response,
)
from stream_core.provider import prepare_messages

OPENAI = "openai-completions"
ANTHROPIC = "anthropic-messages"


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-imperfect", "object": "chat.completion.chunk", **extra}
    if delta is not None or finish is not None:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _stream(*chunks: bytes, api: str = OPENAI, context: Context | None = None) -> Run:
    body = b"".join(chunks) + (b"data: [DONE]\n\n" if api == OPENAI else b"")

    async def main() -> Run:
        return await run_provider(api, [sse_response([body])], context=context)

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run


def _call(index: int, args: str, id: str | None = None, name: str | None = None) -> dict:
    tc: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if id is not None:
        tc["id"] = id
    if name is not None:
        tc["function"]["name"] = name
    return tc


OK_OPENAI = _chunk({"content": "ok"}) + _chunk(finish="stop") + b"data: [DONE]\n\n"
OK_ANTHROPIC = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":"ok"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _send(context: Context, model: Model | None = None) -> dict[str, Any]:
    """The JSON payload one request sends for `context`."""
    model = model or contract_model(OPENAI)
    body = OK_OPENAI if model.api == OPENAI else OK_ANTHROPIC

    async def main() -> httpx.Request:
        with respx.mock(assert_all_mocked=True) as mock:
            route = mock.route(host=httpx.URL(model.base_url).host).mock(
                return_value=sse_response([body])
            )
            message = await stream_core.complete(model, context, options())
            assert message.error is None, message.error
            return route.calls[0].request

    return json.loads(anyio.run(main).content)


# --- inbound ids --------------------------------------------------------------------------


def _ids(run: Run) -> list[str]:
    return [c.id for c in run.message.tool_calls()]


@pytest.mark.parametrize(
    "ids",
    [
        (None, None, None),  # no ids at all
        ("", "", ""),  # empty strings
        ("call_1", "call_1", "call_1"),  # one id repeated for every call
        ("call_1", None, "call_1"),
    ],
)
def test_streamed_calls_without_usable_ids_get_unique_deterministic_ids(ids: tuple) -> None:
    """If this fails: every call has id "" and the results cannot be told apart."""
    chunks = [
        _chunk({"tool_calls": [_call(i, json.dumps({"n": i}), id=ids[i], name=f"tool{i}")]})
        for i in range(3)
    ]
    runs = [_stream(*chunks, _chunk(finish="tool_calls")) for _ in range(2)]
    got = _ids(runs[0])
    assert len(got) == 3 and all(got) and len(set(got)) == 3
    assert got == _ids(runs[1])  # the same response gives the same ids
    if ids[0]:
        assert got[0] == ids[0]  # a usable vendor id is kept
    assert [c.arguments for c in runs[0].message.tool_calls()] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_anthropic_tool_use_blocks_with_empty_or_repeated_ids_get_unique_ids() -> None:
    def block(i: int, id: str) -> bytes:
        start = {
            "type": "content_block_start",
            "index": i,
            "content_block": {"type": "tool_use", "id": id, "name": "read", "input": {"i": i}},
        }
        stop = {"type": "content_block_stop", "index": i}
        return (
            f"event: content_block_start\ndata: {json.dumps(start)}\n\n"
            f"event: content_block_stop\ndata: {json.dumps(stop)}\n\n"
        ).encode()

    run = _stream(
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_x"}}\n\n',
        block(0, ""),
        block(1, "toolu_same"),
        block(2, "toolu_same"),
        b'event: message_delta\ndata: {"type":"message_delta",'
        b'"delta":{"stop_reason":"tool_use"}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        api=ANTHROPIC,
    )
    got = _ids(run)
    assert all(got) and len(set(got)) == 3 and got[1] == "toolu_same"


def test_empty_argument_fragments_make_no_events() -> None:
    """If this fails: `"arguments": ""` fragments produce empty toolcall_delta events."""
    run = _stream(
        _chunk({"tool_calls": [_call(0, "", id="call_a", name="read")]}),
        _chunk({"tool_calls": [_call(0, "")]}),
        _chunk({"tool_calls": [_call(0, '{"path":')]}),
        _chunk({"tool_calls": [_call(0, "")]}),
        _chunk({"tool_calls": [_call(0, '"a.txt"}')]}),
        _chunk({"tool_calls": [_call(0, "")]}),
        _chunk(finish="tool_calls"),
    )
    deltas = [
        e.delta.delta
        for e in run.events
        if isinstance(e, MessageUpdate) and isinstance(e.delta, ToolCallDelta)
    ]
    assert deltas == ['{"path":', '"a.txt"}']
    assert run.message.tool_calls()[0].arguments == {"path": "a.txt"}


# --- outbound ids ---------------------------------------------------------------------------


def _assistant(model: Model, *calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        api=model.api, provider=model.provider, model=model.id, content=list(calls)
    )


def _result(call_id: str, name: str, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)])


def _bad_id_history(model: Model) -> Context:
    """Empty and repeated ids, as an older version wrote them, over two tool turns."""
    return Context(
        messages=[
            UserMessage(content="go"),
            _assistant(
                model,
                ToolCall(id="", name="read", arguments={"p": "a"}),
                ToolCall(id="", name="grep", arguments={"q": "b"}),
            ),
            _result("", "read", "A"),
            _result("", "grep", "B"),
            _assistant(
                model,
                ToolCall(id="call_dup", name="read", arguments={"p": "c"}),
                ToolCall(id="call_dup", name="list", arguments={}),
            ),
            _result("call_dup", "read", "C"),
            _result("call_dup", "list", "D"),
            _assistant(model, ToolCall(id="call_dup", name="stat", arguments={})),
            _result("call_dup", "stat", "E"),
        ]
    )


def test_prepare_messages_gives_every_call_a_unique_id_and_results_follow() -> None:
    """If this fails: empty or duplicate ids from a saved history reach the vendor."""
    model = contract_model(OPENAI)
    context = _bad_id_history(model)
    before = context.model_dump()
    out = prepare_messages(context, api=model.api, provider=model.provider, model_id=model.id)

    calls = [c for m in out if isinstance(m, AssistantMessage) for c in m.tool_calls()]
    ids = [c.id for c in calls]
    assert all(ids) and len(set(ids)) == len(ids) == 5
    results = [m for m in out if isinstance(m, ToolResultMessage)]
    by_id = {r.tool_call_id: r for r in results}
    # Each result still answers the call it answered: the name and text line up.
    assert [result_text(by_id[c.id]) for c in calls] == ["A", "B", "C", "D", "E"]
    assert audit_tool_pairs(out).ok
    assert context.model_dump() == before  # the caller's history is untouched
    again = prepare_messages(context, api=model.api, provider=model.provider, model_id=model.id)
    assert [c.id for m in again if isinstance(m, AssistantMessage) for c in m.tool_calls()] == ids


def result_text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


@pytest.mark.parametrize("api", [OPENAI, ANTHROPIC])
def test_no_provider_sends_an_empty_or_duplicate_tool_call_id(api: str) -> None:
    model = contract_model(api)
    payload = _send(_bad_id_history(model), model)
    if api == ANTHROPIC:
        blocks = [b for m in payload["messages"] for b in m["content"] if isinstance(b, dict)]
        ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        texts = [b["content"][0]["text"] for b in blocks if b["type"] == "tool_result"]
    else:
        ids = [c["id"] for m in payload["messages"] for c in m.get("tool_calls") or []]
        tools = [m for m in payload["messages"] if m["role"] == "tool"]
        answered = [m["tool_call_id"] for m in tools]
        texts = [m["content"] for m in tools]
    assert all(ids) and len(set(ids)) == len(ids) == 5
    assert answered == ids
    assert texts == ["A", "B", "C", "D", "E"]


# --- outbound shape for OpenAI-compatible servers -----------------------------------------


def _tool_turn(model: Model, *, text: str = "", is_error: bool = False) -> Context:
    content: list[Any] = [TextContent(text=text)] if text else []
    content.append(ToolCall(id="call_1", name="read", arguments={"p": "x"}))
    return Context(
        messages=[
            UserMessage(content="go"),
            AssistantMessage(
                api=model.api, provider=model.provider, model=model.id, content=content
            ),
            ToolResultMessage(
                tool_call_id="call_1",
                tool_name="read",
                content=[TextContent(text="no such file")],
                is_error=is_error,
            ),
        ]
    )


def _assistant_turn(payload: dict[str, Any]) -> dict[str, Any]:
    (turn,) = [m for m in payload["messages"] if m["role"] == "assistant"]
    return turn


def test_empty_content_of_a_tool_call_turn_is_an_empty_string_by_default() -> None:
    """If this fails: llama-cpp-python answers every second turn of a tool loop with a 500
    (its schema rejects `"content": null`)."""
    turn = _assistant_turn(_send(_tool_turn(contract_model(OPENAI))))
    assert turn["content"] == "" and turn["tool_calls"][0]["id"] == "call_1"


@pytest.mark.parametrize(("flag", "expected"), [("null", None), ("omit", "missing")])
def test_empty_content_compat_flag(flag: str, expected: Any) -> None:
    model = contract_model(OPENAI).model_copy(update={"compat": {"empty_content": flag}})
    turn = _assistant_turn(_send(_tool_turn(model), model))
    assert turn.get("content", "missing") == expected


def test_text_of_a_tool_call_turn_is_sent_whatever_the_flag() -> None:
    model = contract_model(OPENAI).model_copy(update={"compat": {"empty_content": "omit"}})
    turn = _assistant_turn(_send(_tool_turn(model, text="Reading."), model))
    assert turn["content"] == "Reading."


def test_a_failed_tool_result_says_so_in_its_text() -> None:
    """If this fails: `is_error=True` is lost on an OpenAI `tool` message."""
    model = contract_model(OPENAI)
    failed = _send(_tool_turn(model, is_error=True))
    ok = _send(_tool_turn(model))
    (failed_tool,) = [m for m in failed["messages"] if m["role"] == "tool"]
    (ok_tool,) = [m for m in ok["messages"] if m["role"] == "tool"]
    assert ok_tool["content"] == "no such file"
    assert failed_tool["content"].endswith("no such file")
    assert "error" in failed_tool["content"].lower().replace("no such file", "")


# --- reasoning signatures -----------------------------------------------------------------

OPENROUTER_STREAM = [
    _chunk(
        {
            "reasoning": "Need the ",
            "reasoning_details": [
                {
                    "type": "reasoning.text",
                    "text": "Need the ",
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
            ],
        }
    ),
    _chunk(
        {
            "reasoning": "file.",
            "reasoning_details": [{"type": "reasoning.text", "text": "file.", "index": 0}],
        }
    ),
    _chunk(
        {
            "reasoning_details": [
                {"type": "reasoning.text", "text": "", "signature": "sig-OR", "index": 0},
                {"type": "reasoning.encrypted", "data": "enc-blob", "id": "rs_1", "index": 1},
            ]
        }
    ),
    _chunk({"tool_calls": [_call(0, '{"p": "x"}', id="call_r", name="read")]}),
    _chunk(finish="tool_calls"),
]

OPENROUTER_DETAILS = [
    {
        "type": "reasoning.text",
        "text": "Need the file.",
        "format": "anthropic-claude-v1",
        "index": 0,
        "signature": "sig-OR",
    },
    {"type": "reasoning.encrypted", "data": "enc-blob", "id": "rs_1", "index": 1},
]

LITELLM_STREAM = [
    _chunk(
        {
            "reasoning_content": "Need the ",
            "thinking_blocks": [{"type": "thinking", "thinking": "Need the ", "signature": None}],
        }
    ),
    _chunk(
        {
            "reasoning_content": "file.",
            "thinking_blocks": [{"type": "thinking", "thinking": "file."}],
        }
    ),
    _chunk({"thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "sig-LL"}]}),
    _chunk({"tool_calls": [_call(0, '{"p": "x"}', id="call_r", name="read")]}),
    _chunk(finish="tool_calls"),
]

LITELLM_BLOCKS = [{"type": "thinking", "thinking": "Need the file.", "signature": "sig-LL"}]


def _follow_up(message: AssistantMessage) -> Context:
    return Context(
        messages=[
            UserMessage(content="go"),
            message,
            _result("call_r", "read", "contents"),
        ]
    )


@pytest.mark.parametrize(
    ("stream", "field", "expected"),
    [
        (OPENROUTER_STREAM, "reasoning_details", OPENROUTER_DETAILS),
        (LITELLM_STREAM, "thinking_blocks", LITELLM_BLOCKS),
    ],
    ids=["openrouter", "litellm"],
)
def test_reasoning_signatures_are_kept_and_sent_back_to_the_same_model_only(
    stream: list[bytes], field: str, expected: list[dict[str, Any]]
) -> None:
    """If this fails: a reasoning model behind OpenRouter or LiteLLM loses its signed
    reasoning between the turns of a tool loop."""
    run = _stream(*stream)
    message = run.message
    assert message.error is None and message.stop_reason == "tool_use"
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Need the file."
    # Kept on the message, so a history saved to disk still has it.
    restored = AssistantMessage.model_validate_json(message.model_dump_json())

    same = _assistant_turn(_send(_follow_up(restored)))
    assert same[field] == expected
    assert "Need the file." not in same.get("content", "")

    other = contract_model(OPENAI).model_copy(update={"id": "another-model"})
    elsewhere = _assistant_turn(_send(_follow_up(restored), other))
    assert field not in elsewhere
    assert "sig-OR" not in json.dumps(elsewhere) and "sig-LL" not in json.dumps(elsewhere)


def test_encrypted_reasoning_without_text_still_has_a_block() -> None:
    run = _stream(
        _chunk(
            {"reasoning_details": [{"type": "reasoning.encrypted", "data": "blob", "index": 0}]}
        ),
        _chunk({"content": "Done."}),
        _chunk(finish="stop"),
    )
    thinking, text = run.message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == ""
    assert json.loads(thinking.signature or "") == {
        "reasoning_details": [{"type": "reasoning.encrypted", "data": "blob", "index": 0}]
    }
    assert isinstance(text, TextContent) and text.text == "Done."


def test_reasoning_details_of_a_whole_completion_are_kept() -> None:
    completion = {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Hi",
                    "reasoning": "Greet.",
                    "reasoning_details": [
                        {"type": "reasoning.text", "text": "Greet.", "signature": "s"}
                    ],
                },
                "finish_reason": "stop",
            }
        ],
    }

    async def main() -> Run:
        response = httpx.Response(200, json=completion)
        return await run_provider(OPENAI, [response])

    run = anyio.run(main)
    thinking = run.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert json.loads(thinking.signature or "")["reasoning_details"][0]["signature"] == "s"


def test_junk_reasoning_details_are_ignored() -> None:
    run = _stream(
        _chunk({"reasoning": "Hmm.", "reasoning_details": [1, "x", None, {"index": 0}]}),
        _chunk({"reasoning_details": {"not": "a list"}}),
        _chunk({"content": "ok"}),
        _chunk(finish="stop"),
    )
    assert run.message.error is None and run.message.text() == "ok"
    thinking = run.message.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Hmm."
