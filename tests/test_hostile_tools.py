"""Tool checks and the tool-running helper against hostile schemas, arguments and handlers
(issue 23, points 3, 4 and 5, and the Low items on tools).

- A `$ref` resolves only inside the schema: no HTTP request, no file read, no hang.
- A check of a huge or pathological argument ends soon with a short answer, off the loop.
- `execute_tool_calls` returns exactly one result per call, in call order, whatever the
  handlers raise; the caller's own cancellation still ends it at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from loop_watch import with_heartbeat

from stream_core import (
    AssistantMessage,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    check_tool_call,
    execute_tool_calls,
    execute_tool_calls_sync,
)

pytestmark = pytest.mark.anyio
GUARD = 20.0  # seconds: a guard against a hang, not a timing assertion


def _message(*calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(
        api="a", provider="p", model="m", stop_reason="tool_use", content=list(calls)
    )


def _text(result: ToolResultMessage | None) -> str:
    assert result is not None
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback HTTP server that records every connection and never answers."""
    seen: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(0.5)
            try:
                seen.append(conn.recv(4096))
            except OSError:
                seen.append(b"")
            # Never answer: a client that waits for this hangs.

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen
    finally:
        stop.set()
        thread.join(2)
        listener.close()


# --- point 3: references stay inside the schema -------------------------------------------


async def test_a_remote_ref_is_a_clear_error_with_no_request(
    counting_server: tuple[str, list[bytes]],
) -> None:
    url, seen = counting_server
    tool = Tool(name="t", parameters={"type": "object", "properties": {"a": {"$ref": url}}})
    call = ToolCall(id="c1", name="t", arguments={"a": 5})
    with anyio.fail_after(GUARD):
        result = check_tool_call(call, [tool])
        results = await execute_tool_calls(_message(call), {"t": lambda c: "ran"}, tools=[tool])
    assert result is not None and result.is_error
    assert "outside itself" in _text(result)
    assert [r.is_error for r in results] == [True] and _text(results[0]) == _text(result)
    time.sleep(0.2)  # a connection attempt, had there been one, would be seen by now
    assert seen == []


async def test_a_file_ref_reads_nothing_from_disk(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"enum": ["DB_PASSWORD=hunter2-do-not-leak"]}')
    tool = Tool(name="t", parameters={"$ref": secret.as_uri()})
    result = check_tool_call(ToolCall(id="c1", name="t", arguments={"x": 5}), [tool])
    assert result is not None and result.is_error
    assert "hunter2" not in result.model_dump_json()
    assert "outside itself" in _text(result)


async def test_a_ref_inside_the_schema_still_resolves() -> None:
    node = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "kids": {"items": {"$ref": "#/$defs/n"}}},
    }
    tool = Tool(name="t", parameters={"$defs": {"n": node}, "$ref": "#/$defs/n"})
    good = ToolCall(id="c1", name="t", arguments={"name": "a", "kids": [{"name": "b"}]})
    bad = ToolCall(id="c2", name="t", arguments={"name": "a", "kids": [{"name": 3}]})
    assert check_tool_call(good, [tool]) is None
    assert "arguments.kids[0].name: 3 is not of type 'string'" in _text(
        check_tool_call(bad, [tool])
    )


@pytest.mark.parametrize("parallel", [True, False])
async def test_a_ref_typo_is_an_error_result_not_a_raise(parallel: bool) -> None:
    tool = Tool(name="t", parameters={"$ref": "#/$defs/missing"})
    calls = [ToolCall(id=f"c{i}", name="t", arguments={}) for i in range(3)]
    results = await execute_tool_calls(
        _message(*calls), {"t": lambda c: "ran"}, tools=[tool], parallel=parallel
    )
    assert [r.tool_call_id for r in results] == ["c0", "c1", "c2"]
    assert all(r.is_error and "points nowhere" in _text(r) for r in results)


# --- point 4: bounded checks, off the loop ------------------------------------------------

ITEMS_INT = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
}


async def test_a_large_wrong_argument_gives_a_short_answer() -> None:
    tool = Tool(name="t", parameters=ITEMS_INT)
    call = ToolCall(id="c1", name="t", arguments={"items": ["x" * 8] * 100_000})  # ~1.2 MB
    with anyio.fail_after(GUARD):
        text = _text(check_tool_call(call, [tool]))
    assert len(text) < 5_000
    assert "arguments.items[0]: 'xxxxxxxx' is not of type 'integer'" in text
    assert "and more" in text


async def test_an_argument_over_the_size_limit_is_refused_unread() -> None:
    tool = Tool(name="t", parameters=ITEMS_INT)
    call = ToolCall(id="c1", name="t", arguments={"items": ["y" * 1000] * 5_000})  # ~5 MB
    with anyio.fail_after(GUARD):
        text = _text(check_tool_call(call, [tool]))
    assert "over the 2,097,152" in text and len(text) < 1_000


