"""OpenAI Chat Completions and the servers that copy it (`POST {base}/chat/completions`).

Chunks are `data: {json}` lines ending with `data: [DONE]`. Text comes in
`delta.content`; reasoning in `reasoning_content` (DeepSeek, Qwen, z.ai), `reasoning`
(vLLM, Groq, OpenRouter) or `reasoning_text`; tool calls in `delta.tool_calls[]`, keyed by
`index` (and `id`: a server that reuses one index for several calls still gets them
apart). Usage is a cumulative snapshot, usually on a last chunk with empty `choices`.

Servers differ; the differences are the `COMPAT` table below, one row per server, which
`Model.compat` overrides field by field.

Portable controls (`_CONTROLS` below) map to the request fields of the same name; `top_k`
only where the server's compat row says it takes one. A structured answer is asked as
`response_format` `json_schema`, or `json_object` with the schema in the system prompt, or
one forced tool, per the server's `response_format` compat flag and the model
(`# Models (id, after any `vendor/` prefix) that predate `json_schema` response formats: their
# structured answers come through a forced tool.
_TOOL_MODE_IDS`). It reads no `StreamOptions.extra` keys: a server's own fields go in
through `on_payload`.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    FileContent,
    ImageContent,
    Model,
    OutputMode,
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
    OutputSpec,
    StopRule,
    WireAPI,
    WireRequest,
    copy_controls,
    function_tools,
    id_normalizer,
    output_spec,
    prepare_messages,
    server_tools_of,
)

from ._azure import azure_base_url, is_azure
from ._chat_citations import file_part
from ._openai_chat import (
    SIGNATURE_FIELDS,
    json_schema_format,
    parse_response,
    tool_choice_field,
    translator,
)

API = "openai-completions"

_STOP_REASONS: dict[str, StopRule] = {
    "stop": "stop",
    "end": "stop",
    "eos": "stop",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "model_context_window_exceeded": "length",  # z.ai: the window filled while generating
    "content_filter": "content_filter",
    "sensitive": "content_filter",
}

# Where each usage number may sit; the first path present wins.
# Portable control -> the request field it becomes (the README's table).
_CONTROLS: dict[str, str] = {
    "tool_choice": '`tool_choice`: "auto", "none", "required", '
    '{"type": "function", "function": {"name": ...}} (sent with tools only)',
    "parallel_tool_calls": "`parallel_tool_calls` (sent with tools only)",
    "stop": "`stop` (list)",
    "top_p": "`top_p`",
    "top_k": "`top_k`, on servers whose compat sets `top_k` (vLLM, Together, OpenRouter, "
    "llama.cpp); elsewhere an error",
    "seed": "`seed`",
    "presence_penalty": "`presence_penalty`",
    "frequency_penalty": "`frequency_penalty`",
    "output_schema": '`response_format` {"type": "json_schema", ...}; {"type": "json_object"} '
    "with the schema in the system prompt, or a forced tool, per compat `response_format`",
}

# Controls sent as they are, under these field names.
_PLAIN_CONTROLS: dict[str, str] = {
    "stop": "stop",
    "top_p": "top_p",
    "seed": "seed",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}

# `StreamOptions.tool_choice` strings as Chat Completions spells them.
_TOOL_MODE_IDS: tuple[str, ...] = ("gpt-3.5*", "gpt-4", "gpt-4-0613", "gpt-4-turbo*")

# Compat `response_format` -> how a structured answer is asked for.
_OUTPUT_MODES: dict[str, OutputMode] = {
    "json_schema": "native",
    "json_object": "json_object",
    "none": "tool",
}


@dataclass(frozen=True)
class Compat:
    """How one OpenAI-compatible server differs. Each field's default is the common case."""

    base_url: str = "https://api.openai.com/v1"
    env: str | None = None
    """Environment variable with the API key."""
    key_required: bool = True
    """False for local servers, which take requests without a key."""
    include_usage: bool = True
    """Send `stream_options.include_usage` (some servers reject the field)."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_tokens"
    developer_role: bool = False
    """System prompt as role `developer` for reasoning models (OpenAI o-series, GPT-5)."""
    reasoning_effort: bool = False
    """Send `reasoning_effort` when reasoning is asked for."""
    auth: Literal["bearer", "api-key"] = "bearer"
    """`Authorization: Bearer <key>`, or Azure's `api-key: <key>` header."""
    empty_content: Literal["string", "null", "omit"] = "string"
    """`content` of an assistant turn that has tool calls and no text: `""` (accepted by
    OpenAI, vLLM, llama.cpp, Ollama, LM Studio, and llama-cpp-python, which answers a
    `null` with a 500), `null`, or no key at all."""
    top_k: bool = False
    """The server takes a top-level `top_k` (not OpenAI's API; vLLM, Together, OpenRouter and
    llama.cpp's server do). Without it `StreamOptions.top_k` raises."""
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"
    """What `response_format` the server takes for a structured answer: a JSON Schema, plain
    JSON mode (the schema goes in the system prompt), or none (a forced tool is used)."""
    reasoning_content: bool = False
    """Every assistant turn goes back with a `reasoning_content` string: the model's own
    reasoning, or "" (another model's turn, a turn without any). DeepSeek's thinking mode
    refuses a tool loop whose turns lack it ("Missing `reasoning_content` field"); OpenAI
    refuses the unknown field, so it is off by default."""


