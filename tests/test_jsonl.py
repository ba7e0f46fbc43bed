from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from stream_core._history.jsonl import (
    HistoryFormatError,
    Record,
    dump_messages,
    load_messages,
    messages_only,
)
from stream_core._types import (
    KEEP_UNKNOWN_BLOCKS,
    AssistantMessage,
    Cost,
    ImageContent,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserMessage,
)

UNKNOWN: dict[str, Any] = {
    # A role nobody registered (compaction_summary is a registered one now: see
    # tests/test_custom_roles.py for this same record under it).
    "role": "session_digest",
    "summary": "Résumé: 用户要求读取文件 ✅",
    "nested": {"z": [1, 2.5, None, True, {"deep": ["ä", {"k": -0.0}]}], "a": {}},
    "id": 12345678901234567890,
}


def mixed_history() -> list[Record]:
    return [
        UserMessage(content="Hello, 世界!", timestamp=1),
        UserMessage(
            content=[
                TextContent(text="What is in this image?\nLine two\u2028still line two"),
                ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            ],
            timestamp=2,
        ),
        AssistantMessage(
            api="anthropic-messages",
            provider="anthropic",
            model="claude-x",
            content=[
                ThinkingContent(thinking="Let me look…", signature="EqQBCkYIAxgCIkA="),
                ThinkingContent(signature="ENCRYPTED", redacted=True),
                TextContent(text="I'll read it.", text_signature="msg_1"),
                ToolCall(id="toolu_1", name="read", arguments={"path": "/tmp/ä.txt", "n": 3}),
            ],
            usage=Usage(
                input=120,
                output=45,
                cache_read=1000,
                cache_write=10,
                reasoning=20,
                total_tokens=1175,
                cost=Cost(input=0.00036, output=0.000675, cache_read=0.0003, total=0.001335),
            ),
            stop_reason="error",
            raw_stop_reason="overloaded_error",
            error=StreamError(kind="overloaded", message="try later", retryable=True),
            response_id="msg_01",
            timestamp=3,
        ),
        UNKNOWN,
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="read",
            content=[TextContent(text="file contents")],
            is_error=False,
            details={"bytes": 13, "lines": [1, 2], "ok": True},
            timestamp=4,
        ),
    ]


def test_round_trip_reproduces_models_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    history = mixed_history()
    dump_messages(history, path)
    loaded = load_messages(path)
    assert loaded == history
    again = tmp_path / "again.jsonl"
    dump_messages(loaded, again)
    assert again.read_bytes() == path.read_bytes()


