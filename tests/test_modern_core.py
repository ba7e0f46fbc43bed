"""The core of issue 35 on its own: the table of block kinds, the new blocks in a history
file, and the assembler's calls for them, driven the way a provider drives them.

- `BLOCK_KINDS` is the one list of kinds: the content unions (the static ones a type
  checker reads and the runtime ones pydantic validates with) hold exactly its rows;
- every new block, citation and usage field survives `dump_messages` / `load_messages`
  byte for byte, and a line written before they existed is written back unchanged;
- `start_block`, `block_input`, `add_block`, `cite`, `cite_at`, `set_container` and
  `set_server_tools` give a stream the contract grammar accepts, in order, on the one live
  message; a cut server-call input keeps what parses;
- a vendor value of the wrong type, or a count beyond belief, ends the stream `protocol`
  with one `message_end`, through a real (tiny) provider.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import typing
from collections import deque
from collections.abc import Hashable, Iterator
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
import stream_core._kinds as kinds_module
import stream_core.provider
from stream_core import (
    BLOCK_KINDS,
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    AssistantStreamEvent,
    Citation,
    Context,
    Cost,
    FileContent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    ModelPrices,
    ServerToolCall,
    ServerToolResult,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserMessage,
    VendorContent,
)
from stream_core._blocks import SERVER_TOOL_KINDS
from stream_core._content import Source
from stream_core._events import BlockStart, CitationAdded
from stream_core._history.jsonl import dump_messages, load_messages
from stream_core._kinds import AssistantContent, UserContent
from stream_core._pipeline.assembler import Assembler
from stream_core.contract_tests.grammar import assert_valid_event_stream

# --- the table and the unions ---------------------------------------------------------------


def _runtime_members(union: Any) -> set[type[Any]]:
    """The classes of a content union built from the table (Annotated[Union[Annotated[cls,
    Tag], ...], discriminator, validator])."""
    inner = typing.get_args(union)[0]
    members = set()
    for member in typing.get_args(inner):
        args = typing.get_args(member)
        members.add(args[0] if args else member)
    return members


def _static_members(name: str) -> set[str]:
    """The class names of the `TYPE_CHECKING` union `name` in `_kinds.py` (what mypy and
    editors read), from its source."""
    tree = ast.parse(inspect.getsource(kinds_module))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name
                ):
                    return {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
    raise AssertionError(f"no static {name} in _kinds.py")


def _rows(role: str) -> set[type[Any]]:
    return {k.cls for k in BLOCK_KINDS.values() if role in k.roles}


def test_the_runtime_unions_hold_exactly_the_table_rows_of_their_role() -> None:
    assert _runtime_members(AssistantContent) == _rows("assistant") | {UnknownContent}
    assert _runtime_members(UserContent) == _rows("user") | {UnknownContent}
    # A tool result's content is the user union: every row allowed there is in it.
    assert _rows("tool_result") <= _runtime_members(UserContent)


def test_the_static_unions_name_the_same_classes_as_the_table() -> None:
    assert _static_members("AssistantContent") == {
        c.__name__ for c in _rows("assistant") | {UnknownContent}
    }
    assert _static_members("UserContent") == {c.__name__ for c in _rows("user") | {UnknownContent}}


def test_every_row_names_its_class_type_and_every_block_kind_is_a_row() -> None:
    for name, row in BLOCK_KINDS.items():
        assert row.type == name
        assert row.cls.model_fields["type"].default == name
        if row.vendor_bound:
            assert row.family == "block"
    new = {ServerToolCall, ServerToolResult, ApprovalRequest, ApprovalResponse, FileContent}
    assert new | {VendorContent} <= {k.cls for k in BLOCK_KINDS.values()}
    # Every block that becomes text for another vendor says how.
    for row in BLOCK_KINDS.values():
        if row.family == "block" and row.cls is not stream_core.ImageContent:
            assert callable(getattr(row.cls, "as_text", None)), row.type


def test_a_block_of_each_kind_validates_into_its_class_in_a_message() -> None:
    message = AssistantMessage.model_validate(
        {
            "role": "assistant",
            "api": "a",
            "provider": "p",
            "model": "m",
            "content": [
                {"type": "server_tool_call", "id": "s1", "name": "web_search"},
                {"type": "server_tool_result", "call_id": "s1"},
                {"type": "file", "file_id": "f1"},
                {"type": "approval_request", "id": "r1", "name": "t"},
                {"type": "vendor", "api": "a", "data": {"type": "x"}},
            ],
        }
    )
    assert [type(b) for b in message.content] == [
        ServerToolCall,
        ServerToolResult,
        FileContent,
        ApprovalRequest,
        VendorContent,
    ]
    with pytest.raises(ValueError, match="unknown content type"):
        AssistantMessage.model_validate(
            {"api": "a", "provider": "p", "model": "m", "content": [{"type": "approval_respons"}]}
        )


# --- history files --------------------------------------------------------------------------

RAW_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [{"type": "web_search_result", "url": "https://a.test", "encrypted_content": "E"}],
}


def full_history() -> list[Any]:
    """A conversation holding every new block and field, with vendor payloads that have
    key orders, nesting and non-ASCII text a careless writer would change."""
    citation = Citation(
        url="https://a.test/ü",
        title="Ä page",
        cited_text="the quoted part",
        start=0,
        end=5,
        raw={"type": "web_search_result_location", "encrypted_index": "Eo8B", "z": 1, "a": 2},
    )
    doc_cite = Citation(document_index=0, title="report.pdf", cited_text="p. 3")
    answer = AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        content=[
            ServerToolCall(
                id="srvtoolu_01",
                name="web_search",
                kind="web_search",
                input={"query": "paris weather", "nested": [1, {"b": None}]},
                caller={"type": "direct"},
                raw={"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search"},
            ),
            ServerToolResult(
                call_id="srvtoolu_01",
                name="web_search",
                kind="web_search",
                sources=[Source(url="https://a.test", title="A", text="snippet", score=0.5)],
                raw=RAW_RESULT,
            ),
            ServerToolResult(
                call_id="srvtoolu_02",
                name="code_execution",
                kind="code_execution",
                is_error=True,
                text="Traceback ...",
                exit_code=1,
            ),
            TextContent(text="Sunny, 20C.", citations=[citation, doc_cite]),
            TextContent(text="No sources here."),
            FileContent(
                file_id="file_011", mime_type="image/png", name="plot.png", call_id="srvtoolu_02"
            ),
            ApprovalRequest(
                id="mcpr_1",
                name="create_issue",
                server="github",
                arguments={"title": "x"},
                raw={"type": "mcp_approval_request", "id": "mcpr_1"},
            ),
            VendorContent(api="anthropic-messages", data={"type": "future_block", "k": [1, 2]}),
            ToolCall(
                id="toolu_01",
                name="get_weather",
                arguments={"city": "Paris"},
                caller={"type": "code_execution_20250825", "tool_id": "srvtoolu_03"},
            ),
            ToolCall(
                id="call_9",
                name="shell",
                arguments={"command": ["ls"]},
                builtin="local_shell_call",
                raw={"type": "local_shell_call", "call_id": "call_9", "action": {"x": 1}},
            ),
        ],
        usage=Usage(
            input=10,
            output=20,
            server_tools={"web_search": 2, "code_execution_requests": 1},
            cost=Cost(input=0.1, output=0.2, server_tools=0.02, total=0.32),
        ),
        container={"id": "container_1", "expires_at": "2026-01-01T00:00:00Z"},
        stop_reason="tool_use",
        timestamp=2,
    )
    return [
        UserMessage(
            content=[
                TextContent(text="Read this."),
                FileContent(
                    data="JVBERi0=", mime_type="application/pdf", name="r.pdf", citations=True
                ),
                FileContent(url="https://a.test/f.pdf", mime_type="application/pdf"),
            ],
            timestamp=1,
        ),
        answer,
        ToolResultMessage(
            tool_call_id="toolu_01",
            tool_name="get_weather",
            content=[TextContent(text="ok"), FileContent(file_id="file_2")],
            timestamp=3,
        ),
        UserMessage(
            content=[
                ApprovalResponse(request_id="mcpr_1", approve=False, reason="not now"),
                VendorContent(api="openai-responses", data={"type": "item_reference", "id": "x"}),
            ],
            timestamp=4,
        ),
    ]


def _dumped(records: list[Any]) -> str:
    out = io.StringIO()
    dump_messages(records, out)
    return out.getvalue()


def test_every_new_block_round_trips_byte_for_byte() -> None:
    history = full_history()
    text = _dumped(history)
    loaded = load_messages(io.StringIO(text))
    assert loaded == history
    assert _dumped(loaded) == text
    # Typed on load, never kept as unknown blocks.
    for message in loaded:
        assert isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage))
        assert not isinstance(message.content, str)
        assert not any(isinstance(b, UnknownContent) for b in message.content)
    # The vendor payloads are the same JSON, key order included.
    line = json.loads(text.splitlines()[1])
    assert list(line["content"][3]["citations"][0]["raw"]) == [
        "type",
        "encrypted_index",
        "z",
        "a",
    ]
    assert line["content"][1]["raw"] == RAW_RESULT
    assert line["usage"]["server_tools"] == {"web_search": 2, "code_execution_requests": 1}
    assert line["usage"]["cost"]["server_tools"] == 0.02
    assert line["container"]["id"] == "container_1"
    # Fields left unset are not written: a plain text block stays as it was.
    assert line["content"][4] == {
        "type": "text",
        "text": "No sources here.",
        "text_signature": None,
    }


def test_a_streamed_server_call_is_written_as_the_same_call_reloaded() -> None:
    asm, message, _ = make()
    asm.start_block("s", ServerToolCall(id="s1", name="web_search", kind="web_search"))
    asm.block_input("s", '{"query"')
    asm.block_input("s", ': "x", "n": 1}')
    asm.end("s")
    asm.finalize()
    text = _dumped([message])
    assert "partial_json" not in text
    assert _dumped(load_messages(io.StringIO(text))) == text


OLD_LINES = (
    '{"role":"user","content":[{"type":"text","text":"hi","text_signature":null},'
    '{"type":"image","data":"aGk=","mime_type":"image/png"}],"timestamp":1}\n'
    '{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s",'
    '"redacted":false},{"type":"text","text":"x","text_signature":"sig"},{"type":"tool_call",'
    '"id":"c1","name":"f","arguments":{"a":1},"thought_signature":null,"truncated":false}],'
    '"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{"input":3,'
    '"output":4,"cache_read":0,"cache_write":0,"reasoning":0,"total_tokens":7,"cost":{"input":'
    '0.1,"output":0.2,"cache_read":0.0,"cache_write":0.0,"total":0.3}},"stop_reason":'
    '"tool_use","raw_stop_reason":null,"error":null,"response_id":null,"response_model":null,'
    '"request_id":null,"ttft_ms":null,"duration_ms":null,"timestamp":2}\n'
    '{"role":"tool_result","tool_call_id":"c1","tool_name":"f","content":[{"type":"text",'
    '"text":"ok","text_signature":null}],"is_error":false,"details":null,"timestamp":3}\n'
)
"""Lines as the version before issue 35 wrote them (generated with that version)."""


def test_a_history_written_before_the_new_fields_is_written_back_unchanged() -> None:
    loaded = load_messages(io.StringIO(OLD_LINES))
    assert _dumped(loaded) == OLD_LINES
    answer = loaded[1]
    assert isinstance(answer, AssistantMessage)
    assert answer.container is None and answer.usage.server_tools is None
    assert answer.content[1] == TextContent(text="x", text_signature="sig")
    assert answer.content[1].citations is None  # type: ignore[union-attr]


# --- the assembler --------------------------------------------------------------------------

STOPS: dict[str, Any] = {"end_turn": "stop", "tool_use": "tool_use", "max_tokens": "length"}
MODEL = Model(
    id="m",
    api="test-api",
    provider="anthropic",
    base_url="https://test.invalid",
    prices=ModelPrices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
)


def make() -> tuple[Assembler, AssistantMessage, deque[AssistantStreamEvent]]:
    message = AssistantMessage(api=MODEL.api, provider=MODEL.provider, model=MODEL.id)
    out: deque[AssistantStreamEvent] = deque()
    return Assembler(message, MODEL, STOPS, out), message, out


def whole(message: AssistantMessage, out: deque[AssistantStreamEvent]) -> list[Any]:
    return [MessageStart(message), *out, MessageEnd(message)]


def shape(out: deque[AssistantStreamEvent]) -> list[tuple[str, int]]:
    got: list[tuple[str, int]] = []
    for event in out:
        assert isinstance(event, MessageUpdate)
        got.append((event.delta.type, event.delta.content_index))
    return got


def test_a_web_search_turn_streams_in_order_on_the_live_message() -> None:
    asm, message, out = make()
    asm.start_block("s", ServerToolCall(id="srvtoolu_1", name="web_search", kind="web_search"))
    live = asm.block("s")
    assert isinstance(live, ServerToolCall)
    asm.block_input("s", '{"query": ')
    # Mid-stream the block in the message is the one being filled: no copy per delta.
    assert message.content[0] is live and live.partial_json == '{"query": '
    asm.block_input("s", '"paris"}')
    asm.end("s")
    asm.add_block(
        ServerToolResult(
            call_id="srvtoolu_1",
            name="web_search",
            kind="web_search",
            sources=[Source(url="https://a.test", title="A")],
        )
    )
    first = Citation(url="https://a.test", title="A", cited_text="sunny")
    asm.cite("t", first)  # the citation comes before its text
    asm.text("t", "It is ")
    asm.text("t", "sunny.")
    asm.end("t")
    later = Citation(url="https://b.test")
    assert asm.cite_at(2, later) is True
    assert asm.cite_at(0, later) is False  # no text block there
    assert asm.cite_at(99, later) is False
    asm.set_container({"id": "container_1"})
    asm.set_container("not an object")  # ignored
    asm.set_server_tools({"web_search": 1})
    asm.set_server_tools({"web_search": 2, "web_fetch": 0})
    asm.set_usage(input=100, output=10)
    asm.set_stop_reason("end_turn")
    asm.finalize()

    assert shape(out) == [
        ("block_start", 0),
        ("block_delta", 0),
        ("block_delta", 0),
        ("block_end", 0),
        ("block_start", 1),
        ("block_end", 1),
        ("text_start", 2),
        ("citation", 2),
        ("text_delta", 2),
        ("text_delta", 2),
        ("text_end", 2),
        ("citation", 2),
    ]
    events = whole(message, out)
    assert_valid_event_stream(events)
    assert all(e.message is message for e in events)
    deltas = [e.delta for e in out if isinstance(e, MessageUpdate)]
    starts = [d.kind for d in deltas if isinstance(d, BlockStart)]
    assert starts == ["server_tool_call", "server_tool_result"]
    assert [d.citation for d in deltas if isinstance(d, CitationAdded)] == [first, later]

    call, result, text = message.content
    assert isinstance(call, ServerToolCall) and call.input == {"query": "paris"}
    assert call.partial_json == ""
    assert isinstance(result, ServerToolResult) and result.sources[0].url == "https://a.test"
    assert isinstance(text, TextContent) and text.text == "It is sunny."
    assert text.citations == [first, later] and text.citations[0] is first
    assert message.container == {"id": "container_1"}
    assert message.usage.server_tools == {"web_search": 2}
    # A server call is no tool call for the harness: the message ends `stop`.
    assert message.stop_reason == "stop"
    # Priced per search (Anthropic publishes a price), part of the total.
    assert message.usage.cost is not None
    assert message.usage.cost.server_tools == pytest.approx(0.02)
    tokens = message.usage.cost.input + message.usage.cost.output
    assert message.usage.cost.total == pytest.approx(tokens + 0.02)
    # Written as the same message is after a reload (declared field order).
    assert _dumped(load_messages(io.StringIO(_dumped([message])))) == _dumped([message])


def test_server_tool_counts_set_to_zero_go_away() -> None:
    asm, message, _ = make()
    asm.set_server_tools({"web_search": 3, "code_execution": 1})
    asm.set_server_tools({"web_search": 0, "code_execution": -4})
    asm.finalize()
    assert message.usage.server_tools is None
    assert message.usage.cost is not None and message.usage.cost.server_tools == 0


def test_a_built_in_call_among_server_blocks_ends_tool_use() -> None:
    asm, message, out = make()
    asm.add_block(ServerToolCall(id="s", name="code_execution", input={"code": "1"}))
    asm.tool_call("c", '{"x": 1}', id="toolu_1", name="get")
    asm.end("c")
    message.content[1].caller = {"type": "code_execution_20250825", "tool_id": "s"}  # type: ignore[union-attr]
    asm.set_stop_reason("end_turn")
    asm.finalize()
    assert message.stop_reason == "tool_use"
    assert_valid_event_stream(whole(message, out))


@pytest.mark.parametrize(
    ("fragments", "expected"),
    [
        (['{"query": "paris wea'], {"query": "paris wea"}),
        (['{"query": "a", "n": [1, 2'], {"query": "a", "n": [1, 2]}),
        (['{"a": 1}'], {"a": 1}),
        (["[1, 2]"], [1, 2]),  # any JSON the vendor ran with is kept
        (['"just text"'], "just text"),
    ],
)
def test_a_cut_server_call_input_keeps_what_parses(fragments: list[str], expected: Any) -> None:
    asm, message, out = make()
    asm.start_block(0, ServerToolCall(id="s", name="web_search"))
    for f in fragments:
        asm.block_input(0, f)
    asm.finalize(stream_core.StreamError(kind="network", message="cut"))
    call = message.content[0]
    assert isinstance(call, ServerToolCall)
    assert call.input == expected and call.partial_json == ""
    assert message.stop_reason == "error"
    assert_valid_event_stream(whole(message, out))


@pytest.mark.parametrize("text", ["}{ not json", '{"q', "xyz", '{"a": tru'])
def test_an_unreadable_server_call_input_ends_storable(text: str) -> None:
    asm, message, out = make()
    asm.start_block(0, ServerToolCall(id="s", name="web_search"))
    asm.block_input(0, text)
    asm.end(0)
    asm.finalize()
    call = message.content[0]
    assert isinstance(call, ServerToolCall)
    # Nothing of it parses: the call holds storable JSON (the vendor ran it; nothing here
    # executes it) and the message is written and reloaded unchanged.
    assert call.partial_json == ""
    assert _dumped(load_messages(io.StringIO(_dumped([message])))) == _dumped([message])
    assert_valid_event_stream(whole(message, out))


def test_start_block_takes_only_block_kinds_and_input_only_for_an_open_call() -> None:
    asm, _, _ = make()
    with pytest.raises(TypeError, match="start_block"):
        asm.start_block(0, TextContent(text="x"))
    with pytest.raises(TypeError, match="start_block"):
        asm.start_block(0, ToolCall(id="c", name="f"))
    asm.add_block(FileContent(file_id="f"))
    with pytest.raises(stream_core.provider.ProtocolError):
        asm.block_input("nothing open", "{")
    asm.start_block(1, ServerToolResult(call_id="s"))
    with pytest.raises(stream_core.provider.ProtocolError):
        asm.block_input(1, "{")  # a result takes no streamed input


def test_an_open_block_is_ended_when_its_key_starts_another() -> None:
    asm, message, out = make()
    asm.start_block("k", ServerToolCall(id="a", name="web_search"))
    asm.block_input("k", '{"q": 1}')
    asm.start_block("k", ServerToolResult(call_id="a"))
    asm.end("k")
    asm.finalize()
    assert_valid_event_stream(whole(message, out))
    assert isinstance(message.content[0], ServerToolCall)
    assert message.content[0].input == {"q": 1}


# --- untrusted values through a provider ------------------------------------------------------

SCRIPT = "modern-core-script"
SCRIPT_MODEL = Model(
    id="script-1", api=SCRIPT, provider="anthropic", base_url="https://script.test"
)


def _script_translator(asm: stream_core.provider.Assembler) -> stream_core.provider.Translator:
    """Each line is one assembler call with the vendor's values passed straight through,
    so the assembler's own net is what is tested."""
    P = stream_core.provider

    def translate(event: str, data: str) -> None:
        line = P.as_object(P.parse_json(data, event), "line")
        op = P.required_field(line, "op", str, "line")
        key: Hashable = json.dumps(line.get("key"))
        if op == "start":
            block = P.required_field(line, "block", dict, "line")
            asm.start_block(key, BLOCK_KINDS[block["type"]].cls.model_validate(block))
        elif op == "input":
            asm.block_input(key, line["fragment"])
        elif op == "end":
            asm.end(key)
        elif op == "text":
            asm.text(key, line["text"])
        elif op == "cite":
            asm.cite(key, Citation.model_validate(line["citation"]))
        elif op == "tools":
            asm.set_server_tools(line["counts"])
        elif op == "stop":
            asm.set_stop_reason(line["reason"])
            asm.finished = True

    return translate


