"""Tool-call bookkeeping: answer untrusted calls, audit and repair call/result pairing.

Every vendor rejects a history where a tool call has no result, or a result answers no
call. Histories get that way through aborts, crashes between call and execution, or
edits; these helpers find the damage and make a sendable copy without touching the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._types import AssistantMessage, Message, TextContent, Tool, ToolCall, ToolResultMessage

__all__ = [
    "TOOL_ERROR_PREFIX",
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
_MAX_PROBLEMS = 10

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
        ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=FAILED_TRUNCATED_TEXT.format(name=call.name))],
            is_error=True,
        )
        for call in message.tool_calls()
        if cut_by_limit or call.truncated
    ]


def check_tool_call(call: ToolCall, tools: Sequence[Tool]) -> ToolResultMessage | None:
    """None when `call` may run; else a ready `is_error` result to send back instead.

    A call is refused when it is truncated (cut by the output limit or unparseable: the
    text of `fail_truncated_tool_calls`), names no tool of `tools`, or has arguments its
    tool's `parameters` schema rejects (the validator's words, one line per problem, so the
    model can fix the call). Needs the `validate` extra (jsonschema).
    """
    if call.truncated:
        text = FAILED_TRUNCATED_TEXT.format(name=call.name)
    else:
        tool = next((t for t in tools if t.name == call.name), None)
        if tool is None:
            names = ", ".join(f"`{t.name}`" for t in tools) or "none"
            text = UNKNOWN_TOOL_TEXT.format(name=call.name, tools=names)
        else:
            problems = schema_problems(call.arguments, tool.parameters)
            if not problems:
                return None
            text = INVALID_ARGUMENTS_TEXT.format(
                name=call.name, problems="\n".join(f"- {p}" for p in problems)
            )
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=text)],
        is_error=True,
    )


def check_tool_calls(message: AssistantMessage, tools: Sequence[Tool]) -> list[ToolResultMessage]:
    """`check_tool_call` for every call of `message`, in call order: the error results of
    the calls that must not run. With a `length` stop every call is refused (see
    `fail_truncated_tool_calls`)."""
    cut_by_limit = message.stop_reason == "length"
    results = []
    for call in message.tool_calls():
        if cut_by_limit and not call.truncated:
            call = call.model_copy(update={"truncated": True})
        result = check_tool_call(call, tools)
        if result is not None:
            results.append(result)
    return results


def schema_problems(value: Any, schema: dict[str, Any]) -> list[str]:
    """What `schema` finds wrong with `value`, one line each (at most ten), in the JSON
    Schema draft the schema names (2020-12 when it names none)."""
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "checking tool arguments needs jsonschema: pip install 'stream-core[validate]'"
        ) from None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"the tool's own schema is invalid: {exc.message}"]
    problems = []
    errors = sorted(cls(schema).iter_errors(value), key=lambda e: list(map(str, e.path)))
    for error in errors[:_MAX_PROBLEMS]:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
        problems.append(f"arguments{where}: {error.message}")
    if len(errors) > _MAX_PROBLEMS:
        problems.append(f"... and {len(errors) - _MAX_PROBLEMS} more")
    return problems


@dataclass(frozen=True)
class ToolPairAudit:
    """What is wrong with the call/result pairing of a history (indices into it)."""

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


def function_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """Tool definitions in the `{"type": "function", "function": {...}}` shape that OpenAI's
    Chat Completions set and Mistral, Ollama and the compatible servers share."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]
