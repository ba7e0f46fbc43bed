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
(`_TOOL_MODE_IDS`). It reads no `StreamOptions.extra` keys: a server's own fields go in
through `on_payload`.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic_core import from_json

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    ImageContent,
    Model,
    OutputMode,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    UserMessage,
)
from stream_core.provider import (
    IMAGE_OMITTED_TEXT,
    TOOL_ERROR_PREFIX,
    Assembler,
    OutputSpec,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    copy_controls,
    error_from_vendor,
    function_tools,
    id_normalizer,
    optional_field,
    output_spec,
    parse_json,
    prepare_messages,
    required_field,
    vendor_error_fields,
)

from ._azure import azure_base_url, is_azure

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
_USAGE_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "prompt": (("prompt_tokens",),),
    "completion": (("completion_tokens",),),
    "total": (("total_tokens",),),
    "cached": (
        ("prompt_tokens_details", "cached_tokens"),
        ("prompt_cache_hit_tokens",),  # DeepSeek
        ("cached_tokens",),
    ),
    "cache_write": (("prompt_tokens_details", "cache_write_tokens"),),  # OpenRouter
    "reasoning": (
        ("completion_tokens_details", "reasoning_tokens"),
        ("reasoning_tokens",),  # Azure AI Foundry
    ),
}

# Reasoning text arrives under one of these delta fields; only the first present is used
# (some servers send the same text under two names).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_REASONING_SET = frozenset(_REASONING_FIELDS)

# Reasoning signatures a server carries next to that text, and takes back on the assistant
# message from the same model: OpenRouter's `reasoning_details` (text, summary or encrypted
# items, each with an `index`) and LiteLLM's Anthropic-shaped `thinking_blocks`. Streamed
# as fragments; these string fields are concatenated per item, the others keep their last
# value (a signature arrives whole).
_SIGNATURE_FIELDS = ("reasoning_details", "thinking_blocks")
_CONCATENATED = frozenset({"text", "summary", "thinking"})

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
_TOOL_CHOICES: dict[str, str] = {"auto": "auto", "none": "none", "required": "required"}

# Models (id, after any `vendor/` prefix) that predate `json_schema` response formats: their
# structured answers come through a forced tool.
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
        base_url="https://api.deepseek.com", env="DEEPSEEK_API_KEY", response_format="json_object"
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


def tool_choice_field(
    choice: ToolChoice, names: Mapping[str, str] = _TOOL_CHOICES
) -> str | dict[str, Any]:
    """`StreamOptions.tool_choice` in the Chat Completions shape: a named tool as a function
    choice, a string by `names` (an API's own words)."""
    if isinstance(choice, dict):
        return {"type": "function", "function": {"name": choice["tool"]}}
    return names[choice]


def json_schema_format(spec: OutputSpec) -> dict[str, Any]:
    """`response_format` asking for an answer matching `spec`'s schema."""
    schema: dict[str, Any] = {"name": spec.name, "schema": spec.schema, "strict": spec.strict}
    if spec.description:
        schema["description"] = spec.description
    return {"type": "json_schema", "json_schema": schema}


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
        payload["tools"] = function_tools(context.tools)
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
            # Tool messages take text only: their images follow in one user message.
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
            if vision:
                pending_images += _user_parts(
                    [b for b in m.content if isinstance(b, ImageContent)], vision=True
                )
            has_image = any(isinstance(b, ImageContent) for b in m.content)
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
    text = "\n\n".join(b.text for b in m.content if isinstance(b, TextContent) and b.text.strip())
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
    out.update(signatures)
    return out


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
            for name in _SIGNATURE_FIELDS:
                if isinstance(kept.get(name), list):
                    out.setdefault(name, []).extend(kept[name])
    return out


# --- response -----------------------------------------------------------------------------

_TEXT, _THINKING = "text", "thinking"