SCRIPT_WIRE = stream_core.provider.WireAPI(
    api=SCRIPT,
    terminal_event="a stop line",
    stop_reasons=STOPS,
    build_request=lambda model, context, opts: stream_core.provider.WireRequest(
        url=model.base_url + "/run", payload={"model": model.id}
    ),
    auth_headers=lambda model, key: {},
    translator=_script_translator,
    api_key_env=lambda model: None,
    key_required=lambda model: False,
    decoder=stream_core.provider.NDJSONBytesDecoder,
)


@pytest.fixture
def script() -> Iterator[Model]:
    stream_core.provider.register_provider(
        SCRIPT, SCRIPT_WIRE.open, source="modern-core", wire=SCRIPT_WIRE
    )
    yield SCRIPT_MODEL
    stream_core.provider.unregister_providers("modern-core")


def _run(model: Model, lines: list[dict[str, Any]]) -> list[AssistantStreamEvent]:
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    async def main() -> list[AssistantStreamEvent]:
        with respx.mock(assert_all_mocked=True) as router:
            router.post("https://script.test/run").mock(
                return_value=httpx.Response(
                    200, headers={"content-type": "application/x-ndjson"}, content=body
                )
            )
            events: list[AssistantStreamEvent] = []
            s = stream_core.stream(
                model, Context(messages=[UserMessage(content="hi")]), StreamOptions(max_retries=0)
            )
            async for event in s:
                events.append(event)
            return events

    return anyio.run(main)


