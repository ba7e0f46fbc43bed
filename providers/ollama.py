"""Ollama's native API: `POST {base}/api/chat` (`ollama-chat`) and `POST {base}/api/generate`
(`ollama-generate`), both streaming newline-delimited JSON.

Every line is a whole object: text in `message.content` (chat) or `response` (generate),
reasoning in `thinking`, tool calls whole with their arguments as an object (several per
line, no ids: the assembler makes them), and a last line with `"done": true`, the
`done_reason` and the usage counts. An `{"error": ...}` line ends the stream. Ollama's
OpenAI-compatible `/v1` endpoint is served by `openai-completions` instead.

No key is needed; the base URL is the model's, or `OLLAMA_HOST` for the default one.

Portable controls (`_CONTROLS`, `_GENERATE_CONTROLS`): `stop`, `top_p`, `top_k`, `seed`,
`presence_penalty` and `frequency_penalty` go in the request's `options` object (with
`num_predict` and `temperature`); `output_schema` is sent as `format` (the schema itself),
the native mode on both endpoints. Ollama cannot force a tool: `tool_choice="auto"` sends
nothing; `"none"` leaves the tools out of the request (the model then cannot call one;
`/api/generate` takes no tools anyway); `"required"` or `{"tool": name}` raise, and so does
structured output in tool mode (`Model.structured_output="tool"`), which needs a forced
tool. `parallel_tool_calls=False` raises (no such switch). No `StreamOptions.extra` keys.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_core import from_json

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.provider import (
    IMAGE_OMITTED_TEXT,
    TOOL_ERROR_PREFIX,
    Assembler,
    NDJSONBytesDecoder,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    base_url_problem,
    copy_controls,
    error_from_vendor,
    function_tools,
    optional_field,
    output_spec,
    parse_json,
    prepare_messages,
    shape,
    vendor_error_fields,
)

API = "ollama-chat"
GENERATE_API = "ollama-generate"

_STOP_REASONS: dict[str, StopRule] = {
    "stop": "stop",
    "length": "length",
    "load": "stop",  # an empty request that only loaded the model
    "unload": "stop",
}

# Our usage field <- Ollama's (sent once, on the done line).
_USAGE_FIELDS: dict[str, str] = {"input": "prompt_eval_count", "output": "eval_count"}

# Portable request control -> where the request carries it (both endpoints).
_OPTIONS_CONTROLS: dict[str, str] = {
    "stop": "options.stop",
    "top_p": "options.top_p",
    "top_k": "options.top_k",
    "seed": "options.seed",
    "presence_penalty": "options.presence_penalty",
    "frequency_penalty": "options.frequency_penalty",
}
_CONTROLS: dict[str, str] = {
    "tool_choice": '"auto": nothing sent; "none": tools left out; cannot force a tool',
    **_OPTIONS_CONTROLS,
    "output_schema": "format (the JSON Schema)",
}
_GENERATE_CONTROLS: dict[str, str] = {
    "tool_choice": '"auto" / "none" only (the endpoint takes no tools)',
    **_OPTIONS_CONTROLS,
    "output_schema": "format (the JSON Schema)",
}

DEFAULT_BASE_URL = "http://localhost:11434"
_TEXT, _THINKING = "text", "thinking"


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


def stream_generate(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return GENERATE_WIRE.open(model, context, options)


def base_url(model: Model) -> str:
    """The model's base URL, or `OLLAMA_HOST` (as the Ollama CLI reads it: `host:port` or
    a URL) when the model keeps the default."""
    url = model.base_url.rstrip("/") or DEFAULT_BASE_URL
    host = os.environ.get("OLLAMA_HOST", "").strip()
    if host and url == DEFAULT_BASE_URL:
        url = host if "://" in host else f"http://{host}"
        # `unix://`, `file://` or a CR/LF would not reach a server (or would split the
        # request): the variable is named at `stream()` rather than ending `network`.
        problem = base_url_problem(url)
        if problem is not None:
            raise ValueError(f"OLLAMA_HOST (from the environment): {problem}")
    return url.rstrip("/")


# --- request ------------------------------------------------------------------------------


def _common(model: Model, options: StreamOptions, wire: WireAPI) -> dict[str, Any]:
    choice = options.tool_choice
    if choice is not None and choice not in ("auto", "none"):
        raise ValueError(
            f"StreamOptions.tool_choice: {wire.api} cannot force a tool ({choice!r}); "
            "for structured output use the native mode (Model.structured_output='native')"
        )
    payload: dict[str, Any] = {"model": model.id, "stream": True}
    settings: dict[str, Any] = {}
    if options.max_tokens is not None:
        settings["num_predict"] = options.max_tokens
    if options.temperature is not None:
        settings["temperature"] = options.temperature
    # The vendor's name is the control's own, inside `options`.
    copy_controls(options, {control: control for control in _OPTIONS_CONTROLS}, settings)
    if settings:
        payload["options"] = settings
    if model.reasoning and options.reasoning:
        payload["think"] = True
    spec = output_spec(wire, model, options)
    if spec is not None and spec.mode != "tool":
        payload["format"] = spec.schema
    return payload


def _build_chat(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    payload = _common(model, options, WIRE)
    payload["messages"] = _convert_messages(model, context)
    if context.tools and options.tool_choice != "none":
        payload["tools"] = function_tools(context.tools)
    return WireRequest(url=base_url(model) + "/api/chat", payload=payload)


def _build_generate(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    """`/api/generate` takes one prompt: a single user turn is sent as it is, a longer
    history as a plain transcript (the endpoint keeps no roles)."""
    payload = _common(model, options, GENERATE_WIRE)
    if context.system_prompt:
        payload["system"] = context.system_prompt
    messages = prepare_messages(
        context, api=GENERATE_API, provider=model.provider, model_id=model.id
    )
    images: list[str] = []
    turns: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            text, pics = _text_and_images(m.content)
            images += pics
            turns.append(f"User: {text}")
        elif isinstance(m, AssistantMessage):
            turns.append(f"Assistant: {m.text()}")
        else:
            text, _ = _text_and_images(m.content)
            turns.append(f"Tool result ({m.tool_name}): {text}")
    if len(turns) == 1 and turns[0].startswith("User: "):
        payload["prompt"] = turns[0][len("User: ") :]
    else:
        payload["prompt"] = "\n\n".join(turns) + "\n\nAssistant:"
    if images and "image" in model.input:
        payload["images"] = images
    elif images:
        payload["prompt"] += "\n" + IMAGE_OMITTED_TEXT
    return WireRequest(url=base_url(model) + "/api/generate", payload=payload)


def _text_and_images(content: str | Sequence[object]) -> tuple[str, list[str]]:
    if isinstance(content, str):
        return content, []
    text = "\n".join(b.text for b in content if isinstance(b, TextContent))
    return text, [b.data for b in content if isinstance(b, ImageContent)]


def _convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    vision = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    # Ollama pairs results with calls by position and name, not by id: ids need no mapping.
    pending: list[str] = []  # images from tool results, sent once the results are done
    for m in prepare_messages(context, api=API, provider=model.provider, model_id=model.id):
        if not isinstance(m, ToolResultMessage) and pending:
            out.append(_tool_images(pending, vision=vision))
            pending = []
        if isinstance(m, UserMessage):
            text, images = _text_and_images(m.content)
            entry: dict[str, Any] = {"role": "user", "content": text}
            if images:
                if vision:
                    entry["images"] = images
                else:
                    entry["content"] += "\n" + IMAGE_OMITTED_TEXT
            out.append(entry)
        elif isinstance(m, AssistantMessage):
            converted = _assistant(m)
            if converted is not None:
                out.append(converted)
        else:
            out.append(_tool_result(m))
            pending += _text_and_images(m.content)[1]
    if pending:
        out.append(_tool_images(pending, vision=vision))
    return out


def _tool_images(images: list[str], *, vision: bool) -> dict[str, Any]:
    """Tool messages carry text only: their images follow the results as a user message."""
    if vision:
        return {"role": "user", "content": "Attached image(s) from tool results:", "images": images}
    return {"role": "user", "content": IMAGE_OMITTED_TEXT}


def _assistant(m: AssistantMessage) -> dict[str, Any] | None:
    # Ollama's own answers hold text, thinking and calls only; any other block (one a
    # harness added) has no field here and goes as its text, so nothing is dropped.
    text = "".join(
        b.text
        if isinstance(b, TextContent)
        else ""
        if isinstance(b, (ThinkingContent, ToolCall))
        else getattr(b, "as_text", lambda: "")()
        for b in m.content
    )
    thinking = "".join(
        b.thinking for b in m.content if isinstance(b, ThinkingContent) and not b.redacted
    )
    calls = [
        {"function": {"name": b.name, "arguments": b.arguments}}
        for b in m.content
        if isinstance(b, ToolCall)
    ]
    if not text.strip() and not calls and not thinking.strip():
        return None
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking.strip():
        out["thinking"] = thinking
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_result(m: ToolResultMessage) -> dict[str, Any]:
    text, _ = _text_and_images(m.content)
    if not text.strip():
        text = "(no output)"
    if m.is_error:
        text = TOOL_ERROR_PREFIX + text
    return {"role": "tool", "content": text, "tool_name": m.tool_name}


# --- response -----------------------------------------------------------------------------


class _Lines:
    """One stream's translator: `read_message` takes a line's content (the endpoints
    differ there); errors, usage, the stop reason and the end are read the same way."""

    __slots__ = ("asm", "calls", "read_message", "thinking")

    def __init__(self, asm: Assembler, read_message: _MessageReader) -> None:
        self.asm = asm
        self.read_message = read_message
        self.calls = 0
        """Tool calls seen so far: their keys (Ollama sends no ids and no indices)."""
        self.thinking = False
        """The thinking block is open (only this translator opens or ends it): text after
        it ends it, and text after text costs no call to end it."""

    def __call__(self, event: str, data: str) -> None:
        try:
            line = from_json(data, allow_inf_nan=False)
        except ValueError:
            line = parse_json(data, "line")  # raises, naming the line
        if type(line) is not dict:
            as_object(line, "line")
        if self.read_message is _chat_message and line.get("done") is False:
            # The common chat line, text only, read here: three calls fewer per line.
            message = line.get("message")
            if (
                type(message) is dict
                and "error" not in line
                and "thinking" not in message
                and "tool_calls" not in message
            ):
                content = message.get("content")
                if type(content) is str:
                    if content:
                        if self.thinking:
                            self.end_thinking()
                        self.asm.text(_TEXT, content)
                    return
        self.read_line(line)

    def read_line(self, line: dict[str, Any]) -> None:
        asm = self.asm
        if "error" in line:
            vendor_type, message = vendor_error_fields(line)
            raise StreamFailure(error_from_vendor(vendor_type, message))
        self.read_message(self, line)
        if line.get("done") is True:
            asm.set_stop_reason(optional_field(line, "done_reason", str, "line"))
            asm.set_usage(
                **{
                    ours: optional_field(line, theirs, int, "line")
                    for ours, theirs in _USAGE_FIELDS.items()
                }
            )
            asm.finished = True

    def text_parts(self, thinking: str | None, text: str | None) -> None:
        """A line's thinking and text (their types already checked)."""
        asm = self.asm
        if thinking:
            asm.end(_TEXT)
            asm.thinking(_THINKING, thinking)
            self.thinking = True
        if text:
            if self.thinking:
                asm.end(_THINKING)
                self.thinking = False
            asm.text(_TEXT, text)

    def end_thinking(self) -> None:
        self.asm.end(_THINKING)
        self.thinking = False