def test_file_is_one_compact_utf8_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    dump_messages(mixed_history(), path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 6  # five records, trailing newline
    assert "世界".encode() in raw  # non-ASCII kept readable, not \u-escaped
    assert b'{"role":"user","content":"Hello' in lines[0]  # compact separators
    for line in lines[:-1]:
        assert isinstance(json.loads(line), dict)


def test_unknown_role_is_kept_and_written_back_unchanged() -> None:
    line = json.dumps(UNKNOWN, separators=(",", ":"), ensure_ascii=False)
    no_role = '{"kind":"bookmark","at":3}'
    loaded = load_messages(io.StringIO(line + "\n" + no_role + "\n"))
    assert loaded == [UNKNOWN, {"kind": "bookmark", "at": 3}]
    assert list(loaded[0]) == list(UNKNOWN)  # key order preserved
    out = io.StringIO()
    dump_messages(loaded, out)
    assert out.getvalue() == line + "\n" + no_role + "\n"


def test_unknown_fields_on_known_messages_survive() -> None:
    line = (
        '{"role":"assistant","content":[{"type":"text","text":"hi","text_signature":null,'
        '"citations":[{"url":"https://x.test","title":"Ünï"}]}],"api":"a","provider":"p",'
        '"model":"m","usage":{"input":0,"output":0,"cache_read":0,"cache_write":0,'
        '"reasoning":0,"total_tokens":0,"cost":null},"stop_reason":"stop",'
        '"raw_stop_reason":null,"error":null,"response_id":null,"response_model":null,'
        '"request_id":null,"ttft_ms":null,"duration_ms":null,"timestamp":5,'
        '"session":{"branch":"b1","tags":["x"]}}\n'
    )
    (message,) = load_messages(io.StringIO(line))
    assert isinstance(message, AssistantMessage)
    assert message.model_extra == {"session": {"branch": "b1", "tags": ["x"]}}
    out = io.StringIO()
    dump_messages([message], out)
    assert out.getvalue() == line


def test_streaming_partial_json_is_not_persisted() -> None:
    call = ToolCall(id="c", name="f", arguments={"a": 1}, partial_json='{"a": 1')
    message = AssistantMessage(api="a", provider="p", model="m", content=[call], timestamp=1)
    out = io.StringIO()
    dump_messages([message], out)
    assert "partial_json" not in out.getvalue()


def test_append_mode_appends(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    first, second = mixed_history()[:2], mixed_history()[2:]
    dump_messages(first, path)
    dump_messages(second, path, append=True)
    assert load_messages(path) == mixed_history()
    dump_messages(first, path)  # without append the file is replaced
    assert load_messages(path) == first


def test_append_creates_missing_file_and_repairs_missing_newline(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    dump_messages([UNKNOWN], path, append=True)
    assert load_messages(path) == [UNKNOWN]
    path.write_text('{"role":"note"}', encoding="utf-8")  # hand-edited: no final newline
    dump_messages([UNKNOWN], path, append=True)
    assert load_messages(path) == [{"role": "note"}, UNKNOWN]


def test_blank_lines_are_skipped() -> None:
    text = '\n{"role":"note","n":1}\n   \n\n{"role":"note","n":2}\n'
    assert load_messages(io.StringIO(text)) == [{"role": "note", "n": 1}, {"role": "note", "n": 2}]


def test_corrupt_line_error_names_line_number(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    dump_messages(mixed_history()[:2], path)
    with path.open("a", encoding="utf-8") as f:
        f.write('{"role":"user","content":"trunc\n')
    with pytest.raises(ValueError, match=r"^line 3: not valid JSON") as info:
        load_messages(path)
    assert isinstance(info.value, HistoryFormatError) and info.value.line == 3


def test_non_object_line_is_rejected_with_line_number() -> None:
    with pytest.raises(ValueError, match=r"^line 2: expected a JSON object"):
        load_messages(io.StringIO('{"role":"note"}\n[1,2]\n'))


def test_invalid_known_record_names_line_and_field() -> None:
    good = '{"role":"user","content":"hi"}\n'
    bad_args = (
        '{"role":"assistant","api":"a","provider":"p","model":"m",'
        '"content":[{"type":"tool_call","name":"f","arguments":[1]}]}\n'
    )
    with pytest.raises(ValueError, match=r"^line 2: invalid assistant message") as info:
        load_messages(io.StringIO(good + bad_args))
    assert "content.0.tool_call.arguments" in str(info.value)

    missing = '{"role":"tool_result","tool_name":"f"}\n'
    with pytest.raises(ValueError, match=r"^line 1: .*tool_call_id: Field required"):
        load_messages(io.StringIO(missing))


def test_messages_only_drops_unknown_records() -> None:
    history = mixed_history()
    only = messages_only(history)
    assert len(only) == len(history) - 1
    assert only == [r for r in history if r is not UNKNOWN]


def test_file_with_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"role":"user","content":"hi","timestamp":1}\n')
    assert load_messages(path) == [UserMessage(content="hi", timestamp=1)]


def test_lone_surrogate_text_is_still_saveable(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    message = UserMessage(content="bad \udcff byte, ok ü", timestamp=1)
    dump_messages([message], path)
    assert load_messages(path) == [message]
    again = tmp_path / "again.jsonl"
    dump_messages(load_messages(path), again)
    assert again.read_bytes() == path.read_bytes()


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), _json_values, max_size=5), st.text())
def test_any_unknown_record_round_trips_exactly(payload: dict[str, Any], role: str) -> None:
    record = {**payload, "role": f"x-{role}"}  # a generated "role" key must not win
    first = io.StringIO()
    dump_messages([record], first)
    loaded = load_messages(io.StringIO(first.getvalue()))
    assert loaded == [record]
    second = io.StringIO()
    dump_messages(loaded, second)
    assert second.getvalue() == first.getvalue()


# --- blocks of types we don't know ------------------------------------------------------------

SERVER_TOOL_USE: dict[str, Any] = {
    # Key order of a newer writer, `type` not first, nested data: all kept as is.
    "id": "srvtoolu_01",
    "type": "server_tool_use",
    "name": "web_search",
    "input": {"query": "météo Paris", "max": 3},
}
AUDIO: dict[str, Any] = {"type": "input_audio", "data": "UklGRg==", "format": "wav"}


def newer_history() -> str:
    """Lines as a newer version writes them: known roles holding blocks we don't know."""
    assistant = AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        content=[TextContent(text="Searching."), ToolCall(id="t1", name="read")],
        timestamp=5,
    ).model_dump(mode="json")
    assistant["content"].insert(1, SERVER_TOOL_USE)
    user = UserMessage(content=[TextContent(text="listen")], timestamp=6).model_dump(mode="json")
    user["content"].append(AUDIO)
    result = ToolResultMessage(tool_call_id="t1", tool_name="read", timestamp=7).model_dump(
        mode="json"
    )
    result["content"] = [AUDIO]
    records = (assistant, user, result)
    return "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records)