COMPAT: dict[str, Compat] = {
    "openai": Compat(
        env="OPENAI_API_KEY",
        max_tokens_field="max_completion_tokens",
        developer_role=True,
        reasoning_effort=True,
    ),
    "azure-openai": Compat(
        base_url="https://RESOURCE.openai.azure.com/openai/v1",
        env="AZURE_OPENAI_API_KEY",
        max_tokens_field="max_completion_tokens",
        developer_role=True,
        reasoning_effort=True,
        auth="api-key",
    ),
    "groq": Compat(
        base_url="https://api.groq.com/openai/v1",
        env="GROQ_API_KEY",
        max_tokens_field="max_completion_tokens",
    ),
    "xai": Compat(base_url="https://api.x.ai/v1", env="XAI_API_KEY", reasoning_effort=True),
    "deepseek": Compat(
        base_url="https://api.deepseek.com",
        env="DEEPSEEK_API_KEY",
        response_format="json_object",
        reasoning_content=True,
    ),
    "openrouter": Compat(
        base_url="https://openrouter.ai/api/v1", env="OPENROUTER_API_KEY", top_k=True
    ),
    "cerebras": Compat(
        base_url="https://api.cerebras.ai/v1",
        env="CEREBRAS_API_KEY",
        max_tokens_field="max_completion_tokens",
    ),
    "together": Compat(base_url="https://api.together.xyz/v1", env="TOGETHER_API_KEY", top_k=True),
    "fireworks": Compat(base_url="https://api.fireworks.ai/inference/v1", env="FIREWORKS_API_KEY"),
    "vllm": Compat(
        base_url="http://localhost:8000/v1", env="VLLM_API_KEY", key_required=False, top_k=True
    ),
    "lmstudio": Compat(base_url="http://localhost:1234/v1", key_required=False),
    "llama.cpp": Compat(base_url="http://localhost:8080/v1", key_required=False, top_k=True),
    "ollama": Compat(base_url="http://localhost:11434/v1", key_required=False),
}

# A model whose provider is not a row above is matched by its base URL's host.
_HOSTS: dict[str, str] = {
    "api.openai.com": "openai",
    "openai.azure.com": "azure-openai",
    "api.groq.com": "groq",
    "api.x.ai": "xai",
    "api.deepseek.com": "deepseek",
    "openrouter.ai": "openrouter",
    "api.cerebras.ai": "cerebras",
    "api.together.xyz": "together",
    "api.fireworks.ai": "fireworks",
    ":11434": "ollama",
    ":1234": "lmstudio",
}

_normalize_id = id_normalizer(allowed=r"A-Za-z0-9_-", max_length=40)


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


