"""A harness's own records in the history (issue: "Product messages reach the model").

A compaction summary, a shell command the user ran, a role the harness defines itself: kept in
the one list the harness loads, continues and saves, and sent to every wire API as the user
turn each converts to. Everything here goes through the public door (`stream_core`).
"""

from __future__ import annotations

import io
import json
import re
from typing import Any, Literal

import anyio
import httpx
import pytest

# The per-API payload readers and alternation rules of the handoff matrix (one table: a new
# provider adds its row there and is checked here too).
from test_handoff_matrix import SOURCES, TARGETS, Target, Turn

import stream_core
import stream_core.provider
from stream_core import (
    AssistantMessage,
    BashExecution,
    BranchSummary,
    CompactionSummary,
    Context,
    CustomMessage,
    Message,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    audit_tool_pairs,
    dump_messages,
    estimate_context_tokens,
    estimate_message_tokens,
    fits_context,
    load_messages,
    messages_only,
    model_messages,
    register_message_role,
    repair_tool_pairs,
)

HOST = "https://roles.test"
SUMMARY = "The user is planning a trip to Lyon; the weather in Paris was 18C, cloudy."
WEATHER = Tool(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


# --- the conversations ------------------------------------------------------------------


def _said(api: str, *content: Any) -> AssistantMessage:
    src = SOURCES[api]
    return AssistantMessage(content=list(content), api=api, provider=src.provider, model=src.model)


def turn(api: str, n: int) -> list[Message]:
    """One turn: a question, a tool call, its result, the answer."""
    call = f"call{n}x"
    return [
        UserMessage(content=f"Question {n}: the weather in city {n}?", timestamp=n),
        _said(api, ToolCall(id=call, name="get_weather", arguments={"city": f"city {n}"})),
        ToolResultMessage(
            tool_call_id=call, tool_name="get_weather", content=[TextContent(text=f"{n}C")]
        ),
        _said(api, TextContent(text=f"It is {n}C in city {n}.")),
    ]


def ten_turns(api: str) -> list[Message]:
    return [m for n in range(10) for m in turn(api, n)]


def compacted(api: str) -> list[Message]:
    """The ten turns after compaction: one summary record, then the last turn as it was."""
    full = ten_turns(api)
    return [
        CompactionSummary(
            summary=SUMMARY,
            tokens_before=estimate_context_tokens(Context(messages=full)),
            timestamp=100,
        ),
        *full[-4:],
        UserMessage(content="And in Lyon tomorrow?", timestamp=101),
    ]


def with_bash(api: str) -> list[Message]:
    return [
        *turn(api, 1),
        BashExecution(
            command="pytest -q tests/test_trip.py",
            output="2 failed, 5 passed",
            exit_code=1,
            timestamp=50,
        ),
        UserMessage(content="Fix the failing tests.", timestamp=51),
    ]


# --- sending ------------------------------------------------------------------------------


def _model(api: str) -> Model:
    src = SOURCES[api]
    return Model(id=src.model, api=api, provider=src.provider, base_url=HOST, input=["text"])


def capture(api: str, messages: list[Message]) -> dict[str, Any]:
    """The JSON body `api`'s provider sends for `messages` (the vendor answers 400)."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            400, json={"error": {"type": "invalid_request_error", "message": "x"}}
        )

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            wire = stream_core.provider.get_provider(api).wire
            tools = [WEATHER] if wire is None or wire.takes_tools else []  # none for generate
            context = Context(system_prompt="Be brief.", messages=messages, tools=tools)
            opts = StreamOptions(api_key="roles-key-0123456789", max_retries=0, client=client)
            message = await stream_core.stream(_model(api), context, opts).result()
            assert message.error is not None and message.error.status_code == 400

    anyio.run(main)
    assert len(seen) == 1, "the provider sent no request"
    payload: dict[str, Any] = json.loads(seen[0].content)
    return payload


def check_valid(turns: list[Turn], rules: Target) -> None:
    """The request keeps the API's rules: alternation where it needs it, and every tool
    call answered by the next (user) turn."""
    roles = [t.role for t in turns]
    if rules.alternates:
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), roles
        assert roles[0] == "user", roles
    if not rules.tools:
        return
    for n, t in enumerate(turns):
        if t.calls:
            answer = turns[n + 1] if n + 1 < len(turns) else None
            assert answer is not None and answer.role == "user", "results must follow the calls"
            assert len(answer.results) == len(t.calls)


def user_text_with(turns: list[Turn], needle: str) -> str:
    """The text of the user turn that carries `needle`; fails when an assistant turn does
    or none does."""
    found = [(t.role, x) for t in turns for x in t.texts if needle in x]
    assert found, f"{needle!r} was not sent"
    assert {role for role, _ in found} == {"user"}, found
    return found[0][1]


def served() -> list[str]:
    apis = {e.api for e in stream_core.list_providers()}
    return [api for api in TARGETS if api in apis]


APIS = served()


def test_every_wire_api_is_checked() -> None:
    assert len(APIS) == 8, APIS


# --- a compaction, on every API, saved and sent again -------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_compacted_conversation_is_sent_saved_reloaded_and_sent_again(
    api: str, tmp_path: Any
) -> None:
    rules = TARGETS[api]
    history = compacted(api)
    full = ten_turns(api)

    first = capture(api, history)
    turns = rules.read(first)
    text = user_text_with(turns, SUMMARY)
    assert f"<summary>\n{SUMMARY}\n</summary>" in text
    assert "compacted" in text  # the lead says what it is
    check_valid(turns, rules)
    everything = json.dumps(first)
    # The last turn went as it was; the compacted turns did not go at all.
    assert "It is 9C in city 9." in everything and "And in Lyon tomorrow?" in everything
    assert "city 3" not in everything
    assert "tokens_before" not in everything and "compaction_summary" not in everything
    assert estimate_context_tokens(Context(messages=history)) < estimate_context_tokens(
        Context(messages=full)
    )

    # One list: saved as it is, reloaded byte for byte, and sent again the same way.
    path = tmp_path / "session.jsonl"
    dump_messages(history, path)
    loaded = load_messages(path)
    assert isinstance(loaded[0], CompactionSummary) and loaded[0].summary == SUMMARY
    assert loaded == history
    again = tmp_path / "again.jsonl"
    dump_messages(loaded, again)
    assert again.read_bytes() == path.read_bytes()
    assert capture(api, messages_only(loaded)) == first


@pytest.mark.parametrize("api", APIS)
def test_a_bash_execution_is_sent_as_a_user_turn_on_every_api(api: str) -> None:
    rules = TARGETS[api]
    history = with_bash(api)

    payload = capture(api, history)
    turns = rules.read(payload)
    text = user_text_with(turns, "pytest -q tests/test_trip.py")
    assert "2 failed, 5 passed" in text and "Exit code: 1" in text
    check_valid(turns, rules)
    assert "Fix the failing tests." in json.dumps(payload)

    out = io.StringIO()
    dump_messages(history, out)
    loaded = load_messages(io.StringIO(out.getvalue()))
    assert isinstance(loaded[4], BashExecution) and loaded == history
    again = io.StringIO()
    dump_messages(loaded, again)
    assert again.getvalue() == out.getvalue()
    assert capture(api, messages_only(loaded)) == payload


# --- a role the harness defines itself ------------------------------------------------------


@register_message_role
class TodoList(CustomMessage):
    """A harness's own record: its task list, shown to the model."""

    role: Literal["test_todo_list"] = "test_todo_list"
    items: list[str]
    done: list[str] = []

    def to_messages(self) -> list[UserMessage]:
        lines = [f"- [ ] {item}" for item in self.items] + [f"- [x] {d}" for d in self.done]
        return [UserMessage(content="Your task list:\n" + "\n".join(lines))]


@register_message_role
class Recap(CustomMessage):
    """Converts to records of other roles, converted in turn, and to more than one message."""

    role: Literal["test_recap"] = "test_recap"
    todo: list[str]

    def to_messages(self) -> list[Message]:
        return [
            BranchSummary(summary="Tried the train; it was full."),
            TodoList(items=self.todo),
            UserMessage(content="Carry on with the list."),
        ]


@pytest.mark.parametrize("api", APIS)
def test_a_role_defined_by_the_harness_is_sent_on_every_api(api: str) -> None:
    rules = TARGETS[api]
    history: list[Message] = [
        *turn(api, 1),
        TodoList(items=["book the hotel"], done=["check the weather"]),
        Recap(todo=["buy tickets"]),
    ]

    turns = rules.read(capture(api, history))
    assert "- [ ] book the hotel\n- [x] check the weather" in user_text_with(turns, "hotel")
    assert "<summary>\nTried the train; it was full.\n</summary>" in user_text_with(turns, "train")
    user_text_with(turns, "- [ ] buy tickets")
    user_text_with(turns, "Carry on with the list.")
    check_valid(turns, rules)


def test_a_harness_role_round_trips_through_jsonl_as_its_class() -> None:
    todo = TodoList(items=["a", "ü"], timestamp_ms=7)  # type: ignore[call-arg]  # extra: kept
    out = io.StringIO()
    dump_messages([todo, Recap(todo=["b"])], out)
    assert out.getvalue().splitlines()[0] == (
        '{"role":"test_todo_list","items":["a","ü"],"done":[],"timestamp_ms":7}'
    )
    loaded = load_messages(io.StringIO(out.getvalue()))
    assert [type(r) for r in loaded] == [TodoList, Recap]
    assert loaded[0] == todo


# --- what the door says about them ----------------------------------------------------------


def test_messages_only_keeps_registered_records_and_model_messages_converts_them() -> None:
    summary = CompactionSummary(summary="s", timestamp=1)
    records: list[Any] = [summary, {"role": "session_digest", "x": 1}, UserMessage(content="hi")]

    assert messages_only(records) == [summary, records[2]]
    sent = model_messages(records)
    assert [type(m) for m in sent] == [UserMessage, UserMessage]
    assert sent[0].content == summary.to_messages()[0].content and sent[1] is records[2]
    assert isinstance(summary, Message)  # one annotation for a history: list[Message]


def test_token_estimates_count_the_conversion() -> None:
    bash = BashExecution(command="cat big.log", output="line\n" * 2000, exit_code=0)
    sent = model_messages([bash])

    assert estimate_message_tokens(bash) == sum(estimate_message_tokens(m) for m in sent)
    assert estimate_context_tokens(Context(messages=[bash])) == estimate_context_tokens(
        Context(messages=sent)
    )
    assert estimate_message_tokens(bash) > 2000 // 4
    assert not fits_context(Context(messages=[bash]), 500)
    assert fits_context(Context(messages=[CompactionSummary(summary="short")]), 500)


def test_tool_pair_audit_and_repair_pass_over_custom_records() -> None:
    api = "anthropic-messages"
    call = ToolCall(id="t1", name="get_weather", arguments={})
    bash = BashExecution(command="ls", output="a", exit_code=0)
    history: list[Message] = [
        UserMessage(content="go"),
        _said(api, call, ToolCall(id="t2", name="get_weather", arguments={})),
        ToolResultMessage(tool_call_id="t1", tool_name="get_weather"),
        bash,
        CompactionSummary(summary="s"),
    ]

    audit = audit_tool_pairs(history)
    assert [c.id for _, c in audit.unpaired_calls] == ["t2"] and not audit.orphan_results
    repaired = repair_tool_pairs(history).messages
    # The missing result goes after the results of the call's turn; the records stay put.
    assert [m.role for m in repaired] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "bash_execution",
        "compaction_summary",
    ]
    assert repaired[4] is bash
    assert audit_tool_pairs([CompactionSummary(summary="s"), bash]).ok