_MessageReader = Callable[[_Lines, dict[str, Any]], None]
_MESSAGE = shape("line.message", thinking=str, content=str, tool_calls=list)
_GENERATED = shape("line", thinking=str, response=str)


def _chat_message(lines: _Lines, line: dict[str, Any]) -> None:
    asm = lines.asm
    message = line.get("message")
    if message is None:
        return
    where = "line.message"
    thinking, content, tool_calls = _MESSAGE(message, where)
    lines.text_parts(thinking, content)
    for i, raw in enumerate(tool_calls or ()):
        call = as_object(raw, f"{where}.tool_calls[{i}]")
        fn = as_object(call.get("function") or {}, f"{where}.tool_calls[{i}].function")
        arguments = fn.get("arguments")
        if arguments is None or type(arguments) is str:
            fragment = arguments or ""
        else:
            fragment = json.dumps(as_object(arguments, f"{where}.tool_calls[{i}].arguments"))
        asm.end(_TEXT)
        lines.end_thinking()
        # Calls arrive whole: started, given their arguments and ended at once.
        key = ("tool", lines.calls)
        lines.calls += 1
        asm.tool_call(
            key,
            fragment,
            id=optional_field(call, "id", str, f"{where}.tool_calls[{i}]") or "",
            name=optional_field(fn, "name", str, f"{where}.tool_calls[{i}].function") or "",
        )
        asm.end(key)