def _translator(asm: Assembler) -> Translator:
    last_tool: list[Hashable] = [("tool", 0)]
    details = _ReasoningDetails(asm)

    def on_event(event: str, data: str) -> None:
        if data == "[DONE]":
            details.settle()
            asm.finished = True
            return
        where = "chunk" if event in ("", "message") else event  # "message": SSE's default
        # Each field is type-checked inline, and the typed helper called only to raise:
        # a helper call per field would cost more than the rest of the chunk's work.
        try:
            chunk = from_json(data, allow_inf_nan=False)
        except ValueError:
            chunk = parse_json(data, where)  # raises, naming the event
        if type(chunk) is not dict:
            as_object(chunk, where)
        usage = chunk.get("usage")
        if usage is not None and type(usage) is not dict:
            optional_field(chunk, "usage", dict, where)
        if usage is None and "x_groq" in chunk:  # older Groq streams put usage only here
            groq = optional_field(chunk, "x_groq", dict, where) or {}
            usage = optional_field(groq, "usage", dict, where + ".x_groq")
        error = chunk.get("error")
        if error or event == "error":
            _fail(asm, chunk, error, usage)
        if asm.message.response_id is None:
            # Read once: the first chunk names the response and the served model.
            asm.set_response_id(optional_field(chunk, "id", str, where))
            asm.set_response_model(chunk.get("model"))
        choices = chunk.get("choices")
        if choices:
            at = _CHOICE if where == "chunk" else where + ".choices[0]"
            if type(choices) is not list:
                optional_field(chunk, "choices", list, where)
            choice = choices[0]
            if type(choice) is not dict:
                as_object(choice, at)
            delta = choice.get("delta")
            if delta:
                if type(delta) is not dict:
                    optional_field(choice, "delta", dict, at)
                _delta(asm, delta, last_tool)
                if "reasoning_details" in delta or "thinking_blocks" in delta:
                    details.add(delta)
            elif delta is not None and type(delta) is not dict:
                optional_field(choice, "delta", dict, at)
            finish = choice.get("finish_reason")
            if finish is not None:
                if type(finish) is not str:
                    optional_field(choice, "finish_reason", str, at)
                if finish:
                    asm.set_stop_reason(finish)
            if not usage:
                # Moonshot puts it on the choice
                usage = choice.get("usage")
                if usage is not None and type(usage) is not dict:
                    optional_field(choice, "usage", dict, at)
        elif choices is not None and type(choices) is not list:
            optional_field(chunk, "choices", list, where)
        if usage:
            _usage(asm, usage)

    return on_event


def _fail(asm: Assembler, chunk: dict[str, Any], error: Any, usage: Any) -> None:
    """A vendor error chunk (`{"error": ...}` or `event: error`): keep its usage, then end."""
    if usage:
        _usage(asm, usage)
    vendor_type, message = vendor_error_fields(chunk)
    code = error.get("code") if isinstance(error, dict) else None
    # Proxies send the upstream status as a string ("500"); error_from_vendor reads both.
    status = code if type(code) in (int, str) else None
    raise StreamFailure(error_from_vendor(vendor_type, message, status=status))


_CHOICE = "chunk.choices[0]"
_DELTA = "chunk.choices[0].delta"
_TOOL_CALLS = "chunk.choices[0].delta.tool_calls[]"
_PARTS = "chunk.choices[0].delta.content[]"
_THOUGHT_PARTS = "chunk.choices[0].delta.content[].thinking[]"