def test_a_block_of_an_unknown_type_loads_and_writes_back_unchanged() -> None:
    text = newer_history()

    loaded = load_messages(io.StringIO(text))

    assistant, user, result = loaded
    assert isinstance(assistant, AssistantMessage)
    block = assistant.content[1]
    assert isinstance(block, UnknownContent)
    assert block.type == "server_tool_use" and block.root == SERVER_TOOL_USE
    assert assistant.text() == "Searching." and [c.id for c in assistant.tool_calls()] == ["t1"]
    assert isinstance(user, UserMessage) and isinstance(user.content, list)
    assert isinstance(user.content[1], UnknownContent)
    assert isinstance(result, ToolResultMessage) and isinstance(result.content[0], UnknownContent)
    out = io.StringIO()
    dump_messages(loaded, out)
    assert out.getvalue() == text


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-completions"])
def test_a_block_of_an_unknown_type_is_never_sent(api: str) -> None:
    from stream_core import Context, Model, StreamOptions
    from stream_core.provider import get_provider

    history = messages_only(load_messages(io.StringIO(newer_history())))
    model = Model(id="m", api=api, provider="p", base_url="http://127.0.0.1:1", input=["text"])
    wire = get_provider(api).wire
    assert wire is not None

    payload = wire.build_request(model, Context(messages=history), StreamOptions()).payload

    sent = json.dumps(payload)
    assert "server_tool_use" not in sent and "input_audio" not in sent and "UklGRg" not in sent
    assert "Searching." in sent and "listen" in sent


@pytest.mark.parametrize("block", [{"type": "image_url", "image_url": {"url": "x"}}, {"txt": "a"}])
def test_outside_load_messages_an_unknown_block_type_is_an_error(block: dict[str, Any]) -> None:
    # A typo, or another library's format, must not silently vanish from a request.
    with pytest.raises(ValidationError, match=r"unknown content type 'image_url'|needs a string"):
        UserMessage.model_validate({"content": [block]})


def test_other_storage_can_keep_unknown_blocks_too() -> None:
    data = json.loads(newer_history().splitlines()[0])

    message = AssistantMessage.model_validate(data, context=KEEP_UNKNOWN_BLOCKS)

    assert message.model_dump(mode="json") == data


def test_the_first_dump_of_a_streamed_message_is_stable_across_reloads() -> None:
    from stream_core.contract_tests.kit import load_fixtures, replay, whole

    fixtures = [
        f for api in ("anthropic-messages", "openai-completions") for f in load_fixtures(api)
    ]
    assert len(fixtures) > 20
    for fixture in fixtures:
        message = replay(fixture, whole(fixture.body)).message
        first = io.StringIO()
        dump_messages([message], first)
        second = io.StringIO()
        dump_messages(load_messages(io.StringIO(first.getvalue())), second)

        assert second.getvalue() == first.getvalue(), fixture
