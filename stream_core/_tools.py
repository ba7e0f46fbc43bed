"""Tool-call bookkeeping: answer untrusted calls, audit and repair call/result pairing.

Every vendor rejects a history where a tool call has no result, or a result answers no
call. Histories get that way through aborts, crashes between call and execution, or
edits; these helpers find the damage and make a sendable copy without touching the input.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio
import anyio.lowlevel

from ._server_tools import ServerTool, function_tools_of
from ._tool_checks import schema_problems
from ._types import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
)

__all__ = [
    "TOOL_ERROR_PREFIX",
    "ToolHandler",
    "execute_tool_calls",
    "execute_tool_calls_sync",
    "check_tool_call",
    "check_tool_calls",
    "function_tools",
    "FAILED_TRUNCATED_TEXT",
    "MISSING_RESULT_TEXT",
    "RepairedHistory",
    "ToolPairAudit",
    "audit_tool_pairs",
    "fail_truncated_tool_calls",
    "repair_tool_pairs",
]

FAILED_TRUNCATED_TEXT = (
    "Your call to tool `{name}` was cut off by the output limit (or had invalid JSON "
    "arguments) and was NOT executed. Re-issue the call with complete arguments; if the "
    "arguments are large, split the work into several smaller calls."
)
"""Template (`str.format` with `name`) of the error result for an untrusted call."""

MISSING_RESULT_TEXT = "No result was recorded for this call."

INVALID_ARGUMENTS_TEXT = (
    "Your call to tool `{name}` has arguments that do not match its schema and was NOT "
    "executed:\n{problems}\nCall it again with arguments that match."
)
UNKNOWN_TOOL_TEXT = "There is no tool named `{name}`, so the call was NOT executed. Tools: {tools}."

TOOL_ERROR_PREFIX = "Error: the tool failed.\n"
"""Starts the text of an `is_error` result on wire formats with no error flag (OpenAI-style
`tool` messages, Responses outputs, Mistral, Ollama): the model still reads that it failed."""


def fail_truncated_tool_calls(message: AssistantMessage) -> list[ToolResultMessage]:
    """Error results for the calls of `message` that must not be executed, in content order.

    When the output limit stopped the message every call is suspect (a cut can land
    between two calls and leave the first looking whole), so all are failed; otherwise only
    the calls flagged `truncated`. The model reads the text and retries.
    """
    cut_by_limit = message.stop_reason == "length"
    return [
        _truncated_result(call) for call in message.tool_calls() if cut_by_limit or call.truncated
    ]


def check_tool_call(call: ToolCall, tools: Sequence[Tool | ServerTool]) -> ToolResultMessage | None:
    """None when `call` may run; else a ready `is_error` result to send back instead.

    A call is refused when it is truncated (cut by the output limit or unparseable: the
    text of `fail_truncated_tool_calls`), names no tool of `tools`, or has arguments its
    tool's `parameters` schema rejects (the validator's words, one line per problem, so the
    model can fix the call). Needs the `validate` extra (jsonschema). `tools` may be
    `Context.tools` as it is (server tools are left aside); a vendor built-in call
    (`ToolCall.builtin`: a shell call, a patch) needs no function tool of its name.
    """
    if call.truncated:
        return _truncated_result(call)
    tools = function_tools_of(tools)
    tool = next((t for t in tools if t.name == call.name), None)
    if tool is None and call.builtin is not None:
        return None  # the vendor's own item: its shape is the vendor's, not a schema's
    if tool is None:
        names = ", ".join(f"`{t.name}`" for t in tools) or "none"
        return _error_result(call, UNKNOWN_TOOL_TEXT.format(name=call.name, tools=names))
    problems = schema_problems(call.arguments, tool.parameters)
    if not problems:
        return None
    listed = "\n".join(f"- {p}" for p in problems)
    return _error_result(call, INVALID_ARGUMENTS_TEXT.format(name=call.name, problems=listed))


def check_tool_calls(
    message: AssistantMessage, tools: Sequence[Tool | ServerTool]
) -> list[ToolResultMessage]:
    """`check_tool_call` for every call of `message`, in call order: the error results of
    the calls that must not run. With a `length` stop every call is refused (see
    `fail_truncated_tool_calls`)."""
    cut_by_limit = message.stop_reason == "length"
    refused = (_refusal(call, tools, cut_by_limit) for call in message.tool_calls())
    return [result for result in refused if result is not None]


ToolOutput: TypeAlias = "str | list[TextContent | ImageContent] | ToolResultMessage"
ToolHandler: TypeAlias = Callable[[ToolCall], "ToolOutput | Awaitable[ToolOutput]"]
"""Runs one call: given the `ToolCall` (its `arguments` parsed), returns the result's text,
its content blocks, or a whole `ToolResultMessage`; sync or async; raising makes an
`is_error` result with the exception's text."""

TOOL_RAISED_TEXT = "The tool `{name}` failed: {error}"
NO_RESULT_TEXT = "The call to tool `{name}` produced no result and was NOT completed."
NO_HANDLER_TEXT = "There is no handler for tool `{name}`, so the call was NOT executed."