async def test_a_backtracking_pattern_is_not_run_on_a_long_string() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    tool = Tool(name="t", parameters=schema)
    # 60 characters: about 2**60 steps for Python's regex engine; refused instead.
    long = ToolCall(id="c1", name="t", arguments={"s": "a" * 59 + "!"})
    with anyio.fail_after(GUARD):
        text = _text(check_tool_call(long, [tool]))
    assert "nested repetition" in text
    assert check_tool_call(ToolCall(id="c2", name="t", arguments={"s": "aaaa"}), [tool]) is None
    short_bad = check_tool_call(ToolCall(id="c3", name="t", arguments={"s": "aa!"}), [tool])
    assert "does not match" in _text(short_bad)


async def test_a_safe_pattern_checks_long_strings() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}}}
    tool = Tool(name="t", parameters=schema)
    assert (
        check_tool_call(ToolCall(id="c", name="t", arguments={"s": "a" * 100_000}), [tool]) is None
    )


async def test_checks_inside_execute_tool_calls_run_off_the_event_loop() -> None:
    tool = Tool(name="t", parameters=ITEMS_INT)
    calls = [
        ToolCall(id=f"c{i}", name="t", arguments={"items": list(range(100_000))}) for i in range(3)
    ]
    work = execute_tool_calls(_message(*calls), {"t": lambda c: "ok"}, tools=[tool], parallel=False)
    results, gaps = await with_heartbeat(work, guard=GUARD * 3)
    assert [_text(r) for r in results] == ["ok", "ok", "ok"]
    # Each check of ~1 MB takes hundreds of milliseconds of CPU; on the loop, the heartbeat
    # would stall that long every time. Off the loop it keeps ticking (the GIL is shared,
    # so not perfectly: the bound is loose on purpose).
    assert len(gaps) > 10
    assert max(gaps) < 2.0


# --- point 5: one result per call, in order -----------------------------------------------


async def _raises_cancelled(call: ToolCall) -> str:
    raise asyncio.CancelledError() if _on_asyncio() else RuntimeError("no")


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


async def _ok(call: ToolCall) -> str:
    await anyio.sleep(0.01)
    return f"ok {call.id}"


def _boom(call: ToolCall) -> str:
    raise ValueError("broken handler")


@pytest.mark.parametrize("parallel", [True, False])
async def test_handlers_that_raise_still_give_one_result_per_call_in_order(
    parallel: bool,
) -> None:
    calls = [
        ToolCall(id="a", name="cancel", arguments={}),
        ToolCall(id="b", name="ok", arguments={}),
        ToolCall(id="c", name="boom", arguments={}),
        ToolCall(id="d", name="ok", arguments={}),
    ]
    handlers: dict[str, Any] = {"cancel": _raises_cancelled, "ok": _ok, "boom": _boom}
    with anyio.fail_after(GUARD):
        results = await execute_tool_calls(_message(*calls), handlers, parallel=parallel)
    assert [r.tool_call_id for r in results] == ["a", "b", "c", "d"]
    assert [r.is_error for r in results] == [True, False, True, False]
    assert "ValueError: broken handler" in _text(results[2])
    assert _text(results[1]) == "ok b"


async def test_the_callers_cancellation_still_ends_the_run() -> None:
    async def forever(call: ToolCall) -> str:
        await anyio.sleep(60)
        return "never"

    calls = [ToolCall(id=f"c{i}", name="f", arguments={}) for i in range(3)]
    with anyio.move_on_after(0.2) as scope:
        await execute_tool_calls(_message(*calls), {"f": forever})
    assert scope.cancelled_caught


async def test_a_sync_tool_does_not_outlive_the_callers_timeout() -> None:
    release = threading.Event()

    def blocking(call: ToolCall) -> str:
        release.wait(5)
        return "late"

    calls = [ToolCall(id="c", name="b", arguments={})]
    started = time.monotonic()
    with anyio.move_on_after(0.2) as scope:
        await execute_tool_calls(_message(*calls), {"b": blocking})
    waited = time.monotonic() - started
    release.set()
    assert scope.cancelled_caught
    assert waited < 4  # before: the full 5 s wait for the thread


async def test_execute_tool_calls_sync_works_inside_a_running_loop() -> None:
    calls = [
        ToolCall(id="c1", name="ok", arguments={}),
        ToolCall(id="c2", name="boom", arguments={}),
    ]
    results = execute_tool_calls_sync(_message(*calls), {"ok": _ok, "boom": _boom})
    assert [r.tool_call_id for r in results] == ["c1", "c2"]
    assert [r.is_error for r in results] == [False, True]
