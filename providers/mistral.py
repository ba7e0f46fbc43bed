"""Mistral's chat API (`POST {base}/v1/chat/completions`, SSE ending with `data: [DONE]`).

The stream is OpenAI Chat Completions with Mistral's habits, all of which the
`openai-completions` translator already reads: tool calls arrive whole in one delta with
no `index` (keyed by their id), Magistral's reasoning comes as `thinking` parts inside a
`content` array, usage sits on the last chunk. So this module reuses that translator and
differs on the way out: tool-call ids must be exactly nine letters or digits (others are
mapped, results follow), thinking goes back as `thinking` parts, tool results carry the
tool's name, and no `stream_options` is sent (Mistral rejects unknown request fields).

Portable controls (`_CONTROLS` below) map to Mistral's fields: `seed` is `random_seed`,
`tool_choice="required"` is `any`; there is no `top_k`. A structured answer is asked as
`response_format` `json_schema`. It reads no `StreamOptions.extra` keys: Mistral's own
fields (`safe_prompt`, `prediction`, ...) go in through `on_payload`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    FileContent,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import (
    IMAGE_OMITTED_TEXT,
    TOOL_ERROR_PREFIX,
    StopRule,
    WireAPI,
    WireRequest,
    copy_controls,
    function_tools,
    output_spec,
    prepare_messages,
    server_tools_of,
)

from ._chat_citations import mistral_file_part, reference_parts
from ._openai_chat import chat_codec, json_schema_format, tool_choice_field

API = "mistral-conversations"

_STOP_REASONS: dict[str, StopRule] = {
    "stop": "stop",
    "tool_calls": "tool_use",
    "length": "length",
    "model_length": "length",  # the context window filled while generating
}

# Portable control -> the request field it becomes (the README's table). `top_k` is in the
# official SDK's ChatCompletionRequest (mistralai, `top_k: OptionalNullable[int]`).
_CONTROLS: dict[str, str] = {
    "tool_choice": '`tool_choice`: "auto", "none", "any" (for required), '
    '{"type": "function", "function": {"name": ...}} (sent with tools only)',
    "parallel_tool_calls": "`parallel_tool_calls` (sent with tools only)",
    "stop": "`stop` (list)",
    "top_p": "`top_p`",
    "top_k": "`top_k`",
    "seed": "`random_seed`",
    "presence_penalty": "`presence_penalty`",
    "frequency_penalty": "`frequency_penalty`",
    "output_schema": '`response_format` {"type": "json_schema", "json_schema": {...}}',
}

# Controls sent as they are, under these field names.
_PLAIN_CONTROLS: dict[str, str] = {
    "stop": "stop",
    "top_p": "top_p",
    "top_k": "top_k",
    "seed": "random_seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}

# `StreamOptions.tool_choice` strings as Mistral spells them.
_TOOL_CHOICES: dict[str, str] = {"auto": "auto", "none": "none", "required": "any"}

_ID_LENGTH = 9
_ID_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_VALID_ID = re.compile(r"[A-Za-z0-9]{9}")


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


def normalize_id(tool_call_id: str) -> str:
    """Mistral's id rule (`^[a-zA-Z0-9]{9}$`): a conforming id is kept, any other is
    replaced by nine characters hashed from it, so its results can follow it."""
    if _VALID_ID.fullmatch(tool_call_id):
        return tool_call_id
    n = int.from_bytes(hashlib.blake2s(tool_call_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(_ID_LENGTH):
        n, r = divmod(n, len(_ID_CHARS))
        chars.append(_ID_CHARS[r])
    return "".join(chars)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    payload: dict[str, Any] = {
        "model": model.id,
        "messages": _convert_messages(model, context),
        "stream": True,
    }
    if options.max_tokens is not None:
        payload["max_tokens"] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    if context.tools:
        # No portable server-tool kinds: Mistral's built-in connectors (web search, code
        # interpreter, image generation, document library) are tools of its Agents and
        # Conversations APIs, not of /v1/chat/completions. A native ServerTool for this
        # API goes in the list as it is.
        native = [t.tool for t in server_tools_of(context.tools) if t.tool is not None]
        payload["tools"] = function_tools(context.tools) + native
        if options.tool_choice is not None:
            payload["tool_choice"] = tool_choice_field(options.tool_choice, _TOOL_CHOICES)
        if options.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = options.parallel_tool_calls
    copy_controls(options, _PLAIN_CONTROLS, payload)
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode == "native":
        payload["response_format"] = json_schema_format(spec)
    if options.reasoning and model.reasoning:
        payload["prompt_mode"] = "reasoning"
    headers = {}
    if options.session_id:
        # Routes a session's requests to the same replica, which keeps its prompt cache.
        headers["x-affinity"] = options.session_id
    return WireRequest(
        url=model.base_url.rstrip("/") + "/v1/chat/completions", payload=payload, headers=headers
    )


def _convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    vision = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        out.append({"role": "system", "content": context.system_prompt})
    messages = prepare_messages(
        context, api=API, provider=model.provider, model_id=model.id, normalize_id=normalize_id
    )
    for m in messages:
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                if m.content.strip():
                    out.append({"role": "user", "content": m.content})
            else:
                parts = _user_parts(m.content, vision=vision)
                if parts:
                    out.append({"role": "user", "content": parts})
        elif isinstance(m, AssistantMessage):
            converted = _assistant(m)
            if converted is not None:
                out.append(converted)
        else:
            out.append(_tool_result(m, vision=vision))
    return out


def _user_parts(content: Sequence[object], *, vision: bool) -> list[Any]:
    parts: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                parts.append({"type": "text", "text": b.text})
        elif isinstance(b, FileContent):
            parts.append(mistral_file_part(b))  # its type was checked at stream()
        elif isinstance(b, VendorContent):
            parts.append(b.data)  # Mistral's own chunk (another API's became text)
        elif not isinstance(b, ImageContent):
            continue  # a block of a type we do not know: kept in the history, never sent
        elif vision:
            parts.append({"type": "image_url", "image_url": f"data:{b.mime_type};base64,{b.data}"})
        else:
            parts.append({"type": "text", "text": IMAGE_OMITTED_TEXT})
    return parts


def _assistant(m: AssistantMessage) -> dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextContent):
            if b.citations:
                parts += reference_parts(b.text, b.citations)
            elif b.text.strip():
                parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ThinkingContent):
            # Only this model's own reasoning is still thinking here (handoff turned the
            # rest into text); redacted reasoning has no Mistral form.
            if b.thinking.strip() and not b.redacted:
                parts.append(
                    {"type": "thinking", "thinking": [{"type": "text", "text": b.thinking}]}
                )
        elif isinstance(b, ToolCall):
            calls.append(
                {
                    "id": b.id,
                    "type": "function",
                    "function": {
                        "name": b.name,
                        "arguments": json.dumps(b.arguments, ensure_ascii=False),
                    },
                }
            )
        elif isinstance(b, VendorContent):
            parts.append(b.data)  # a chunk of Mistral's own, sent back as it came
        else:
            # A block /v1/chat/completions has no chunk for (a server tool's call or
            # result, a file): its text, so nothing is lost.
            as_text = getattr(b, "as_text", None)
            if callable(as_text):
                parts.append({"type": "text", "text": as_text()})
    if not parts and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant"}
    if parts:
        only_text = all(p["type"] == "text" for p in parts)
        out["content"] = "\n\n".join(p["text"] for p in parts) if only_text else parts
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_result(m: ToolResultMessage, *, vision: bool) -> dict[str, Any]:
    text = "\n".join(b.text for b in m.content if isinstance(b, TextContent)).strip()
    images = [b for b in m.content if isinstance(b, ImageContent)]
    if not text:
        text = "(see attached image)" if images and vision else "(no output)"
    if m.is_error:
        text = TOOL_ERROR_PREFIX + text
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [mistral_file_part(b) for b in m.content if isinstance(b, FileContent)]
    if vision:
        content += _user_parts(images, vision=True)
    elif images:
        content.append({"type": "text", "text": IMAGE_OMITTED_TEXT})
    return {"role": "tool", "tool_call_id": m.tool_call_id, "name": m.tool_name, "content": content}


# The Chat Completions translator (and its non-streamed reader) with Mistral's tables.
translator, parse_response = chat_codec(API)

WIRE = WireAPI(
    api=API,
    terminal_event="data: [DONE]",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=lambda model, key: {"authorization": f"Bearer {key}"},
    translator=translator,
    api_key_env=lambda model: "MISTRAL_API_KEY",
    key_required=lambda model: True,
    parse_response=parse_response,
    providers={"mistral": "https://api.mistral.ai"},
    controls=_CONTROLS,
    output_mode=lambda model: "native",
    # `document_url` chunks (a URL or a base64 PDF data URL) and `file` chunks (file ids).
    file_types=frozenset({"application/pdf"}),
)
