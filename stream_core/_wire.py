"""The wire definition a provider supplies, and the checks a call raises from.

A provider module is tables and functions (`WireAPI`, `WireRequest`, `Translator`,
`parse_json`). Everything that must fail before any I/O lives here too: the call's
validation (`_check_call`, CONTRACT 1) and the endpoint a model is sent to (`_endpoint`).

`AssistantStream` (`_stream`) runs the call and builds on this module, never the other way
round: `WireAPI.open` is handed the stream class (`bind_stream`) instead of importing it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from . import _roles  # noqa: F401 - registers the ready-made roles before any record is read
from ._assembler import Assembler, StopRule
from ._checks import base_url_problem, image_problem, key_problem, tool_name_problem
from ._errors import ProtocolError
from ._models import Model, model_headers_problem
from ._options import CONTROLS, StreamOptions
from ._output import OutputMode, OutputSpec, make_output_spec
from ._sse import Decoder, SSEBytesDecoder
from ._types import (
    KEEP_UNKNOWN_BLOCKS,
    MODEL_MESSAGE_ADAPTER,
    AssistantMessage,
    Context,
    CustomMessage,
    ImageContent,
    Message,
    ModelMessage,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    expand_message,
)

if TYPE_CHECKING:
    from ._stream import AssistantStream

__all__ = ["Translator", "WireAPI", "WireRequest", "bind_stream", "output_spec", "parse_json"]


@dataclass
class WireRequest:
    """What `WireAPI.build_request` returns: the `url` to POST to, the JSON `payload` (which
    `StreamOptions.on_payload` may replace) and the API's own `headers`. Auth headers, the
    model's and the call's headers are added by the pipeline."""

    url: str
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


Translator = Callable[[str, str], None]
"""Called with (SSE event name, data) for every event; drives the assembler."""


def parse_json(data: str, event: str) -> Any:
    """Parse an event's data, or end the stream with a protocol error naming the event."""
    try:
        return from_json(data, allow_inf_nan=False)
    except ValueError:
        snippet = data if len(data) <= 80 else data[:77] + "..."
        raise ProtocolError(f"malformed JSON in {event or 'data'} event: {snippet!r}") from None


