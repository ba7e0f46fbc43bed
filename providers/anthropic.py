"""Anthropic Messages API (`POST /v1/messages`, SSE with named events).

Usage arrives as cumulative snapshots: `message_start` has input and cache numbers,
`message_delta` repeats or updates them (proxies may omit or null a field, which then
keeps its earlier value), with `server_tool_use` request counts (`Usage.server_tools`).
Server-side tool calls and results, citations, generated files and any block this version
does not type are kept (`_anthropic_blocks`), and go back in the next request as they came
with the container of the last answer (`container`); user files go as `document` blocks.
`ServerTool` kinds: web search, web fetch, code execution, tool search (`SERVER_TOOLS`).

Request controls (`WIRE.controls`): `tool_choice` becomes `tool_choice.type` (`auto`, `any`
for "required", `tool` with a name, `none`), sent only with tools; `parallel_tool_calls=False`
adds `disable_parallel_tool_use` to it. Anthropic refuses a forced tool (`any`/`tool`) with
extended thinking, so that pair raises at `stream()`, as does `top_k` (or a `top_p` below
0.95) with thinking. `stop` -> `stop_sequences`, `top_p`, `top_k`; no seed, no penalties.
`output_schema`: `output_config.format` (`json_schema`) on the models that have structured
outputs (Opus 4.1, the 4.5 generation and later, see `_native_output`), the schema's objects
closed with `additionalProperties: false` as Anthropic requires; the older beta shape
(`output_format` and the `structured-outputs-2025-11-13` beta) with
`Model.compat={"structured_output_beta": True}`; other models get the forced tool.

`StreamOptions.extra`: none (vendor-only fields go through `on_payload`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stream_core import (
    AssistantStream,
    Context,
    ErrorKind,
    Model,
    StreamOptions,
)
from stream_core.provider import (
    ADAPTIVE_EFFORTS,
    Assembler,
    OutputSpec,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    closed_schema,
    error_from_vendor,
    function_tools_of,
    long_cache_honored,
    optional_field,
    output_spec,
    parse_json,
    refuse_forced_tool,
    required_field,
    server_tool_objects,
    shape,
    thinking_mode,
    vendor_error_fields,
)

from ._anthropic_blocks import (
    FILE_TYPES,
    SERVER_TOOLS,
    BlockReader,
    read_citation,
    server_tool_counts,
    tool_betas,
)
from ._anthropic_messages import convert_messages, loop_allows_thinking
from ._claude import (
    claude_schema,
    claude_version,
    fit_thinking_budget,
    thinking_top_p_problem,
)
from ._vertex import ANTHROPIC_VERTEX, vertex_base_url, vertex_token

API = "anthropic-messages"

_STOP_REASONS: dict[str, StopRule] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # a server tool paused the turn; the caller resends to continue
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",  # output cut because the window filled
    "refusal": "refusal",
}

# An `error` event's `error.type` (https://docs.anthropic.com/en/api/errors); the first type
# for a kind is the one `vendor_bytes` writes (stream_core/testing/_codec.py) and the
# dialect's encoder sends (`_anthropic_encode`).
ERROR_TYPES: dict[str, ErrorKind] = {
    "invalid_request_error": "invalid_request",
    "authentication_error": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "request_too_large": "context_overflow",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "timeout_error": "timeout",
    "overloaded_error": "overloaded",
}

# Our usage field <- Anthropic's (snapshots: a later non-null value replaces). The dialect's
# encoder (`_anthropic_encode`) writes them from the same table, and `reasoning` as
# `REASONING_FIELD` (object, field).
USAGE_FIELDS: dict[str, str] = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_write": "cache_creation_input_tokens",
}
REASONING_FIELD = ("output_tokens_details", "thinking_tokens")

_BASE_URL = "https://api.anthropic.com"
_VERSION = "2023-06-01"
_VERTEX_VERSION = "vertex-2023-10-16"
"""The `anthropic_version` Vertex AI takes in the body (https://docs.anthropic.com/en/api/
claude-on-vertex-ai)."""
_BETAS = ("fine-grained-tool-streaming-2025-05-14",)
_THINKING_BETA = "interleaved-thinking-2025-05-14"
_STRUCTURED_OUTPUT_BETA = "structured-outputs-2025-11-13"

# Portable control -> the Messages API field it becomes (README table).
_CONTROLS: dict[str, str] = {
    "tool_choice": "tool_choice: auto / any / tool+name / none",
    "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    "stop": "stop_sequences",
    "top_p": "top_p",
    "top_k": "top_k",
    "output_schema": "output_config.format json_schema (forced tool on older models)",
}
# StreamOptions.tool_choice -> Anthropic's tool_choice object ({"tool": name} is built).
TOOL_CHOICES: dict[str, dict[str, Any]] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}


@dataclass(frozen=True)
class Compat:
    """`Model.compat` flags for the Messages API."""

    structured_output_beta: bool = False
    """Ask for structured output in the beta shape (`output_format` and the
    `structured-outputs-2025-11-13` beta header), for endpoints without the GA
    `output_config.format` yet."""
    project: str | None = None
    """Claude on Vertex AI (`anthropic-vertex`): the project (else `GOOGLE_CLOUD_PROJECT`)."""
    location: str | None = None
    """Claude on Vertex AI: the location (else `GOOGLE_CLOUD_LOCATION`, else `global`)."""


def _native_output(model: Model) -> bool:
    """Structured outputs: Claude Opus 4.1 and the 4.5 generation onward."""
    version = claude_version(model.id)
    if version is None:
        return False
    family, major, minor = version
    return (major, minor) >= (4, 5) or (family, major, minor) == ("opus", 4, 1)


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    cache = _cache_control(model, options)
    max_tokens = options.max_tokens or model.max_tokens
    converted = convert_messages(model, context, cache)
    messages = converted.messages
    payload: dict[str, Any] = {
        "model": model.id,
        "max_tokens": max_tokens,
        "stream": True,
        "messages": messages,
    }
    if not payload["messages"]:
        # Raised inside `stream()`: the vendor would only answer 400.
        raise ValueError(
            "context.messages: no message with content to send (Anthropic needs at least "
            "one; empty and whitespace-only messages are left out)"
        )
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache:
            system["cache_control"] = cache
        payload["system"] = [system]
    betas = [*_BETAS, *converted.betas]
    if converted.container is not None:
        payload["container"] = converted.container  # the code-execution sandbox to reuse
    budget = options.thinking_budget() if model.reasoning else None
    if budget is not None and not loop_allows_thinking(messages):
        budget = None
    thinking = budget is not None
    effort = None
    if thinking and thinking_mode(model) == "adaptive":
        # The model decides how much to think; the effort bounds it (no budget, no beta).
        assert options.reasoning is not None
        payload["thinking"] = {"type": "adaptive"}
        effort = ADAPTIVE_EFFORTS[options.reasoning]
    elif budget is not None:
        budget = fit_thinking_budget(budget, max_tokens)
        if max_tokens <= budget:
            payload["max_tokens"] = max_tokens = budget + 1024
        payload["thinking"] = {"type": "enabled", "budget_tokens": budget}
        betas.append(_THINKING_BETA)
    elif options.temperature is not None:
        payload["temperature"] = options.temperature  # not allowed together with thinking
    _sampling(payload, options, thinking=thinking)
    if context.tools:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in function_tools_of(context.tools)
        ]
        tools += server_tool_objects(context.tools, SERVER_TOOLS)
        vertex = model.provider == ANTHROPIC_VERTEX
        betas += [b for b in tool_betas(tools, vertex=vertex) if b not in betas]
        payload["tools"] = tools
        choice = _tool_choice(options, thinking=thinking)
        if choice is not None:
            payload["tool_choice"] = choice
    if isinstance(options.metadata.get("user_id"), str):
        payload["metadata"] = {"user_id": options.metadata["user_id"]}
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode != "tool":
        _output_format(payload, betas, model, spec)
    if effort is not None:
        payload.setdefault("output_config", {})["effort"] = effort
    headers = {"anthropic-version": _VERSION, "anthropic-beta": ",".join(betas)}
    if model.provider == ANTHROPIC_VERTEX:
        # Vertex AI names the model in the URL and the API version in the body.
        del payload["model"], headers["anthropic-version"]
        payload["anthropic_version"] = _VERTEX_VERSION
        base = vertex_base_url(model, options).rstrip("/")
        return WireRequest(
            url=f"{base}/models/{model.id}:streamRawPredict", payload=payload, headers=headers
        )
    return WireRequest(
        url=model.base_url.rstrip("/") + "/v1/messages", payload=payload, headers=headers
    )


def _sampling(payload: dict[str, Any], options: StreamOptions, *, thinking: bool) -> None:
    if options.stop:
        payload["stop_sequences"] = list(options.stop)
    if options.top_k is not None:
        if thinking:
            raise ValueError(
                f"StreamOptions.top_k: {API} takes no top_k while extended thinking is on "
                f"(StreamOptions.reasoning={options.reasoning!r}); drop one of them"
            )
        payload["top_k"] = options.top_k
    if options.top_p is not None:
        problem = thinking_top_p_problem(options.top_p, API, options.reasoning)
        if thinking and problem is not None:
            raise ValueError(problem)
        payload["top_p"] = options.top_p


def _tool_choice(options: StreamOptions, *, thinking: bool) -> dict[str, Any] | None:
    """Anthropic's `tool_choice` object, or None to send none (the vendor's `auto`)."""
    if thinking:
        refuse_forced_tool(
            options, API, f"while extended thinking is on (reasoning={options.reasoning!r})"
        )
    choice = options.tool_choice
    if isinstance(choice, dict):
        out: dict[str, Any] = {"type": "tool", "name": choice["tool"]}
    elif choice is not None:
        out = dict(TOOL_CHOICES[choice])
    elif options.parallel_tool_calls is False:
        out = {"type": "auto"}
    else:
        return None
    if options.parallel_tool_calls is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _output_format(
    payload: dict[str, Any], betas: list[str], model: Model, spec: OutputSpec
) -> None:
    """The native JSON Schema answer: GA `output_config.format`, or the beta shape."""
    fmt = {"type": "json_schema", "schema": claude_schema(closed_schema(spec.schema))}
    if Compat(**model.compat).structured_output_beta:
        payload["output_format"] = fmt
        betas.append(_STRUCTURED_OUTPUT_BETA)
    else:
        payload["output_config"] = {"format": fmt}


def _cache_control(model: Model, options: StreamOptions) -> dict[str, str] | None:
    if options.cache_retention == "none":
        return None
    if options.cache_retention == "long" and long_cache_honored(model):
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


# --- response -----------------------------------------------------------------------------


def _translator(asm: Assembler) -> Translator:
    blocks = BlockReader()  # server calls and results, vendor blocks, citations
    special = blocks.open  # their vendor indices while open (empty on most streams)

    def on_event(event: str, data: str) -> None:
        if event == "ping":
            return
        raw = parse_json(data, event)
        if type(raw) is not dict:
            if event in _OBJECT_EVENTS:
                as_object(raw, event)  # raises, naming the event
            return  # an unknown event of an unknown shape: forward compatibility
        obj: dict[str, Any] = raw
        kind: str | None = event
        if event not in _BLOCK_EVENTS:  # no event name, or one of few a second
            kind = optional_field(obj, "type", str, event or "data") or event
        if kind in _BLOCK_EVENTS:
            kind, index, delta, dtype, text, partial, thinking, signature = _EVENT(obj, kind)
            kind = kind or event
        else:
            index = delta = dtype = text = partial = thinking = signature = None
        if kind == "content_block_delta":
            key = index if index is not None else required_field(obj, "index", int, kind)
            if delta is None:
                required_field(obj, "delta", dict, kind)  # raises: the delta is missing
            where = "content_block_delta.delta"
            if dtype == "text_delta":
                asm.text(
                    key, text if text is not None else required_field(delta, "text", str, where)
                )
            elif dtype == "input_json_delta":
                if special and key in special:
                    blocks.delta(asm, key, delta, dtype)  # a server call's input
                else:
                    asm.tool_call(key, partial or "")
            elif dtype == "thinking_delta":
                if thinking is None:
                    required_field(delta, "thinking", str, where)  # raises
                asm.thinking(key, thinking)
            elif dtype == "signature_delta":
                if signature is None:
                    required_field(delta, "signature", str, where)  # raises
                asm.thinking_signature(key, signature)
            else:  # citations_delta, a vendor block's delta (compaction_delta, ...)
                blocks.delta(asm, key, delta, dtype)
        elif kind == "content_block_start":
            key = index if index is not None else required_field(obj, "index", int, kind)
            _block_start(asm, blocks, key, required_field(obj, "content_block", dict, kind))
        elif kind == "content_block_stop":
            key = index if index is not None else required_field(obj, "index", int, kind)
            if special and key in special:
                blocks.stop(asm, key)
            else:
                asm.end(key)
        elif kind == "message_start":
            body = optional_field(obj, "message", dict, kind) or {}
            asm.set_response_id(optional_field(body, "id", str, "message_start.message"))
            asm.set_response_model(body.get("model"))
            asm.set_container(body.get("container"))
            _usage(asm, optional_field(body, "usage", dict, "message_start.message"), kind)
        elif kind == "message_delta":
            delta = optional_field(obj, "delta", dict, kind) or {}
            where = "message_delta.delta"
            details = optional_field(delta, "stop_details", dict, where) or {}
            where_details = where + ".stop_details"
            asm.set_stop_reason(
                optional_field(delta, "stop_reason", str, where),
                detail=optional_field(details, "explanation", str, where_details)
                or optional_field(details, "category", str, where_details),
            )
            asm.set_container(delta.get("container"))  # the code-execution sandbox
            _usage(asm, optional_field(obj, "usage", dict, kind), kind)
        elif kind == "message_stop":
            asm.finished = True
        elif kind == "error":
            vendor_type, message = vendor_error_fields(obj)
            raise StreamFailure(error_from_vendor(vendor_type, message, extra_kinds=ERROR_TYPES))

    return on_event


# What a block event is read for, in one call: its type, index, and a delta's fields (the
# events many a second). Other events read their few fields one by one.
_BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})
_EVENT = shape(
    "data",
    type=str,
    index=int,
    delta=shape("delta", type=str, text=str, partial_json=str, thinking=str, signature=str),
)

# Events whose data must be a JSON object (any other value ends the stream `protocol`).
_OBJECT_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "error",
    }
)


def _block_start(asm: Assembler, blocks: BlockReader, key: int, block: dict[str, Any]) -> None:
    where = "content_block_start.content_block"
    btype = optional_field(block, "type", str, where)
    if blocks.open:
        blocks.open.pop(key, None)  # a block started again under an index never stopped
    if btype == "text":
        asm.start_text(key)
        asm.text(key, optional_field(block, "text", str, where) or "")
        for citation in optional_field(block, "citations", list, where) or ():
            # A whole answer's citations (a stream sends them as `citations_delta`).
            asm.cite(key, read_citation(as_object(citation, where + ".citations[]")))
    elif btype == "thinking":
        asm.start_thinking(key, signature=optional_field(block, "signature", str, where) or None)
        asm.thinking(key, optional_field(block, "thinking", str, where) or "")
    elif btype == "redacted_thinking":
        asm.start_thinking(key, signature=optional_field(block, "data", str, where), redacted=True)
    elif btype == "tool_use":
        asm.start_tool_call(
            key,
            id=optional_field(block, "id", str, where) or "",
            name=optional_field(block, "name", str, where) or "",
        )
        caller = optional_field(block, "caller", dict, where)
        if caller is not None:
            call = asm.block(key)
            if call is not None and hasattr(call, "caller"):  # not a forced output tool
                call.caller = caller  # a programmatic call: its code run waits for it
        initial = optional_field(block, "input", dict, where)
        if initial:
            # Non-streaming proxies put the whole input here and send no deltas.
            asm.tool_call(key, json.dumps(initial, ensure_ascii=False))
    else:
        blocks.start(asm, key, block, btype)


def _usage(asm: Assembler, usage: dict[str, Any] | None, event: str) -> None:
    if usage is None:
        return
    where = f"{event}.message.usage" if event == "message_start" else f"{event}.usage"
    values = {ours: optional_field(usage, key, int, where) for ours, key in USAGE_FIELDS.items()}
    group, name = REASONING_FIELD
    details = optional_field(usage, group, dict, where)
    if details is not None:
        values["reasoning"] = optional_field(details, name, int, f"{where}.{group}")
    asm.set_usage(**{k: v for k, v in values.items() if v is not None})
    server = optional_field(usage, "server_tool_use", dict, where)
    if server:
        asm.set_server_tools(server_tool_counts(server))


def _parse_response(asm: Assembler, obj: Any) -> None:
    """A whole Messages API answer (a proxy that ignored `stream: true`): the same calls as
    the stream's `message_start`, one start/stop per content block, `message_delta` and
    `message_stop`."""
    body = as_object(obj, "response")
    if body.get("type") == "error" or body.get("error"):
        vendor_type, message = vendor_error_fields(body)
        raise StreamFailure(error_from_vendor(vendor_type, message, extra_kinds=ERROR_TYPES))
    asm.set_response_id(optional_field(body, "id", str, "response"))
    asm.set_response_model(body.get("model"))
    asm.set_container(body.get("container"))
    _usage(asm, optional_field(body, "usage", dict, "response"), "response")
    blocks = BlockReader()
    for key, block in enumerate(required_field(body, "content", list, "response")):
        _block_start(asm, blocks, key, as_object(block, f"response.content[{key}]"))
        if key in blocks.open:
            blocks.stop(asm, key)
        else:
            asm.end(key)
    details = optional_field(body, "stop_details", dict, "response") or {}
    asm.set_stop_reason(
        optional_field(body, "stop_reason", str, "response"),
        detail=details.get("explanation") or details.get("category"),
    )
    asm.finished = True


WIRE = WireAPI(
    api=API,
    terminal_event="message_stop",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=lambda model, key: {"x-api-key": key},
    translator=_translator,
    # Claude on Vertex AI takes no key: an OAuth token from Application Default Credentials.
    api_key_env=lambda model: None if model.provider == ANTHROPIC_VERTEX else "ANTHROPIC_API_KEY",
    key_required=lambda model: model.provider != ANTHROPIC_VERTEX,
    bearer_token=vertex_token,
    base_url_env={_BASE_URL: "ANTHROPIC_BASE_URL"},
    providers={"anthropic": _BASE_URL},
    parse_response=_parse_response,
    compat=Compat,
    controls=_CONTROLS,
    server_tools=SERVER_TOOLS,
    file_types=FILE_TYPES,
    output_mode=lambda model: "native" if _native_output(model) else "tool",
)
