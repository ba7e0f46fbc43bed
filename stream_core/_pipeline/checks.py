"""All call validation: what `stream()` checks before any I/O, raising with the field named
(CONTRACT 1): the model, the options and the controls the API takes, `extra` keys and
their types, `Model.compat`, the context (messages, tools, tool choice, JSON of every
argument and schema, images), and records of registered roles replaced by their
conversion. `WireAPI.open` calls `check_call`; nothing here performs I/O.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from .._checks import base_url_problem, clip, image_problem, tool_name_problem
from .._history import roles  # noqa: F401 - registers the ready-made roles before any record is read
from .._kinds import BLOCK_KINDS
from .._models import Model, model_headers_problem
from .._options import CONTROLS, StreamOptions
from .._retirements import warn_if_retired
from .._rules import check_rules, image_note
from .._server_tools import ServerTool, function_tools_of
from .._types import (
    KEEP_UNKNOWN_BLOCKS,
    MODEL_MESSAGE_ADAPTER,
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Context,
    CustomMessage,
    FileContent,
    ImageContent,
    Message,
    ModelMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    expand_message,
)

if TYPE_CHECKING:
    from .._wire import WireAPI

_BLOCK_TAGS = frozenset({*BLOCK_KINDS, "unknown"})

__all__ = ["check_call", "check_json"]


def check_call(wire: WireAPI, model: Any, context: Any, options: Any) -> Context:
    """Programmer errors raise here, before any I/O, naming the bad field.

    The context is validated again even when it is a `Context` (a field assigned after
    construction is not checked by pydantic), and the copy is what gets sent: the caller's
    object is never mutated, nor read again while the stream runs. In that copy every record
    of a registered role (`CustomMessage`) is replaced by its `to_messages()`, so providers,
    payload hooks and the structured-output step see built-in messages only."""
    api = wire.api
    if not isinstance(model, Model):
        raise TypeError(f"model must be a stream_core.Model, not {type(model).__name__}")
    if model.api != api:
        raise ValueError(f"model.api is {model.api!r} but this provider serves {api!r}")
    # Again: `model_copy(update=...)` and assignment skip the model's own validators.
    problem = base_url_problem(model.base_url)
    if problem is not None:
        raise ValueError(f"model.base_url: {problem}")
    problem = model_headers_problem(model.headers)
    if problem is not None:
        raise ValueError(f"model.headers: {problem}")
    if model.compat:
        _check_compat(wire, model.compat)
    warn_if_retired(model)  # a call to a retired model: said once in the log, then sent
    keep_unknown = None
    if options is not None:
        if not isinstance(options, StreamOptions):
            raise TypeError(f"options must be StreamOptions or None, not {type(options).__name__}")
        options.validate()  # again: a field may have been changed since construction
        _check_controls(wire, options)
        check_rules(model, options)
    if isinstance(context, Context):
        for i, m in enumerate(context.messages):
            if not isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)):
                raise TypeError(
                    f"context.messages[{i}] is a {type(m).__name__}, not a message "
                    "(filter JSONL records with messages_only())"
                )
        # Blocks of unknown types loaded from a history stay what they were.
        keep_unknown = KEEP_UNKNOWN_BLOCKS
        context = context.model_dump(warnings=False)
    elif not isinstance(context, dict):
        raise TypeError(f"context must be a stream_core.Context, not {type(context).__name__}")
    try:
        checked = Context.model_validate(context, context=keep_unknown)
    except ValidationError as exc:
        first = _first_error(exc)
        raise ValueError(f"{_where(first['loc'])}: {_message(first)}") from None
    seen: dict[str, int] = {}
    for i, tool in enumerate(checked.tools or ()):
        if isinstance(tool, ServerTool):
            _check_server_tool(wire, model, tool, i)
            continue
        problem = tool_name_problem(tool.name)
        if problem is not None:
            raise ValueError(f"context.tools[{i}].name: {problem}")
        if tool.name in seen:
            raise ValueError(
                f"context.tools[{i}].name: {tool.name!r} is also the name of "
                f"context.tools[{seen[tool.name]}]; tool names must be unique"
            )
        seen[tool.name] = i
        check_json(tool.parameters, f"context.tools[{i}].parameters")
    if checked.tools and not wire.takes_tools:
        raise ValueError(
            f"context.tools: {api} takes no tools; leave them out (or use an API that takes them)"
        )
    if options is not None and options.tool_choice is not None:
        _check_tool_choice(options, checked)
    for i, m in enumerate(checked.messages):
        if isinstance(m, AssistantMessage):
            for j, block in enumerate(m.content):
                if isinstance(block, ToolCall):
                    check_json(block.arguments, f"context.messages[{i}].content[{j}].arguments")
    if any(isinstance(m, CustomMessage) for m in checked.messages):
        checked = checked.model_copy(update={"messages": _converted(checked.messages)})
    if not checked.messages:
        raise ValueError("context.messages: empty; every API needs at least one message to answer")
    asked: set[str] = set()  # approval requests of the assistant turns so far
    for i, m in enumerate(checked.messages):
        if isinstance(m, AssistantMessage):
            asked.update(b.id for b in m.content if isinstance(b, ApprovalRequest))
        elif isinstance(m, (UserMessage, ToolResultMessage)) and not isinstance(m.content, str):
            for j, part in enumerate(m.content):
                if isinstance(part, ApprovalResponse) and part.request_id not in asked:
                    raise ValueError(
                        f"context.messages[{i}].content[{j}].request_id: no ApprovalRequest "
                        f"with id {clip(repr(part.request_id), 80)} in an earlier assistant "
                        "message (an answer must follow the request it answers)"
                    )
                if isinstance(part, FileContent):
                    _check_file(wire, part, f"context.messages[{i}].content[{j}]")
                elif isinstance(part, ImageContent):
                    bad = image_problem(part.data, part.mime_type)
                    if bad is not None:
                        raise ValueError(f"context.messages[{i}].content[{j}].{bad[0]}: {bad[1]}")
                    note = image_note(model, part.mime_type)
                    if note is not None:
                        # A type the vendor does not take: a note instead (this is the copy).
                        m.content[j] = TextContent(text=note)
    return checked


def _first_error(exc: ValidationError) -> Any:
    """The error to report: a message's content given as a list is checked as a string
    too, and that branch's complaint says nothing about the list's bad block."""
    errors = exc.errors()
    return next((e for e in errors if e["loc"][-1:] != ("str",)), errors[0])


def _message(error: Any) -> str:
    msg = str(error["msg"])
    return msg.removeprefix("Value error, ")


_TAGS = frozenset({"user", "assistant", "tool_result", "custom", "function", "server"})


def _where(loc: tuple[int | str, ...]) -> str:
    # The tags a value is validated under (a message's role, a tool's or a block's kind,
    # a union's branch) say nothing to the caller: the path is the fields and indexes.
    parts: list[str] = []
    for k, p in enumerate(loc):
        if isinstance(p, str) and (
            (k == 2 and p in _TAGS)
            or "[" in p
            or (k > 0 and isinstance(loc[k - 1], int) and p in _BLOCK_TAGS)
        ):
            continue
        parts.append(str(p))
    return "context." + ".".join(parts)


def _converted(messages: list[Message]) -> list[ModelMessage]:
    """Each record of a registered role replaced by its conversion, checked and copied like
    the rest of the context (a conversion may hand out objects it keeps)."""
    out: list[ModelMessage] = []
    for i, m in enumerate(messages):
        if not isinstance(m, CustomMessage):
            out.append(m)
            continue
        where = f"context.messages[{i}]"
        for sent in expand_message(m, where):
            try:
                sent = MODEL_MESSAGE_ADAPTER.validate_python(
                    sent.model_dump(warnings=False), context=KEEP_UNKNOWN_BLOCKS
                )
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(p) for p in first["loc"][1:]) or "<message>"
                raise ValueError(
                    f"{where}: {type(m).__name__}.to_messages() gave an invalid {sent.role} "
                    f"message: {field}: {first['msg']}"
                ) from None
            if isinstance(sent, AssistantMessage):
                for block in sent.tool_calls():
                    check_json(block.arguments, f"{where}: {type(m).__name__} tool call arguments")
            out.append(sent)
    return out


def _check_controls(wire: WireAPI, options: StreamOptions) -> None:
    for name in CONTROLS:
        value = getattr(options, name)
        # parallel_tool_calls=True asks for what every API does anyway.
        if value is None or name in wire.controls or (name == "parallel_tool_calls" and value):
            continue
        takes = ", ".join(c for c in CONTROLS if c in wire.controls) or "none of them"
        raise ValueError(
            f"StreamOptions.{name}: {wire.api} has no such control (of the portable "
            f"controls it takes: {takes}); vendor-only knobs go in `extra` or `on_payload`"
        )
    for key in options.extra:
        if key not in wire.extra:
            hint = (
                f"; it is StreamOptions.{key}"
                if key in CONTROLS
                else f" (it reads: {', '.join(sorted(wire.extra))})"
                if wire.extra
                else " (it reads none)"
            )
            raise ValueError(f"StreamOptions.extra: unknown key {key!r} for {wire.api}{hint}")
        allowed = wire.extra_types.get(key)
        value = options.extra[key]
        if allowed is not None and type(value) not in allowed:
            names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
            shown = clip(repr(value), 60)
            raise TypeError(
                f"StreamOptions.extra[{key!r}]: {wire.api} takes {names}, got "
                f"{type(value).__name__} {shown}"
            )


def _check_server_tool(wire: WireAPI, model: Model, tool: ServerTool, i: int) -> None:
    where = f"context.tools[{i}]"
    if tool.kind == "native":
        if tool.api != wire.api:
            raise ValueError(
                f"{where}: a native ServerTool for {tool.api} cannot go to {wire.api} "
                "(give it as a portable kind, or leave it out for this API)"
            )
        check_json(tool.tool, f"{where}.tool")
        return
    if tool.kind not in wire.server_tools:
        takes = ", ".join(wire.server_tools) or "none"
        raise ValueError(
            f"{where}.kind: {wire.api} runs no {tool.kind!r} server tool (kinds it runs: "
            f"{takes}; any other as ServerTool.native(api, tool))"
        )
    check_json(tool.options, f"{where}.options")
    refusal = wire.server_tool_refusal(model, tool)
    if refusal is not None:
        raise ValueError(f"{where}.kind: {refusal}")


def _check_file(wire: WireAPI, part: FileContent, where: str) -> None:
    """A file goes only where the API documents files of its type; one without a media
    type only as a reference the vendor reads itself (`file_id`, `url`)."""
    if part.mime_type is None:
        if part.data is not None:
            raise ValueError(f"{where}.mime_type: a file sent as data needs its media type")
        if wire.file_types:
            return
    if part.mime_type in wire.file_types:
        return
    takes = ", ".join(sorted(wire.file_types)) or "no files"
    raise ValueError(
        f"{where}: {wire.api} cannot take a FileContent of type {part.mime_type!r} "
        f"(it takes: {takes})"
    )


def _check_tool_choice(options: StreamOptions, context: Context) -> None:
    choice = options.tool_choice
    names = [t.name for t in function_tools_of(context.tools)]
    if isinstance(choice, dict):
        if choice["tool"] not in names:
            raise ValueError(
                f"StreamOptions.tool_choice: no tool named {choice['tool']!r} in "
                f"context.tools ({', '.join(map(repr, names)) or 'none'})"
            )
    elif choice == "required" and not names and options.output_schema is None:
        raise ValueError("StreamOptions.tool_choice: 'required' but context.tools is empty")


def check_json(value: Any, where: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{where}: not JSON: {exc}") from None


def _check_compat(wire: WireAPI, compat: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first `Model.compat` key `wire` does not know, or whose
    value has the wrong type: a typo must not be silently dropped."""
    if wire.compat is None:
        raise ValueError(
            f"model.compat: {wire.api} takes no compat flags (got {', '.join(map(repr, compat))})"
        )
    adapters = _field_adapters(wire.compat)
    for key, value in compat.items():
        adapter = adapters.get(key)
        if adapter is None:
            raise ValueError(
                f"model.compat: unknown key {key!r} for {wire.api} "
                f"(known: {', '.join(sorted(adapters))})"
            )
        try:
            adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            raise ValueError(f"model.compat.{key}: {exc.errors()[0]['msg']}") from None


_ADAPTERS: dict[type[Any], dict[str, TypeAdapter[Any]]] = {}


def _field_adapters(cls: type[Any]) -> dict[str, TypeAdapter[Any]]:
    adapters = _ADAPTERS.get(cls)
    if adapters is None:
        hints = typing.get_type_hints(cls)
        adapters = {f.name: TypeAdapter(hints[f.name]) for f in dataclasses.fields(cls)}
        _ADAPTERS[cls] = adapters
    return adapters