def _delta(asm: Assembler, delta: dict[str, Any], last_tool: list[Hashable]) -> None:
    # One delta may carry reasoning, text and tool calls together; they go in that order.
    # Fields are type-checked inline; the typed helpers are called only to raise.
    if not _REASONING_SET.isdisjoint(delta):
        for name in _REASONING_FIELDS:
            reasoning = optional_field(delta, name, str, _DELTA)
            if reasoning:
                if asm.is_open(_TEXT):
                    asm.end(_TEXT)
                asm.thinking(_THINKING, reasoning, signature=name)
                break
    content = delta.get("content")
    if content:
        if type(content) is str:
            if asm.is_open(_THINKING):
                asm.end(_THINKING)
            asm.text(_TEXT, content)
        elif type(content) is list:  # Mistral-style typed parts
            _content_parts(asm, content)
        else:
            required_field(delta, "content", str, _DELTA)
    refusal = delta.get("refusal")
    if refusal:
        if type(refusal) is not str:
            optional_field(delta, "refusal", str, _DELTA)
        # OpenAI puts a refusal in its own field and still says `stop`: kept as text, and
        # the message ends as an error of kind refusal (CONTRACT 3.1).
        asm.text(_TEXT, refusal)
        asm.set_stop_reason(None, detail="refusal", rule="refusal")
    elif refusal is not None and type(refusal) is not str:
        optional_field(delta, "refusal", str, _DELTA)
    tool_calls = delta.get("tool_calls")
    if tool_calls is None:
        return
    if type(tool_calls) is not list:
        optional_field(delta, "tool_calls", list, _DELTA)
    at = _TOOL_CALLS  # one name for every call: no string built per delta
    for tc in tool_calls:
        if type(tc) is not dict:
            as_object(tc, at)
        index = tc.get("index")
        if index is not None and type(index) is not int:
            optional_field(tc, "index", int, at)
        call_id = tc.get("id")
        if call_id is not None and type(call_id) is not str:
            optional_field(tc, "id", str, at)
        if not call_id or call_id == "null":  # placeholder ids some servers send
            call_id = None
        key: Hashable
        if index is not None:
            key = ("tool", index)
        elif call_id is not None:
            key = ("tool-id", call_id)
        else:
            key = last_tool[0]
        if not asm.is_open(key):
            # A call begins: the text or reasoning before it is complete.
            asm.end(_TEXT)
            asm.end(_THINKING)
        fn = tc.get("function")
        if fn is None:
            fn = {}
        elif type(fn) is not dict:
            optional_field(tc, "function", dict, at)
        args: Any = fn.get("arguments")
        if args is None:
            args = ""
        elif type(args) is dict:  # a server sending the arguments as an object
            args = json.dumps(args, ensure_ascii=False)
        elif type(args) is not str:
            optional_field(fn, "arguments", str, at + ".function")
        name = fn.get("name")
        if name is not None and type(name) is not str:
            optional_field(fn, "name", str, at + ".function")
        asm.tool_call(key, args, id=call_id, name=name)
        last_tool[0] = key


class _ReasoningDetails:
    """Collects `_SIGNATURE_FIELDS` fragments per thinking block, merged by item `index`
    (or type), and stores them on the block as the JSON signature `{field: [items]}` when
    the answer is complete (`settle`): once, not per fragment."""

    def __init__(self, asm: Assembler) -> None:
        self._asm = asm
        # (block, wire field, items by merge key), one entry per block and field.
        self._kept: list[tuple[ThinkingContent, str, dict[Hashable, dict[str, Any]]]] = []

    def add(self, delta: dict[str, Any]) -> None:
        for name in _SIGNATURE_FIELDS:
            items = delta.get(name)
            if items and isinstance(items, list):
                self._merge(name, items)

    def _merge(self, name: str, items: list[Any]) -> None:
        asm = self._asm
        block = asm.block(_THINKING)
        if not isinstance(block, ThinkingContent):
            # The turn's reasoning, already ended by text or a call in this same delta.
            block = self._kept[-1][0] if self._kept else _last_thinking(asm.message)
            if block is None:
                # Encrypted reasoning with no readable text: a block holds it all the same.
                asm.start_thinking(_THINKING)
                block = asm.block(_THINKING)
                assert isinstance(block, ThinkingContent)
        if not self._kept or self._kept[-1][0] is not block or self._kept[-1][1] != name:
            self._kept.append((block, name, {}))
        merged = self._kept[-1][2]
        for item in items:
            if not isinstance(item, dict):
                continue
            index = item.get("index")
            key: Hashable = index if type(index) is int else ("type", str(item.get("type")))
            into = merged.get(key)
            if into is None:
                merged[key] = dict(item)
                continue
            for field, value in item.items():
                if value is None or value == "":
                    continue
                old = into.get(field)
                if field in _CONCATENATED and isinstance(old, str) and isinstance(value, str):
                    # Popped so the string has one reference and grows in place.
                    old = into.pop(field)
                    old += value
                    into[field] = old
                else:
                    into[field] = value

    def settle(self) -> None:
        by_block: dict[int, tuple[ThinkingContent, dict[str, list[Any]]]] = {}
        for block, name, merged in self._kept:
            entry = by_block.setdefault(id(block), (block, {}))
            entry[1].setdefault(name, []).extend(merged.values())
        for block, fields_ in by_block.values():
            block.signature = json.dumps(fields_, ensure_ascii=False)
        self._kept.clear()