def _generate_message(lines: _Lines, line: dict[str, Any]) -> None:
    thinking, response = _GENERATED(line)
    lines.text_parts(thinking, response)


def _endpoint(
    read_message: _MessageReader,
) -> tuple[Callable[[Assembler], Translator], Callable[[Assembler, Any], None]]:
    """(translator, non-streamed reader): an answer sent with `"stream": false` is one
    line with `"done": true`."""

    def translator(asm: Assembler) -> Translator:
        # A bound method: calling it costs less than an instance's `__call__`.
        return _Lines(asm, read_message).__call__

    def parse_response(asm: Assembler, obj: Any) -> None:
        _Lines(asm, read_message).read_line(as_object(obj, "answer"))

    return translator, parse_response


_chat_translator, _chat_answer = _endpoint(_chat_message)
_generate_translator, _generate_answer = _endpoint(_generate_message)

WIRE = WireAPI(
    api=API,
    terminal_event='a line with "done": true',
    stop_reasons=_STOP_REASONS,
    build_request=_build_chat,
    auth_headers=lambda model, key: {"authorization": f"Bearer {key}"},
    translator=_chat_translator,
    api_key_env=lambda model: "OLLAMA_API_KEY",
    key_required=lambda model: False,
    decoder=NDJSONBytesDecoder,
    parse_response=_chat_answer,
    providers={},  # `ollama/...` resolves through get_model (ollama-chat at OLLAMA_HOST)
    controls=_CONTROLS,
    output_mode=lambda model: "native",
)

GENERATE_WIRE = dataclasses.replace(
    WIRE,
    api=GENERATE_API,
    build_request=_build_generate,
    translator=_generate_translator,
    parse_response=_generate_answer,
    providers={},
    controls=_GENERATE_CONTROLS,
    takes_tools=False,  # /api/generate has no tools: context.tools raises at stream()
)

# Both endpoints register from this one module.
WIRES = (WIRE, GENERATE_WIRE)