@dataclass(frozen=True)
class WireAPI:
    """What a provider module supplies: its tables and three functions.

    `build_request(model, context, options)` turns the context into the vendor payload;
    `auth_headers(model, api_key)` says how the key is sent; `translator(asm)` returns the
    function that turns one vendor event into assembler calls.
    """

    api: str
    terminal_event: str
    stop_reasons: Mapping[str, StopRule]
    build_request: Callable[[Model, Context, StreamOptions], WireRequest]
    auth_headers: Callable[[Model, str], dict[str, str]]
    translator: Callable[[Assembler], Translator]
    api_key_env: Callable[[Model], str | None]
    """The environment variable holding the key for a model (None: no key needed)."""
    key_required: Callable[[Model], bool] = lambda model: True
    decoder: Callable[[], Decoder] = SSEBytesDecoder
    """The body's framing: SSE, `NDJSONBytesDecoder` for newline-delimited JSON, or
    `EventStreamDecoder` for AWS's binary event-stream."""
    sign: Callable[[httpx.Request, Model, StreamOptions, str | None], tuple[str, ...]] | None = None
    """Signs the finished request in place, exact body bytes included (AWS SigV4), given the
    API key if one was found; returns the secrets it used (for redaction). Raising
    `StreamFailure` (e.g. kind `auth`: no credentials) ends the stream with that error."""
    parse_response: Callable[[Assembler, Any], None] | None = None
    """Reads the vendor's non-streamed JSON answer (a proxy that ignored `stream: true`)
    as a whole: the same assembler calls as if it had streamed in one piece, ending with
    `asm.finished = True`. None: such an answer ends the stream `protocol`."""
    compat: type[Any] | None = None
    """The dataclass of per-endpoint flags `Model.compat` may set (None: it takes none);
    an unknown key or a value of the wrong type raises at the call, naming the key."""
    base_url_env: Mapping[str, str] = field(default_factory=dict)
    """Vendor default base URL -> the environment variable that replaces it (the official
    SDK's own, e.g. `OPENAI_BASE_URL`). Only a model still at that default is redirected."""
    providers: Mapping[str, str] = field(default_factory=dict)
    """Provider names this API serves -> their default base URL, so a model outside the
    catalog can be named as `provider/model-id` (e.g. `ollama/llama3.2`)."""
    bearer_token: Callable[[Model], Awaitable[str | None]] | None = None
    """When no API key is configured: awaited once at connect for an OAuth token (e.g.
    Vertex AI's Application Default Credentials), sent as `authorization: Bearer` and
    redacted like a key. Blocking I/O belongs in a worker thread (`anyio.to_thread`)."""
    controls: Mapping[str, str] = field(default_factory=dict)
    """The portable request controls it maps (`CONTROLS`: `tool_choice`, `stop`, `top_p`,
    `output_schema`, ...) -> the vendor field each becomes, for the README's table. A
    control set on a call and missing here raises at `stream()`, naming the API; a value the
    API cannot express (`tool_choice="required"` on Ollama) is the builder's `ValueError`."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """The `StreamOptions.extra` keys it reads -> what each does; any other key raises at
    `stream()`, so a typo never silently does nothing."""
    extra_types: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    """The types each `extra` key takes (exactly: `True` is not an `int`); a value of any
    other type raises at `stream()` naming the key (`{"store": "false"}` must not send
    `store: true`). A key missing here takes any value."""
    output_mode: Callable[[Model], OutputMode] = lambda model: "tool"
    """How a model of this API is asked for a structured answer: its native JSON Schema
    mode, a JSON mode with the schema in the prompt, or (the default) one forced tool, which
    the pipeline adds itself. `Model.structured_output` overrides it per model."""

    def open(
        self,
        model: Model,
        context: Context | dict[str, Any],
        options: StreamOptions | None = None,
    ) -> AssistantStream:
        context = _check_call(self, model, context, options)
        options = options or StreamOptions()
        output = output_spec(self, model, options)
        if output is not None and output.mode == "tool":
            context, options = _force_output_tool(self, output, context, options)
        assert _stream_class is not None  # bound when `stream_core` is imported
        return _stream_class(self, model, context, options, output)


_StreamClass = Callable[
    [WireAPI, Model, Context, StreamOptions, OutputSpec | None], "AssistantStream"
]
# Set once by `_stream` at import (the package always imports it): the class lives
# above this module in the import graph, so it is handed down rather than imported.
_stream_class: _StreamClass | None = None


def bind_stream(cls: _StreamClass) -> None:
    """Make `WireAPI.open` return instances of `cls` (called by `_stream` only)."""
    global _stream_class
    _stream_class = cls


def _check_call(wire: WireAPI, model: Any, context: Any, options: Any) -> Context:
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
    keep_unknown = None
    if options is not None:
        if not isinstance(options, StreamOptions):
            raise TypeError(f"options must be StreamOptions or None, not {type(options).__name__}")
        options.validate()  # again: a field may have been changed since construction
        _check_controls(wire, options)
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
        first = exc.errors()[0]
        raise ValueError(f"{_where(first['loc'])}: {first['msg']}") from None
    seen: dict[str, int] = {}
    for i, tool in enumerate(checked.tools or ()):
        problem = tool_name_problem(tool.name)
        if problem is not None:
            raise ValueError(f"context.tools[{i}].name: {problem}")
        if tool.name in seen:
            raise ValueError(
                f"context.tools[{i}].name: {tool.name!r} is also the name of "
                f"context.tools[{seen[tool.name]}]; tool names must be unique"
            )
        seen[tool.name] = i
        _check_json(tool.parameters, f"context.tools[{i}].parameters")
    if options is not None and options.tool_choice is not None:
        _check_tool_choice(options, checked)
    for i, m in enumerate(checked.messages):
        if isinstance(m, AssistantMessage):
            for j, block in enumerate(m.content):
                if isinstance(block, ToolCall):
                    _check_json(block.arguments, f"context.messages[{i}].content[{j}].arguments")
    if any(isinstance(m, CustomMessage) for m in checked.messages):
        checked = checked.model_copy(update={"messages": _converted(checked.messages)})
    if not checked.messages:
        raise ValueError("context.messages: empty; every API needs at least one message to answer")
    for i, m in enumerate(checked.messages):
        if isinstance(m, (UserMessage, ToolResultMessage)) and not isinstance(m.content, str):
            for j, part in enumerate(m.content):
                if isinstance(part, ImageContent):
                    bad = image_problem(part.data, part.mime_type)
                    if bad is not None:
                        raise ValueError(f"context.messages[{i}].content[{j}].{bad[0]}: {bad[1]}")
    return checked


def api_key_from_env(env: str) -> str | None:
    """The key in environment variable `env`, surrounding whitespace removed (a `.env` file
    or `$(cat key)` adds a newline or a carriage return; no key has one); None when unset
    or blank. Anything else that is not a key's character raises, naming the variable and
    never showing the key."""
    key = os.environ.get(env, "").strip()
    if not key:
        return None
    problem = key_problem(key)
    if problem is not None:
        raise ValueError(f"{env} (from the environment): {problem}")
    return key


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    # The tag a record of a registered role is validated under says nothing to the caller.
    if len(parts) > 2 and parts[0] == "messages" and parts[2] == "custom":
        del parts[2]
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
                    _check_json(block.arguments, f"{where}: {type(m).__name__} tool call arguments")
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
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise TypeError(
                f"StreamOptions.extra[{key!r}]: {wire.api} takes {names}, got "
                f"{type(value).__name__} {shown}"
            )


def _check_tool_choice(options: StreamOptions, context: Context) -> None:
    choice = options.tool_choice
    names = [t.name for t in context.tools or ()]
    if isinstance(choice, dict):
        if choice["tool"] not in names:
            raise ValueError(
                f"StreamOptions.tool_choice: no tool named {choice['tool']!r} in "
                f"context.tools ({', '.join(map(repr, names)) or 'none'})"
            )
    elif choice == "required" and not names and options.output_schema is None:
        raise ValueError("StreamOptions.tool_choice: 'required' but context.tools is empty")


def output_spec(wire: WireAPI, model: Model, options: StreamOptions) -> OutputSpec | None:
    """The call's structured-output request, or None. Pure: the pipeline and the provider's
    request builder both call it and get the same answer. In tool mode the pipeline has
    already turned the request into a forced tool call, so a builder sees None."""
    schema = options.output_schema
    if schema is None:
        return None
    mode = wire.output_mode(model)
    if model.structured_output == "tool":
        mode = "tool"
    elif model.structured_output == "native" and mode == "tool":
        mode = "native"
    return make_output_spec(schema, mode)


def _force_output_tool(
    wire: WireAPI, output: OutputSpec, context: Context, options: StreamOptions
) -> tuple[Context, StreamOptions]:
    """Tool mode: one more tool, whose arguments are the answer, and a tool choice that makes
    the model call a tool. With tools of the caller's own the model may call those first
    (`required`); without, it must call this one."""
    if "tool_choice" not in wire.controls:
        raise ValueError(
            f"StreamOptions.output_schema: {wire.api} cannot force a tool and this model has "
            "no native structured output (set Model.structured_output='native' if it has)"
        )
    tools = list(context.tools or ())
    if any(t.name == output.name for t in tools):
        raise ValueError(
            f"StreamOptions.output_schema: its name {output.name!r} is also a tool's name "
            "(give the schema another `title`)"
        )
    choice = options.tool_choice
    if isinstance(choice, dict):
        raise ValueError(
            "StreamOptions.tool_choice: a named tool cannot be forced together with an "
            f"output_schema on a model without native structured output ({wire.api})"
        )
    if choice == "none":
        tools = []
    forced: Any = "required" if tools else {"tool": output.name}
    tool: Tool = output.tool()
    context = context.model_copy(update={"tools": [*tools, tool]})
    return context, dataclasses.replace(options, output_schema=None, tool_choice=forced)


def _check_json(value: Any, where: str) -> None:
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


def _endpoint(wire: WireAPI, model: Model, options: StreamOptions) -> Model:
    """The model as it is sent: `options.base_url` wins; else the vendor SDK's variable
    (`OPENAI_BASE_URL`, ...) replaces the vendor's default host, never a URL the model
    chose itself, so a gateway or a local server needs no code change."""
    url = options.base_url or None
    if url is None:
        env = wire.base_url_env.get(model.base_url.rstrip("/"))
        url = (os.environ.get(env, "").strip() or None) if env else None
        problem = base_url_problem(url) if url is not None else None
        if problem is not None:
            raise ValueError(f"{env} (from the environment): {problem}")
    if url is None or url == model.base_url:
        return model
    return model.model_copy(update={"base_url": url})
