"""A Chat Completions request read back into a `Context` and `StreamOptions`: the tested
inverse of `openai_completions`' request builder (`WIRE.build_request`), for the gateway.

- `system` and `developer` messages: the system prompt. Several (anywhere in the list) are
  joined in order by a blank line, and so are the text parts of one; where they stood
  among the other messages is not kept. The JSON instruction the builder adds for a
  `json_object` answer (`OutputSpec.instruction()`) is taken back out as `output_schema`.
- `user`: a string, or parts: `text`; `image_url` with a `data:` URL -> `ImageContent`,
  with an `http(s)` URL -> `FileContent(url=...)` (its media type guessed from the path;
  `detail` is not kept); `input_audio` -> `FileContent` (`audio/<format>`); `file` ->
  `FileContent` (data URL or `file_id`); any other part -> `VendorContent` of this API.
  The user message the builder adds after tool messages ("Attached image(s) from tool
  result:") goes back into the last of those tool results.
- `assistant`: `reasoning_content` / `reasoning` / `reasoning_text` (DeepSeek, vLLM, ...)
  -> a thinking block, `reasoning_details` / `thinking_blocks` -> its signature (as the
  translator stores them), `content` (string or text / refusal parts) and `refusal` ->
  text with `annotations` (`url_citation`) as its citations, `tool_calls` -> tool calls
  (arguments that are not a JSON object: `{}`, marked truncated). A tool-call id holding
  `~` + `CARRIER_PREFIX` is the gateway's state carrier: the id is read without it, and the
  carrier is recorded for that message (`Inbound.carriers`).
- `tool` -> `ToolResultMessage` (its tool name from the call it answers; text starting with
  `TOOL_ERROR_PREFIX` is an error result, `(no output)` none).
- Top-level fields: see `_OPTIONS` and `read_options`; the rest are `Inbound.unmodeled`.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from stream_core import (
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ImageContent,
    Message,
    Model,
    ServerTool,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import (
    CARRIER_PREFIX,
    TOOL_ERROR_PREFIX,
    Inbound,
    OutputSpec,
    RequestFieldError,
    output_spec,
)

from ._chat_citations import annotation_of
from ._openai_chat import _REASONING_FIELDS, SIGNATURE_FIELDS
from .openai_completions import _PLAIN_CONTROLS, API, WIRE

__all__ = ["parse_request"]

_CARRIER_MARK = "~" + CARRIER_PREFIX
_ATTACHED = "Attached image(s) from tool result:"  # the builder's note before tool images
_SEE_ATTACHED = "(see attached image)"
_NO_OUTPUT = "(no output)"
_SYSTEM_ROLES = ("system", "developer")

_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "stop": (str, list),
    "top_p": _NUMBER,
    "seed": (int,),
    "presence_penalty": _NUMBER,
    "frequency_penalty": _NUMBER,
    "temperature": _NUMBER,
    "top_k": (int,),
    "max_tokens": (int,),
    "parallel_tool_calls": (bool,),
    "session_id": (str,),
}
"""`StreamOptions` field -> the JSON types its request field takes."""

_OPTIONS: dict[str, str] = {
    **{field: option for option, field in _PLAIN_CONTROLS.items()},
    "temperature": "temperature",
    "top_k": "top_k",
    "max_completion_tokens": "max_tokens",
    "max_tokens": "max_tokens",
    "parallel_tool_calls": "parallel_tool_calls",
    "prompt_cache_key": "session_id",
}
"""Request field -> `StreamOptions` field: the builder's plain
controls (`_PLAIN_CONTROLS`, read backwards) and the fields it writes itself. Both output
limits are read; `max_completion_tokens` wins when both are sent."""

_READ = frozenset(
    {*_OPTIONS, "model", "messages", "tools", "tool_choice", "response_format",
     "reasoning_effort", "stream"}
)  # fmt: skip
"""Every top-level field the parser reads; any other is `Inbound.unmodeled`."""

_EFFORTS: dict[str, str | None] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "none": None,
}
"""`reasoning_effort` -> `StreamOptions.reasoning` (`none`: no reasoning asked; `xhigh`
is the highest effort stream-core asks)."""

_AUDIO_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}

# A stand-in model for `output_spec`: the name a schema gets is the library's to say.
_SPEC_MODEL = Model(id="gpt-4.1", api=API, provider="openai", base_url="https://api.openai.com/v1")
_INSTRUCTION = OutputSpec(
    schema={}, name="x", description=None, model_class=None, mode="json_object", strict=False
).instruction()[: -len("{}")]


def parse_request(body: Mapping[str, Any], headers: Mapping[str, str]) -> Inbound:
    """A Chat Completions request body as an `Inbound` (see the module's docstring);
    `RequestFieldError` names the first field that cannot be read."""
    model = body.get("model")
    if type(model) is not str or not model:
        raise RequestFieldError("model", "a model name (a non-empty string) is required")
    raw_messages = body.get("messages")
    if type(raw_messages) is not list or not raw_messages:
        raise RequestFieldError("messages", "a non-empty list of messages is required")
    reader = _Messages()
    for i, m in enumerate(raw_messages):
        reader.read(m, f"messages[{i}]")
    system = "\n\n".join(reader.system) or None
    tools = _tools(body.get("tools"))
    options = read_options(body, tools)
    if options.output_schema is None and _json_object(body):
        # The builder's json_object mode: the schema rides at the end of the system prompt.
        system, options.output_schema = _take_instruction(system)
    try:
        context = Context(system_prompt=system, messages=reader.messages, tools=tools or None)
    except ValueError as e:
        raise RequestFieldError("messages", str(e)) from None
    stream = body.get("stream", False)
    if stream is not None and type(stream) is not bool:
        raise RequestFieldError("stream", "true or false")
    if body.get("n", 1) not in (None, 1):
        raise RequestFieldError("n", "one choice is served (n=1); ask n times for more")
    return Inbound(
        model=model,
        context=context,
        options=options,
        stream=bool(stream),
        unmodeled={k: v for k, v in body.items() if k not in _READ},
        carriers=reader.carriers,
    )


# --- options --------------------------------------------------------------------------------


def read_options(body: Mapping[str, Any], tools: list[Tool | ServerTool]) -> StreamOptions:
    """The request's controls as `StreamOptions` (each checked, named by its field)."""
    values: dict[str, Any] = {}
    fields: dict[str, str] = {}
    for name, option in _OPTIONS.items():
        value, types = body.get(name), _TYPES[option]
        if value is None or (option in values and name == "max_tokens"):
            continue
        if type(value) not in types:
            raise RequestFieldError(name, f"expected {_type_names(types)}")
        if name == "stop":
            value = [value] if type(value) is str else value
            if not all(type(s) is str for s in value):
                raise RequestFieldError("stop", "a string or a list of strings")
            if not value:
                continue
        values[option] = value
        fields[option] = name
    if tools:
        choice = _tool_choice(body.get("tool_choice"))
        if choice is not None:
            values["tool_choice"], fields["tool_choice"] = choice, "tool_choice"
    else:
        values.pop("parallel_tool_calls", None)  # sent with tools only (as the builder does)
        if body.get("tool_choice") not in (None, "auto", "none"):
            raise RequestFieldError("tool_choice", "a tool choice needs `tools`")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if type(effort) is not str or effort not in _EFFORTS:
            raise RequestFieldError("reasoning_effort", f"one of {', '.join(_EFFORTS)}")
        if _EFFORTS[effort] is not None:
            values["reasoning"], fields["reasoning"] = _EFFORTS[effort], "reasoning_effort"
    schema = _response_format(body.get("response_format"))
    if schema is not None:
        values["output_schema"], fields["output_schema"] = schema, "response_format"
    try:
        return StreamOptions(**values)
    except (TypeError, ValueError) as e:
        text = str(e)
        option = text.split(":", 1)[0].removeprefix("StreamOptions.")
        raise RequestFieldError(fields.get(option, option), text.split(": ", 1)[-1]) from None


def _type_names(types: tuple[type, ...]) -> str:
    names = {int: "a number", float: "a number", str: "a string", list: "a list", bool: "a bool"}
    if types == (int,):
        return "an integer"
    return " or ".join(dict.fromkeys(names[t] for t in types))


def _tool_choice(value: Any) -> Any:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        return value
    if type(value) is dict and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if type(function) is dict else None
        if type(name) is str and name:
            return {"tool": name}
        raise RequestFieldError("tool_choice.function.name", "the name of a tool")
    raise RequestFieldError(
        "tool_choice", '"auto", "none", "required" or {"type": "function", "function": {...}}'
    )


def _json_object(body: Mapping[str, Any]) -> bool:
    value = body.get("response_format")
    return type(value) is dict and value.get("type") == "json_object"


def _response_format(value: Any) -> dict[str, Any] | None:
    """`json_schema` -> its schema (the schema's title says its name, its description its
    description: set from the request's where the schema has none); `text` and
    `json_object` -> None here (see `_take_instruction`)."""
    if value is None:
        return None
    kind = value.get("type") if type(value) is dict else None
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        raise RequestFieldError("response_format.type", "text, json_object or json_schema")
    spec = value.get("json_schema")
    schema = spec.get("schema") if type(spec) is dict else None
    if type(schema) is not dict:
        raise RequestFieldError("response_format.json_schema.schema", "a JSON Schema object")
    assert type(spec) is dict
    schema = dict(schema)
    name, description = spec.get("name"), spec.get("description")
    if type(description) is str and description and "description" not in schema:
        schema["description"] = description
    if type(name) is str and name and "title" not in schema:
        derived = output_spec(WIRE, _SPEC_MODEL, StreamOptions(output_schema=schema))
        if derived is not None and derived.name != name:
            schema["title"] = name
    return schema


def _take_instruction(system: str | None) -> tuple[str | None, dict[str, Any]]:
    """(the system prompt without the builder's JSON instruction, its schema); a
    `json_object` request without one asks for any JSON object."""
    if system is not None:
        at = system.rfind(_INSTRUCTION)
        if at == 0 or (at > 0 and system[at - 2 : at] == "\n\n"):
            try:
                schema = json.loads(system[at + len(_INSTRUCTION) :])
            except ValueError:
                schema = None
            if type(schema) is dict:
                return (system[: max(0, at - 2)] or None), schema
    return system, {"type": "object"}


# --- tools ----------------------------------------------------------------------------------


def _tools(value: Any) -> list[Tool | ServerTool]:
    """Function tools (their `strict` flag is not kept: a schema goes as given); a tool of
    any other type is this API's own (`ServerTool.native`), as the builder sends one."""
    if value is None:
        return []
    if type(value) is not list:
        raise RequestFieldError("tools", "a list of tools")
    out: list[Tool | ServerTool] = []
    for i, t in enumerate(value):
        where = f"tools[{i}]"
        if type(t) is not dict:
            raise RequestFieldError(where, "a tool object")
        if t.get("type") != "function":
            out.append(ServerTool.native(API, t))
            continue
        fn = t.get("function")
        if type(fn) is not dict:
            raise RequestFieldError(where + ".function", "the function's name and parameters")
        name, description = fn.get("name"), fn.get("description")
        parameters = fn.get("parameters")
        if type(name) is not str or not name:
            raise RequestFieldError(where + ".function.name", "a non-empty string")
        if description is not None and type(description) is not str:
            raise RequestFieldError(where + ".function.description", "a string")
        if parameters is not None and type(parameters) is not dict:
            raise RequestFieldError(where + ".function.parameters", "a JSON Schema object")
        tool = Tool(name=name, description=description or "")
        if parameters is not None:
            tool.parameters = parameters
        out.append(tool)
    return out


# --- messages -------------------------------------------------------------------------------


class _Messages:
    """The message list read in order: the system prompt's pieces, the messages, the
    carriers found, and what tool results need (the calls' names, the run of results the
    builder's image note follows)."""

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[Message] = []
        self.carriers: dict[int, str] = {}
        self.names: dict[str, str] = {}
        self.short: dict[str, str] = {}

    def read(self, m: Any, where: str) -> None:
        if type(m) is not dict:
            raise RequestFieldError(where, "a message object")
        role = m.get("role")
        if role in _SYSTEM_ROLES:
            text = "\n\n".join(_texts(m.get("content"), where + ".content"))
            if text:
                self.system.append(text)
        elif role == "user":
            self._user(m, where)
        elif role == "assistant":
            self._assistant(m, where)
        elif role == "tool":
            self._tool(m, where)
        else:
            raise RequestFieldError(
                where + ".role", "system, developer, user, assistant or tool (not the legacy "
                "function role: send tool messages)" if role == "function" else
                "system, developer, user, assistant or tool"
            )  # fmt: skip

    def _user(self, m: dict[str, Any], where: str) -> None:
        content = m.get("content")
        if type(content) is str:
            self.messages.append(UserMessage(content=content))
            return
        if type(content) is not list:
            raise RequestFieldError(where + ".content", "a string or a list of parts")
        parts = [_user_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
        last = self.messages[-1] if self.messages else None
        if (
            isinstance(last, ToolResultMessage)
            and parts
            and isinstance(parts[0], TextContent)
            and parts[0].text == _ATTACHED
        ):
            # The builder's note: the images and files of the tool results just before.
            kept = [b for b in last.content if not _is_text(b, _SEE_ATTACHED)]
            last.content = kept + parts[1:]
            return
        self.messages.append(UserMessage(content=parts))

    def _assistant(self, m: dict[str, Any], where: str) -> None:
        for name in ("audio", "function_call"):
            if m.get(name) is not None:
                raise RequestFieldError(f"{where}.{name}", "cannot be carried (no such block)")
        blocks: list[Any] = []
        thinking = _thinking(m, where)
        if thinking is not None:
            blocks.append(thinking)
        text = _assistant_text(m, where)
        if text is not None:
            blocks.append(text)
        carrier: str | None = None
        calls = m.get("tool_calls")
        if calls is not None and type(calls) is not list:
            raise RequestFieldError(where + ".tool_calls", "a list of tool calls")
        for j, tc in enumerate(calls or ()):
            call, found = self._call(tc, f"{where}.tool_calls[{j}]")
            blocks.append(call)
            carrier = found or carrier  # the last call's: packed with all the calls before
        if carrier is not None:
            self.carriers[len(self.messages)] = carrier
        self.messages.append(
            AssistantMessage(content=blocks, api=API, provider="client", model="client",
                             stop_reason="tool_use" if calls else "stop")
        )  # fmt: skip

    def _call(self, tc: Any, where: str) -> tuple[ToolCall, str | None]:
        if type(tc) is not dict:
            raise RequestFieldError(where, "a tool call object")
        fn = tc.get("function")
        call_id = tc.get("id")
        if type(call_id) is not str or not call_id:
            raise RequestFieldError(where + ".id", "a non-empty string")
        if type(fn) is not dict or type(fn.get("name")) is not str or not fn["name"]:
            raise RequestFieldError(where + ".function.name", "the name of the tool called")
        short, carrier = _split_carrier(call_id)
        if carrier is not None:
            self.short[call_id] = short
        raw = fn.get("arguments")
        arguments: Any
        if type(raw) is dict:
            arguments = raw
        elif type(raw) is str or raw is None:
            try:
                arguments = json.loads(raw or "{}")
            except ValueError:
                arguments = None
        else:
            raise RequestFieldError(where + ".function.arguments", "a JSON string")
        self.names[short] = fn["name"]
        if type(arguments) is not dict:
            # A cut or broken call the model made: kept, never run (its result says so).
            return ToolCall(id=short, name=fn["name"], truncated=True), carrier
        return ToolCall(id=short, name=fn["name"], arguments=arguments), carrier

    def _tool(self, m: dict[str, Any], where: str) -> None:
        call_id = m.get("tool_call_id")
        if type(call_id) is not str or not call_id:
            raise RequestFieldError(where + ".tool_call_id", "the id of the call answered")
        call_id = self.short.get(call_id) or _split_carrier(call_id)[0]
        content = m.get("content")
        blocks: list[Any]
        if type(content) is str or content is None:
            blocks = [TextContent(text=content)] if content else []
        elif type(content) is list:
            blocks = [_user_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
        else:
            raise RequestFieldError(where + ".content", "a string or a list of parts")
        is_error = False
        if blocks and isinstance(blocks[0], TextContent):
            first = blocks[0]
            if first.text.startswith(TOOL_ERROR_PREFIX):
                is_error = True
                first.text = first.text[len(TOOL_ERROR_PREFIX) :]
            if first.text == _NO_OUTPUT or not first.text:
                blocks = blocks[1:]
        self.messages.append(
            ToolResultMessage(tool_call_id=call_id, tool_name=self.names.get(call_id, ""),
                              content=blocks, is_error=is_error)
        )  # fmt: skip


def _split_carrier(call_id: str) -> tuple[str, str | None]:
    at = call_id.find(_CARRIER_MARK)
    if at <= 0:
        return call_id, None
    return call_id[:at], call_id[at + 1 :]


def _is_text(block: Any, text: str) -> bool:
    return isinstance(block, TextContent) and block.text == text


def _texts(content: Any, where: str) -> list[str]:
    """A string, or text parts (`text`, and `refusal` in an assistant message)."""
    if content is None:
        return []
    if type(content) is str:
        return [content] if content else []
    if type(content) is not list:
        raise RequestFieldError(where, "a string or a list of text parts")
    out = []
    for j, p in enumerate(content):
        kind = p.get("type") if type(p) is dict else None
        key = "refusal" if kind == "refusal" else "text"
        if kind not in ("text", "refusal") or type(p.get(key)) is not str:
            raise RequestFieldError(f"{where}[{j}]", "a text part")
        out.append(p[key])
    return out


def _user_part(p: Any, where: str) -> Any:
    if type(p) is not dict:
        raise RequestFieldError(where, "a content part object")
    kind = p.get("type")
    if kind == "text":
        if type(p.get("text")) is not str:
            raise RequestFieldError(where + ".text", "a string")
        return TextContent(text=p["text"])
    if kind == "image_url":
        image = p.get("image_url")
        url = image.get("url") if type(image) is dict else image
        if type(url) is not str or not url:
            raise RequestFieldError(where + ".image_url.url", "a data: or https: URL")
        if url.startswith("data:"):
            mime, data = _data_url(url, where + ".image_url.url")
            return ImageContent(data=data, mime_type=mime or "image/png")
        if urlsplit(url).scheme not in ("http", "https"):
            raise RequestFieldError(where + ".image_url.url", "a data: or https: URL")
        guessed = mimetypes.guess_type(urlsplit(url).path)[0]
        return FileContent(url=url, mime_type=guessed if _is_image(guessed) else None)
    if kind == "input_audio":
        audio = p.get("input_audio")
        sound = audio.get("data") if type(audio) is dict else None
        fmt = audio.get("format") if type(audio) is dict else None
        if type(sound) is not str or not sound or type(fmt) is not str:
            raise RequestFieldError(where + ".input_audio", "base64 `data` and its `format`")
        return FileContent(data=sound, mime_type=_AUDIO_TYPES.get(fmt, f"audio/{fmt}"))
    if kind == "file":
        return _file(p.get("file"), where + ".file")
    return VendorContent(api=API, data=p)  # a part of this API's the builder sends as it is


def _file(f: Any, where: str) -> FileContent:
    if type(f) is not dict:
        raise RequestFieldError(where, "`file_data` (a data URL) or `file_id`")
    name = f.get("filename") if type(f.get("filename")) is str else None
    if type(f.get("file_id")) is str and f["file_id"]:
        return FileContent(file_id=f["file_id"], name=name)
    data = f.get("file_data")
    if type(data) is not str or not data:
        raise RequestFieldError(where, "`file_data` (a data URL) or `file_id`")
    if not data.startswith("data:"):
        # Bare base64 (some clients): its type from the file name.
        guessed = mimetypes.guess_type(name or "")[0]
        return FileContent(data=data, mime_type=guessed or "application/pdf", name=name)
    mime, payload = _data_url(data, where + ".file_data")
    return FileContent(data=payload, mime_type=mime or "application/pdf", name=name)


def _is_image(mime: str | None) -> bool:
    return mime is not None and mime.startswith("image/")


def _data_url(url: str, where: str) -> tuple[str | None, str]:
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64") or not data:
        raise RequestFieldError(where, "a base64 data URL (data:<type>;base64,<data>)")
    return head[: -len(";base64")] or None, data


def _thinking(m: dict[str, Any], where: str) -> ThinkingContent | None:
    """The assistant's reasoning text (first field present, as the translator reads it) and
    its signatures (`SIGNATURE_FIELDS`, stored as the translator stores them)."""
    text, field = "", None
    for name in _REASONING_FIELDS:
        value = m.get(name)
        if value is None:
            continue
        if type(value) is not str:
            raise RequestFieldError(f"{where}.{name}", "a string")
        if value:
            text, field = value, name
            break
    kept = {name: m[name] for name in SIGNATURE_FIELDS if type(m.get(name)) is list and m[name]}
    if not text and not kept:
        return None
    signature = json.dumps(kept, ensure_ascii=False) if kept else field
    return ThinkingContent(thinking=text, signature=signature)


def _assistant_text(m: dict[str, Any], where: str) -> TextContent | None:
    pieces = _texts(m.get("content"), where + ".content")
    refusal = m.get("refusal")
    if type(refusal) is str and refusal:
        pieces.append(refusal)
    text = "".join(pieces)
    citations: list[Citation] = []
    annotations = m.get("annotations")
    for item in annotations if type(annotations) is list else ():
        citation = annotation_of(item) if type(item) is dict else None
        if citation is not None:
            citations.append(citation)
    if not text:
        return None
    return TextContent(text=text, citations=citations or None)