def _last_thinking(message: AssistantMessage) -> ThinkingContent | None:
    return next((b for b in reversed(message.content) if isinstance(b, ThinkingContent)), None)


def _content_parts(asm: Assembler, parts: list[Any]) -> None:
    at = _PARTS  # one name for every part: no string built per delta
    for item in parts:
        if type(item) is not dict:
            continue  # a part of a kind we do not know
        part: dict[str, Any] = item
        ptype = optional_field(part, "type", str, at)
        if ptype == "thinking":
            inner = part.get("thinking")
            if type(inner) is list:
                thought = "".join(
                    optional_field(p, "text", str, _THOUGHT_PARTS) or ""
                    for p in inner
                    if type(p) is dict
                )
            else:
                thought = optional_field(part, "thinking", str, at) or ""
            if thought:
                asm.end(_TEXT)
                asm.thinking(_THINKING, thought, signature="thinking")
        else:
            text = optional_field(part, "text", str, at)
            if text:
                asm.end(_THINKING)
                asm.text(_TEXT, text)


def _find(usage: dict[str, Any], paths: tuple[tuple[str, ...], ...]) -> int | None:
    for path in paths:
        value: dict[str, Any] | None = usage
        where = "usage"
        for part in path[:-1]:
            value = optional_field(value, part, dict, where) if value is not None else None
            where += "." + part
        found = optional_field(value, path[-1], int, where) if value is not None else None
        if found is not None:
            return found
    return None


def _usage(asm: Assembler, usage: dict[str, Any]) -> None:
    got = {name: _find(usage, paths) for name, paths in _USAGE_PATHS.items()}
    prompt, completion = got["prompt"], got["completion"]
    if prompt is None and completion is None:
        return
    cached, cache_write = got["cached"] or 0, got["cache_write"] or 0
    reasoning, total = got["reasoning"] or 0, got["total"]
    output = completion or 0
    # Vendors differ on whether completion_tokens includes reasoning; the total settles it
    # (xAI: total = prompt + completion + reasoning, so reasoning is extra).
    if reasoning and total is not None and total == (prompt or 0) + output + reasoning:
        output += reasoning
    asm.set_usage(
        input=max(0, (prompt or 0) - cached - cache_write),
        output=output,
        cache_read=cached,
        cache_write=cache_write,
        reasoning=reasoning,
    )


def _parse_response(asm: Assembler, obj: Any) -> None:
    """A whole `chat.completion` (a proxy or server that ignored `stream: true`): its
    message is read as one delta, so it gives the same events as a stream in one piece."""
    body = as_object(obj, "response")
    usage = optional_field(body, "usage", dict, "response")
    error = body.get("error")
    if error:
        _fail(asm, body, error, usage)
    asm.set_response_id(optional_field(body, "id", str, "response"))
    asm.set_response_model(body.get("model"))
    choices = required_field(body, "choices", list, "response")
    if choices:
        choice = as_object(choices[0], "response.choices[0]")
        message = optional_field(choice, "message", dict, "response.choices[0]")
        if message:
            calls = optional_field(message, "tool_calls", list, "response.choices[0].message")
            if calls:
                # A whole answer numbers its calls by position only; give each its own key
                # so calls without ids do not merge.
                message = {
                    **message,
                    "tool_calls": [
                        {**tc, "index": i} if isinstance(tc, dict) and "index" not in tc else tc
                        for i, tc in enumerate(calls)
                    ],
                }
            details = _ReasoningDetails(asm)
            _delta(asm, message, [("tool", 0)])
            details.add(message)
            details.settle()
        asm.end_all()
        asm.set_stop_reason(optional_field(choice, "finish_reason", str, "response.choices[0]"))
        usage = usage or optional_field(choice, "usage", dict, "response.choices[0]")
    if usage:
        _usage(asm, usage)
    asm.finished = True


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
    translator=_translator,
    api_key_env=lambda model: compat_for(model).env,
    key_required=lambda model: compat_for(model).key_required,
    compat=Compat,
    base_url_env={Compat.base_url: "OPENAI_BASE_URL"},
    providers={name: row.base_url for name, row in COMPAT.items()},
    parse_response=_parse_response,
    controls=_CONTROLS,
    output_mode=_output_mode,
)