async def execute_tool_calls(
    message: AssistantMessage,
    handlers: Mapping[str, ToolHandler],
    *,
    tools: Sequence[Tool | ServerTool] | None = None,
    parallel: bool = True,
) -> list[ToolResultMessage]:
    """Run the tool calls of `message` and return exactly one result per call, in call
    order, so the pairing every vendor requires cannot be broken by the loop around it.

    A call is not run, and gets an `is_error` result instead, when it is truncated (or the
    message stopped at the output limit), when no handler has its name, or, with `tools`
    given, when its arguments do not match its tool's schema (`check_tool_call`, run in a
    worker thread; needs the `validate` extra). A handler that raises an `Exception`, or a
    `CancelledError` of its own while nobody cancelled the caller, gives an `is_error`
    result with the exception's type and text. Sync handlers run in worker threads, so a
    slow one never blocks the event loop; `parallel=False` runs the calls one after another
    in call order.

    The only raises: the caller's own cancellation (its cancel scope or timeout) propagates
    at once; a sync handler's thread cannot be stopped and finishes in the background, its
    result dropped. `KeyboardInterrupt` and `SystemExit` from a handler propagate.
    """
    calls = message.tool_calls()
    results: list[ToolResultMessage | None] = [None] * len(calls)
    cut_by_limit = message.stop_reason == "length"

    async def run(i: int, call: ToolCall) -> None:
        results[i] = await _run_one(call, handlers, tools, cut_by_limit)

    if parallel and len(calls) > 1:
        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                tg.start_soon(run, i, call)
    else:
        for i, call in enumerate(calls):
            await run(i, call)
    return [
        r if r is not None else _error_result(call, NO_RESULT_TEXT.format(name=call.name))
        for call, r in zip(calls, results, strict=True)
    ]


def execute_tool_calls_sync(
    message: AssistantMessage,
    handlers: Mapping[str, ToolHandler],
    *,
    tools: Sequence[Tool | ServerTool] | None = None,
    parallel: bool = True,
) -> list[ToolResultMessage]:
    """`execute_tool_calls` without an event loop of yours (async handlers run on a loop of
    their own for the call; sync ones in worker threads). Called from inside a running
    event loop (a sync function of an async program), it runs on a thread of its own and
    blocks that loop until the calls are done."""

    async def main() -> list[ToolResultMessage]:
        return await execute_tool_calls(message, handlers, tools=tools, parallel=parallel)

    if not _in_event_loop():
        return anyio.run(main)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="stream-core-tools") as pool:
        return pool.submit(anyio.run, main).result()


async def _run_one(
    call: ToolCall,
    handlers: Mapping[str, ToolHandler],
    tools: Sequence[Tool | ServerTool] | None,
    cut_by_limit: bool,
) -> ToolResultMessage:
    if cut_by_limit or call.truncated:
        return _truncated_result(call)
    if tools is not None:
        # The check is CPU work bounded in time and size (`_tool_checks`): off the loop.
        refused = await anyio.to_thread.run_sync(check_tool_call, call, tools)
        if refused is not None:
            return refused
    handler = handlers.get(call.name)
    if handler is None:
        return _error_result(call, NO_HANDLER_TEXT.format(name=call.name))
    cancelled = anyio.get_cancelled_exc_class()
    try:
        if inspect.iscoroutinefunction(handler):
            output = await handler(call)
        else:
            # Abandoned on cancel: the caller's scope or timeout ends the wait at once.
            output = await anyio.to_thread.run_sync(handler, call, abandon_on_cancel=True)
            if inspect.isawaitable(output):
                output = await output
    except cancelled as exc:
        if _caller_cancelled():
            raise
        try:
            await anyio.lowlevel.checkpoint()  # a cancelled scope raises here again
        except cancelled:
            raise exc from None
        return _error_result(call, TOOL_RAISED_TEXT.format(name=call.name, error=_describe(exc)))
    except Exception as exc:
        return _error_result(call, TOOL_RAISED_TEXT.format(name=call.name, error=_describe(exc)))
    return _as_result(call, output)


def _caller_cancelled() -> bool:
    """asyncio's own `Task.cancel()` (outside any anyio scope) leaves a count on the task."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # trio: its cancellation is always a scope's
        return False
    return task is not None and task.cancelling() > 0


def _in_event_loop() -> bool:
    """True inside a running asyncio loop or trio run (where `anyio.run` cannot start)."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio: Any = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
        return True
    except RuntimeError:
        return False


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _refusal(
    call: ToolCall, tools: Sequence[Tool | ServerTool] | None, cut_by_limit: bool
) -> ToolResultMessage | None:
    """The error result of a call that must not run (a length stop fails every call), or
    None; without `tools` only truncation is checked."""
    if cut_by_limit or call.truncated:
        return _truncated_result(call)
    return None if tools is None else check_tool_call(call, tools)


def _truncated_result(call: ToolCall) -> ToolResultMessage:
    return _error_result(call, FAILED_TRUNCATED_TEXT.format(name=call.name))


def _error_result(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)], is_error=True
    )