def compat_for(model: Model) -> Compat:
    """The provider's row (or the one its host matches), overlaid by `model.compat`."""
    row = COMPAT.get(model.provider)
    if row is None:
        host = next((p for h, p in _HOSTS.items() if h in model.base_url), None)
        row = (
            COMPAT[host]
            if host
            else Compat(
                env=re.sub(r"[^A-Z0-9]", "_", model.provider.upper()) + "_API_KEY",
                key_required=False,
            )
        )
    # Keys and types were checked when the stream was opened (`WireAPI.compat`).
    return replace(row, **model.compat) if model.compat else row


def _output_mode(model: Model) -> OutputMode:
    mode = _OUTPUT_MODES[compat_for(model).response_format]
    name = model.id.rsplit("/", 1)[-1]
    if mode == "native" and any(fnmatch.fnmatchcase(name, p) for p in _TOOL_MODE_IDS):
        return "tool"
    return mode


# --- request ------------------------------------------------------------------------------


def with_instruction(context: Context, spec: OutputSpec) -> Context:
    """The context with `spec`'s JSON instruction appended to its system prompt."""
    system = "\n\n".join(p for p in (context.system_prompt, spec.instruction()) if p)
    return context.model_copy(update={"system_prompt": system})


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    compat = compat_for(model)
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode == "json_object":
        context = with_instruction(context, spec)
    payload: dict[str, Any] = {
        "model": model.id,
        "messages": _convert_messages(model, context, compat),
        "stream": True,
    }
    if compat.include_usage:
        payload["stream_options"] = {"include_usage": True}
    if options.max_tokens is not None:
        payload[compat.max_tokens_field] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    if context.tools:
        # No portable server-tool kinds (WIRE.server_tools is empty): OpenAI's search
        # models take `web_search_options`, a request field, not a tool; a server's own
        # tool objects (ServerTool.native for this API) go in the list as they are.
        native = [t.tool for t in server_tools_of(context.tools) if t.tool is not None]
        payload["tools"] = function_tools(context.tools) + native
        if options.tool_choice is not None:
            payload["tool_choice"] = tool_choice_field(options.tool_choice)
        if options.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = options.parallel_tool_calls
    copy_controls(options, _PLAIN_CONTROLS, payload)
    if options.top_k is not None:
        if not compat.top_k:
            raise ValueError(
                f"StreamOptions.top_k: {API} sends top_k only to servers that take it, and "
                f"this endpoint ({model.provider}) is not marked so; set "
                "Model.compat={'top_k': True} if it is"
            )
        payload["top_k"] = options.top_k
    if spec is not None and spec.mode == "native":
        payload["response_format"] = json_schema_format(spec)
    elif spec is not None and spec.mode == "json_object":
        payload["response_format"] = {"type": "json_object"}
    if options.reasoning and model.reasoning and compat.reasoning_effort:
        payload["reasoning_effort"] = options.reasoning
    if options.session_id and compat is COMPAT.get("openai"):
        payload["prompt_cache_key"] = options.session_id
    base = azure_base_url(model) if is_azure(model) else model.base_url.rstrip("/")
    return WireRequest(url=base + "/chat/completions", payload=payload)


def _convert_messages(model: Model, context: Context, compat: Compat) -> list[dict[str, Any]]:
    vision = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        role = "developer" if model.reasoning and compat.developer_role else "system"
        out.append({"role": role, "content": context.system_prompt})
    messages = prepare_messages(
        context, api=API, provider=model.provider, model_id=model.id, normalize_id=_normalize_id
    )
    pending_images: list[dict[str, Any]] = []
    for m in messages:
        if not isinstance(m, ToolResultMessage) and pending_images:
            # Tool messages take text only: their images and files follow in one user
            # message.
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Attached image(s) from tool result:"},
                        *pending_images,
                    ],
                }
            )
            pending_images = []
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                if m.content.strip():
                    out.append({"role": "user", "content": m.content})
            else:
                parts = _user_parts(m.content, vision=vision)
                if parts:
                    out.append({"role": "user", "content": parts})
        elif isinstance(m, AssistantMessage):
            converted = _assistant(m, compat)
            if converted is not None:
                out.append(converted)
        else:
            text = "\n".join(b.text for b in m.content if isinstance(b, TextContent))
            pending_images += _user_parts(
                [
                    b
                    for b in m.content
                    if isinstance(b, FileContent) or (vision and isinstance(b, ImageContent))
                ],
                vision=True,
            )
            has_image = any(isinstance(b, (ImageContent, FileContent)) for b in m.content)
            text = text or ("(see attached image)" if has_image else "(no output)")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m.tool_call_id,
                    "content": TOOL_ERROR_PREFIX + text if m.is_error else text,
                }
            )
    if pending_images:
        out.append(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Attached image(s) from tool result:"},
                    *pending_images,
                ],
            }
        )
    return out