SEARCH = {"type": "server_tool_call", "id": "s1", "name": "web_search", "kind": "web_search"}
GOOD: list[dict[str, Any]] = [
    {"op": "start", "key": 0, "block": SEARCH},
    {"op": "input", "key": 0, "fragment": '{"query": "x"}'},
    {"op": "end", "key": 0},
    {"op": "cite", "key": 1, "citation": {"url": "https://a.test", "title": "A"}},
    {"op": "text", "key": 1, "text": "Found it."},
    {"op": "end", "key": 1},
    {"op": "tools", "counts": {"web_search": 1}},
    {"op": "stop", "reason": "end_turn"},
]


def test_a_scripted_provider_streams_the_new_blocks_end_to_end(script: Model) -> None:
    events = _run(script, GOOD)
    assert_valid_event_stream(events)
    message = events[-1].message
    assert message.stop_reason == "stop", message.error
    assert isinstance(message.content[0], ServerToolCall)
    assert message.content[0].input == {"query": "x"}
    assert message.citations()[0].url == "https://a.test"
    assert message.usage.server_tools == {"web_search": 1}


@pytest.mark.parametrize(
    "bad",
    [
        {"op": "input", "key": 0, "fragment": 5},
        {"op": "input", "key": 0, "fragment": ["{"]},
        {"op": "input", "key": 0, "fragment": {"a": 1}},
        {"op": "input", "key": 7, "fragment": "{"},  # no call open under that key
        {"op": "tools", "counts": {"web_search": 10**1001}},
        {"op": "tools", "counts": {"web_search": "3"}},
        {"op": "tools", "counts": {"web_search": 1.5}},
        {"op": "tools", "counts": {"web_search": True}},
        {"op": "tools", "counts": {"web_search": None}},
    ],
    ids=[
        "fragment-int",
        "fragment-list",
        "fragment-object",
        "fragment-no-call",
        "count-huge",
        "count-str",
        "count-float",
        "count-bool",
        "count-null",
    ],
)
def test_an_untrusted_value_ends_the_stream_protocol_with_one_end(
    script: Model, bad: dict[str, Any]
) -> None:
    lines = [GOOD[0], bad, *GOOD[1:]]
    events = _run(script, lines)
    assert_valid_event_stream(events)
    assert sum(isinstance(e, MessageEnd) for e in events) == 1
    message = events[-1].message
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "protocol", message.error
    # What arrived before is kept, and the open call is closed.
    assert isinstance(message.content[0], ServerToolCall)


def test_every_portable_kind_is_a_known_server_tool_kind() -> None:
    # The kinds `ServerToolCall.kind` and `ServerTool.kind` share.
    for kind in SERVER_TOOL_KINDS:
        assert stream_core.ServerTool(kind=kind).kind == kind
    with pytest.raises(ValueError, match="no server tool kind"):
        stream_core.ServerTool(kind="web_serch")