def _as_result(call: ToolCall, output: Any) -> ToolResultMessage:
    if isinstance(output, ToolResultMessage):
        result: ToolResultMessage = output
        if result.tool_call_id != call.id:
            # Pairing is by id: a result built for another call would orphan this one.
            result = result.model_copy(update={"tool_call_id": call.id, "tool_name": call.name})
        return result
    if isinstance(output, str):
        content: list[Any] = [TextContent(text=output)]
    elif isinstance(output, list) and all(
        isinstance(b, (TextContent, ImageContent)) for b in output
    ):
        content = list(output)
    else:
        return _error_result(
            call,
            f"The tool `{call.name}` returned a {type(output).__name__}, not text, content "
            "blocks or a ToolResultMessage.",
        )
    return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=content)


@dataclass(frozen=True)
class ToolPairAudit:
    """What is wrong with the call/result pairing of a history (indices into it), from
    `audit_tool_pairs`: `unpaired_calls` (calls no result answers), `orphan_results`
    (results answering no call), `name_mismatches` (a result naming another tool than its
    call), and `ok` (none of the three)."""

    unpaired_calls: list[tuple[int, ToolCall]]
    """(index of the assistant message, the call) for calls no later result answers."""
    orphan_results: list[tuple[int, ToolResultMessage]]
    """Results answering no earlier unanswered call (unknown id, or a duplicate answer)."""
    name_mismatches: list[tuple[int, ToolResultMessage, ToolCall]]
    """Results paired by id with a call of another name (kept, but worth knowing)."""

    @property
    def ok(self) -> bool:
        return not (self.unpaired_calls or self.orphan_results or self.name_mismatches)


def audit_tool_pairs(messages: Sequence[Message]) -> ToolPairAudit:
    """Pair every tool result with an earlier unanswered call of the same id.

    The most recent unanswered call with that id wins (ids are normally unique, but a
    history spliced from several sessions may reuse one), so each call takes one result.
    Records of a registered role (`CustomMessage`) are passed over: they are neither calls
    nor results (a conversion holding calls is paired when it is sent).
    """
    # id -> unanswered calls with that id, oldest first; also the call's position so the
    # unpaired list comes back in history order.
    pending: dict[str, list[tuple[int, int, ToolCall]]] = {}
    orphans: list[tuple[int, ToolResultMessage]] = []
    mismatches: list[tuple[int, ToolResultMessage, ToolCall]] = []
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for position, call in enumerate(message.tool_calls()):
                pending.setdefault(call.id, []).append((index, position, call))
        elif isinstance(message, ToolResultMessage):
            waiting = pending.get(message.tool_call_id)
            if not waiting:
                orphans.append((index, message))
                continue
            _, _, call = waiting.pop()
            if call.name != message.tool_name:
                mismatches.append((index, message, call))
    unpaired = sorted(
        (entry for entries in pending.values() for entry in entries),
        key=lambda entry: (entry[0], entry[1]),
    )
    return ToolPairAudit(
        unpaired_calls=[(index, call) for index, _, call in unpaired],
        orphan_results=orphans,
        name_mismatches=mismatches,
    )


@dataclass(frozen=True)
class RepairedHistory:
    """What `repair_tool_pairs` returns: the repaired copy of the history and the audit of
    the input that says what was wrong."""

    messages: list[Message]
    """A sendable copy: every call answered, no orphan results."""
    report: ToolPairAudit
    """The audit of the input history."""


def repair_tool_pairs(messages: Sequence[Message]) -> RepairedHistory:
    """A copy of `messages` where every call has a result and every result has a call.

    Unanswered calls get an error result placed after the results that follow their
    assistant message; orphan results are dropped. Records of a registered role are kept
    where they are. The input is never mutated.
    """
    report = audit_tool_pairs(messages)
    if not (report.unpaired_calls or report.orphan_results):
        # Name mismatches alone need no change: those results are paired by id.
        return RepairedHistory(messages=list(messages), report=report)

    dropped = {index for index, _ in report.orphan_results}
    # Insertion point: the first index past the run of tool results after the assistant.
    inserts: dict[int, list[ToolResultMessage]] = {}
    for index, call in report.unpaired_calls:
        assistant = messages[index]
        assert isinstance(assistant, AssistantMessage)  # the audit found a call there
        at = index + 1
        while at < len(messages) and isinstance(messages[at], ToolResultMessage):
            at += 1
        inserts.setdefault(at, []).append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=MISSING_RESULT_TEXT)],
                is_error=True,
                # The assistant's time, not now: the same history repairs to the same copy.
                timestamp=assistant.timestamp,
            )
        )

    repaired: list[Message] = []
    for index in range(len(messages) + 1):
        repaired.extend(inserts.get(index, ()))
        if index < len(messages) and index not in dropped:
            repaired.append(messages[index])
    return RepairedHistory(messages=repaired, report=report)


def function_tools(tools: Sequence[Tool | ServerTool] | None) -> list[dict[str, Any]]:
    """Tool definitions in the `{"type": "function", "function": {...}}` shape that OpenAI's
    Chat Completions set and Mistral, Ollama and the compatible servers share (the function
    tools of `tools`; server tools are each API's own table)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in function_tools_of(tools)
    ]