def test_the_callers_context_keeps_its_records() -> None:
    history = compacted("openai-completions")
    context = Context(messages=history)
    before = context.model_dump()

    capture("openai-completions", history)
    stream_core.stream(_model("openai-completions"), context)  # checked, not started

    assert context.model_dump() == before and isinstance(context.messages[0], CompactionSummary)


def test_a_harness_record_of_a_shipped_role_round_trips_byte_for_byte() -> None:
    # Written by the harness itself before the role was shipped: its own key order, fields
    # of its own, no timestamp. Loaded as the class, written back exactly.
    line = (
        '{"summary":"Résumé: 用户要求读取文件 ✅","role":"compaction_summary",'
        '"nested":{"z":[1,2.5,null,true,{"deep":["ä",{"k":-0.0}]}],"a":{}},'
        '"id":12345678901234567890}\n'
        '{"role":"bash_execution","command":"ls","exit_code":0,"by":"user"}\n'
    )
    loaded = load_messages(io.StringIO(line))
    assert isinstance(loaded[0], CompactionSummary) and loaded[0].tokens_before is None
    assert isinstance(loaded[1], BashExecution) and loaded[1].output == ""
    out = io.StringIO()
    dump_messages(loaded, out)
    assert out.getvalue() == line
    # A field set since is written after the ones it had.
    loaded[1].truncated = True
    out = io.StringIO()
    dump_messages(loaded[1:], out)
    assert out.getvalue().endswith(',"by":"user","truncated":true}\n')