def _user_parts(content: list[Any], *, vision: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                parts.append({"type": "text", "text": b.text})
        elif isinstance(b, FileContent):
            parts.append(file_part(b, API))  # its type was checked at stream()
        elif isinstance(b, VendorContent):
            # This API's own part (another API's became text in prepare_messages).
            parts.append(b.data)
        elif not isinstance(b, ImageContent):
            continue  # UnknownContent: kept in the history, never sent
        elif vision:
            url = f"data:{b.mime_type};base64,{b.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": IMAGE_OMITTED_TEXT})
    return parts


def _assistant(m: AssistantMessage, compat: Compat) -> dict[str, Any] | None:
    # Same-model thinking text has no wire form here (handoff already turned other models'
    # thinking into text); it is left out, but its signatures go back (`_signatures`).
    # Text goes as it is, without its citations: this vendor made them (Perplexity's
    # sources, url_citation annotations) and an assistant message has no field for them.
    # What else the vendor sent (a server-run tool and its result, a generated image, a
    # field kept verbatim) has no field either: it goes as its text, so nothing is lost.
    text = "\n\n".join(piece for b in m.content if (piece := _assistant_text(b)).strip())
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.arguments, ensure_ascii=False)},
        }
        for b in m.content
        if isinstance(b, ToolCall)
    ]
    signatures = _signatures(m)
    if not text and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant"}
    if text:
        out["content"] = text
    elif compat.empty_content != "omit":
        out["content"] = "" if compat.empty_content == "string" else None
    if calls:
        out["tool_calls"] = calls
    if compat.reasoning_content:
        # Only the same model's thinking is still a thinking block here (handoff made
        # another model's text).
        own = (b.thinking for b in m.content if isinstance(b, ThinkingContent) and not b.redacted)
        out["reasoning_content"] = "".join(own)
    out.update(signatures)
    return out


def _assistant_text(block: object) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, (ThinkingContent, ToolCall)):
        return ""
    as_text = getattr(block, "as_text", None)
    return as_text() if callable(as_text) else ""


def _signatures(m: AssistantMessage) -> dict[str, list[Any]]:
    """The reasoning signatures kept on the thinking blocks (see `_ReasoningDetails`), by
    wire field. Only same-model turns still hold thinking blocks here."""
    out: dict[str, list[Any]] = {}
    for b in m.content:
        if not isinstance(b, ThinkingContent) or not (b.signature or "").startswith("{"):
            continue
        try:
            kept = json.loads(b.signature or "")
        except ValueError:
            continue
        if isinstance(kept, dict):
            for name in SIGNATURE_FIELDS:
                if isinstance(kept.get(name), list):
                    out.setdefault(name, []).extend(kept[name])
    return out


def _auth_headers(model: Model, key: str) -> dict[str, str]:
    if compat_for(model).auth == "api-key":
        return {"api-key": key}
    return {"authorization": f"Bearer {key}"}


WIRE = WireAPI(
    api=API,
    terminal_event="data: [DONE]",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=_auth_headers,
    translator=translator,
    api_key_env=lambda model: compat_for(model).env,
    key_required=lambda model: compat_for(model).key_required,
    compat=Compat,
    base_url_env={Compat.base_url: "OPENAI_BASE_URL"},
    providers={name: row.base_url for name, row in COMPAT.items()},
    parse_response=parse_response,
    controls=_CONTROLS,
    output_mode=_output_mode,
    # Chat Completions' `file` content part; images stay `ImageContent`.
    file_types=frozenset({"application/pdf"}),
)