def test_an_invalid_record_of_a_registered_role_names_the_line() -> None:
    with pytest.raises(ValueError, match=r"^line 2: invalid compaction_summary .*summary"):
        load_messages(
            io.StringIO('{"role":"user","content":"hi"}\n{"role":"compaction_summary"}\n')
        )


# --- roles nobody registered ----------------------------------------------------------------


class Unregistered(CustomMessage):
    role: Literal["test_unregistered"] = "test_unregistered"

    def to_messages(self) -> list[UserMessage]:
        return [UserMessage(content="never sent")]


def test_an_unregistered_role_raises_naming_the_role_and_the_index() -> None:
    with pytest.raises(ValueError, match=r"messages\.1\b(.|\n)*unknown message role 'robot'"):
        Context(messages=[UserMessage(content="hi"), {"role": "robot"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"messages\.1\b(.|\n)*'test_unregistered'"):
        Context(messages=[UserMessage(content="hi"), Unregistered()])


def test_an_unregistered_role_raises_at_the_call_naming_the_index() -> None:
    model = _model("anthropic-messages")
    context = Context(messages=[UserMessage(content="hi")])
    context.messages.append(Unregistered())  # after construction: pydantic did not look
    with pytest.raises(ValueError, match=r"^context\.messages\.1: unknown message role "):
        stream_core.stream(model, context)
    with pytest.raises(ValueError, match=r"^context\.messages\.2: unknown message role 'robot'"):
        stream_core.stream(
            model,
            {"messages": [{"role": "user", "content": "hi"}, CompactionSummary(summary="s"),
                          {"role": "robot"}]},
        )  # fmt: skip
    # A JSONL record of an unknown role kept as a dict still points at messages_only().
    context.messages[1] = {"role": "robot"}  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"context\.messages\[1\] is a dict.*messages_only"):
        stream_core.stream(model, context)


def test_a_conversion_that_returns_no_messages_is_named_at_the_call() -> None:
    class Broken(CustomMessage):
        role: Literal["test_broken"] = "test_broken"

        def to_messages(self) -> list[Any]:
            return [{"role": "user", "content": "a dict"}]

    register_message_role(Broken)
    with pytest.raises(TypeError, match=r"context\.messages\[1\]: Broken\.to_messages\(\) .*dict"):
        stream_core.stream(
            _model("anthropic-messages"),
            Context(messages=[UserMessage(content="hi"), Broken()]),
        )


def test_register_message_role_refuses_what_it_cannot_send() -> None:
    class NoLiteral(CustomMessage):
        role: str = "x"

        def to_messages(self) -> list[UserMessage]:
            return []

    class Builtin(CustomMessage):
        role: Literal["user"] = "user"

        def to_messages(self) -> list[UserMessage]:
            return []

    class NoConversion(CustomMessage):
        role: Literal["test_no_conversion"] = "test_no_conversion"

    class Taken(CustomMessage):
        role: Literal["compaction_summary"] = "compaction_summary"

        def to_messages(self) -> list[UserMessage]:
            return []

    with pytest.raises(TypeError, match=re.escape("role: Literal['my_role']")):
        register_message_role(NoLiteral)
    with pytest.raises(ValueError, match="built-in"):
        register_message_role(Builtin)
    with pytest.raises(TypeError, match="must define to_messages"):
        register_message_role(NoConversion)
    with pytest.raises(ValueError, match="already registered to stream_core"):
        register_message_role(Taken)
    with pytest.raises(TypeError, match="CustomMessage subclass"):
        register_message_role(UserMessage)  # type: ignore[type-var]
    assert register_message_role(TodoList) is TodoList  # again: no change
