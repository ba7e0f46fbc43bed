"""OpenAI Responses API (`POST {base}/responses`), also serving Azure OpenAI, xAI and the
other servers that copy it.

The answer is a list of output items, each streamed as `response.output_item.added`, deltas
keyed by `output_index` (and `item_id`), then `response.output_item.done` holding the whole
item. `reasoning` (summary parts and/or raw `reasoning_text` parts, plus
`encrypted_content`), `message` (`output_text` and `refusal` parts, annotations as
citations) and `function_call` (`call_id` + item `id`) are read here; every other item
(vendor-run tools, built-in calls the caller runs, MCP approvals, unknown items) by
`_responses_builtin`, never skipped. The stream ends with `response.completed`,
`response.incomplete` (reason in `incomplete_details`) or `response.failed`; usage arrives
only there, as one snapshot.

What goes back to the same model, verbatim (the request must pair a reasoning item with the
item that followed it, by id):

- a reasoning item with `encrypted_content`: the whole item as JSON in
  `ThinkingContent.signature` (`redacted=True` when it carried no summary text);
- a message item: `{"id", "phase"}` as JSON in `TextContent.text_signature`;
- a function call: `ToolCall.id` is the `call_id` (what tool results answer), the item id
  `fc_...` is kept in `ToolCall.thought_signature`, which handoff clears for other models.

`store: false` is sent by default, so the history is the context: `previous_response_id` is
never used.

Portable controls (`_CONTROLS`): `tool_choice` ("auto", "none", "required", or
`{"type": "function", "name": ...}` for one tool) and `parallel_tool_calls`, both sent only
with tools; `top_p`; `output_schema` as `text.format` of type `json_schema` (the native
mode, for every model; `strict` when the schema meets the strict rules). The Responses API
takes no `stop`, `seed`, `top_k` or penalties: those raise at `stream()`.

`StreamOptions.extra` knobs (`_EXTRA`): `reasoning_summary` ("auto" by default when
reasoning is asked for; "concise", "detailed", or None to leave it out), `store`,
`service_tier`; for Azure `deployment` (else `model.compat["deployment"]`, else the model
id) and `api_version` (else `AZURE_OPENAI_API_VERSION`; the `/openai/v1` API needs none, a
classic `.../openai` base URL gets a default). The tier the response was billed at is kept
as `message.service_tier` (outside the schema), and the cost uses that tier's price (flex
half, priority double the list price).
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import httpx

from stream_core import (
    AssistantStream,
    Context,
    ErrorKind,
    Model,
    StreamError,
    StreamOptions,
    ThinkingContent,
    ToolCall,
    ToolChoice,
)
from stream_core.provider import (
    Assembler,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    error_from_vendor,
    function_tools_of,
    optional_field,
    output_spec,
    parse_json,
    required_field,
    server_tools_of,
    shape,
    vendor_error_fields,
)

from ._azure import azure_base_url, is_azure
from ._responses_builtin_out import FILE_TYPES, SERVER_TOOLS, tool_objects
from ._responses_input import convert_messages
from ._responses_items import (
    SERVER_DELTAS,
    Items,
    annotation_added,
    call_done,
    completed_items,
    message_done,
    other_added,
    other_done,
    part_added,
    reasoning_done,
    server_delta,
    server_tool_usage,
    usage,
)

API = "openai-responses"

# `response.status`, or for an incomplete response its `incomplete_details.reason`
# (kept as the raw stop reason: it says more than "incomplete").
_STOP_REASONS: dict[str, StopRule] = {
    "completed": "stop",
    "in_progress": "stop",
    "queued": "stop",
    "incomplete": "length",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}

# Error codes of `error` events and `response.failed` that the shared table does not know
# (the dialect's encoder, `_responses_encode`, checks what it writes against both).
ERROR_KINDS: dict[str, ErrorKind] = {
    "invalid_prompt": "invalid_request",
    "invalid_image": "invalid_request",
    "invalid_image_format": "invalid_request",
    "invalid_base64_image": "invalid_request",
    "invalid_image_url": "invalid_request",
    "image_too_large": "invalid_request",
    "image_content_policy_violation": "content_filter",
    "vector_store_timeout": "timeout",
    "server_is_overloaded": "overloaded",
    "slow_down": "rate_limit",
    "ResponsibleAIPolicyViolation": "content_filter",  # Azure's inner error code
}

# Price factor of the service tier a response was billed at (OpenAI; Azure bills by
# deployment type instead). Other tiers (`default`, `auto`, `scale`) are list price.
_TIER_PRICE_FACTORS: dict[str, float] = {"flex": 0.5, "priority": 2.0}

# Provider -> environment variable with its key (others: `<PROVIDER>_API_KEY`, optional).
_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "azure-openai": "AZURE_OPENAI_API_KEY",
    "xai": "XAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "groq": "GROQ_API_KEY",
}

REASONING_SUMMARY = "auto"
"""`reasoning.summary` sent by default with reasoning (`extra["reasoning_summary"]`)."""
LONG_CACHE_RETENTION = "24h"
"""`prompt_cache_retention` sent for `cache_retention="long"` (OpenAI's own API)."""

_AZURE_CLASSIC_VERSION = "2025-04-01-preview"
"""`api-version` for a classic `.../openai` base URL (the `/openai/v1` API needs none)."""

# Portable request control -> the Responses field it becomes.
_CONTROLS: dict[str, str] = {
    "tool_choice": 'tool_choice ("auto" | "none" | "required" | {"type": "function", "name"})',
    "parallel_tool_calls": "parallel_tool_calls",
    "top_p": "top_p",
    "output_schema": 'text.format {"type": "json_schema", "name", "schema", "strict"}',
}

# `StreamOptions.extra` key -> what it does.
_EXTRA: dict[str, str] = {
    "reasoning_summary": 'reasoning.summary ("auto" by default with reasoning; None: left out)',
    "store": "store (false by default: the history is resent, reasoning encrypted)",
    "service_tier": "service_tier (flex / priority change the price)",
    "deployment": "Azure: the deployment name sent as `model`",
    "api_version": "Azure: the `api-version` query parameter",
}
_EXTRA_TYPES: dict[str, tuple[type, ...]] = {
    "reasoning_summary": (str, type(None)),
    "store": (bool,),
    "service_tier": (str,),
    "deployment": (str,),
    "api_version": (str,),
}


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    extra = options.extra
    azure = is_azure(model)
    payload: dict[str, Any] = {
        "model": (extra.get("deployment") or model.compat.get("deployment") or model.id)
        if azure
        else model.id,
        "input": convert_messages(model, context, API),
        "stream": True,
        "store": extra.get("store", False) is True,
    }
    if options.max_tokens is not None:
        payload["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    if options.top_p is not None:
        payload["top_p"] = options.top_p
    include: list[str] = []
    if context.tools:
        hosted, include = tool_objects(server_tools_of(context.tools))
        payload["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in function_tools_of(context.tools)
        ] + hosted
        if options.tool_choice is not None:
            payload["tool_choice"] = _tool_choice(options.tool_choice)
        if options.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = options.parallel_tool_calls
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode != "tool":
        fmt: dict[str, Any] = {"type": "json_schema", "name": spec.name}
        if spec.description:
            fmt["description"] = spec.description
        fmt["schema"] = spec.schema
        fmt["strict"] = spec.strict
        payload.setdefault("text", {})["format"] = fmt
    if model.reasoning:
        summary = extra.get("reasoning_summary", REASONING_SUMMARY)
        if options.reasoning is not None or "reasoning_summary" in extra:
            reasoning: dict[str, Any] = {}
            if options.reasoning is not None:
                reasoning["effort"] = options.reasoning
            if summary is not None:
                reasoning["summary"] = summary
            payload["reasoning"] = reasoning
        if not payload["store"]:
            # Nothing is kept server-side: the reasoning comes back encrypted, to be resent.
            include.insert(0, "reasoning.encrypted_content")
    if include:
        # What the vendor-run tools' items must carry for their results to be read.
        payload["include"] = include
    if options.session_id and options.cache_retention != "none":
        payload["prompt_cache_key"] = options.session_id
        if options.cache_retention == "long" and "api.openai.com" in model.base_url:
            payload["prompt_cache_retention"] = LONG_CACHE_RETENTION
    if "service_tier" in extra:
        payload["service_tier"] = extra["service_tier"]
    return WireRequest(url=_url(model, options), payload=payload)


def _tool_choice(choice: ToolChoice) -> str | dict[str, str]:
    if isinstance(choice, dict):
        return {"type": "function", "name": choice["tool"]}
    return choice


def _url(model: Model, options: StreamOptions) -> str:
    base = model.base_url.rstrip("/")
    version = options.extra.get("api_version") or model.compat.get("api_version")
    if is_azure(model):
        base = azure_base_url(model)
        version = version or os.environ.get("AZURE_OPENAI_API_VERSION")
        if not version and not base.endswith("/v1"):
            version = _AZURE_CLASSIC_VERSION
    url = base + "/responses"
    if version:
        url = str(httpx.URL(url, params={"api-version": str(version)}))
    return url


# --- response -----------------------------------------------------------------------------

_MESSAGE, _REASONING, _CALL, _DONE = "message", "reasoning", "function_call", "done"
# `response.done` is what the ChatGPT (codex) backend and some proxies send instead of
# `response.completed`; its `status` says how the response ended.
_TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed", "response.done")


# The events many a second, read in one call each.
_DELTA_EVENTS = frozenset(
    {
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
    }
)
_DELTA = shape(
    "delta", output_index=int, item_id=str, delta=str, summary_index=int, content_index=int
)


def _translator(asm: Assembler) -> Translator:
    items = Items(asm)
    kinds = items.kinds

    def on_event(event: str, data: str) -> None:
        obj = parse_json(data, event)
        if type(obj) is not dict:
            return
        kind = obj.get("type", event)
        if kind in _DELTA_EVENTS:
            index, item_id, delta, summary_index, content_index = _DELTA(obj, kind)
            key = index if index is not None else item_id if item_id is not None else 0
            if delta is None:
                required_field(obj, "delta", str, kind)  # raises: the delta is missing
            if kind == "response.output_text.delta":
                if kinds.setdefault(key, _MESSAGE) == _MESSAGE:
                    # Kept even before its `content_part.added` (some servers send none).
                    asm.text(key, delta)
                    items.seen = True
            elif kind == "response.function_call_arguments.delta":
                if kinds.setdefault(key, _CALL) == _CALL:
                    asm.tool_call(key, delta)
                    items.seen = True
            elif kind == "response.refusal.delta":
                if kinds.setdefault(key, _MESSAGE) == _MESSAGE:
                    asm.text(key, delta)
                    asm.set_stop_reason(None, detail="refusal", rule="refusal")
                    items.seen = True
            elif kinds.setdefault(key, _REASONING) == _REASONING:
                if "summary" in kind:
                    part = ("summary_index", summary_index or 0)
                else:
                    part = ("content_index", content_index or 0)
                _reasoning_delta(items, key, part, delta)
        elif kind == "response.output_item.added":
            item = required_field(obj, "item", dict, kind)
            _item_added(items, _item_key(obj, item, kind), item)
        elif kind == "response.output_item.done":
            item = required_field(obj, "item", dict, kind)
            _item_done(items, _item_key(obj, item, kind), item)
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            response = optional_field(obj, "response", dict, kind)
            if response is not None:
                asm.set_response_id(optional_field(response, "id", str, f"{kind}.response"))
        elif kind in _TERMINAL_EVENTS:
            _terminal(items, required_field(obj, "response", dict, kind), kind)
        elif kind == "response.output_text.annotation.added":
            annotation_added(items, obj)
        elif kind == "response.content_part.added":
            part_added(items, obj)
        elif kind in SERVER_DELTAS:
            server_delta(items, kind, obj)
        elif kind == "error":
            _error_event(obj)

    return on_event


def _item_key(obj: dict[str, Any], item: dict[str, Any], where: str) -> Hashable:
    index = optional_field(obj, "output_index", int, where)
    if index is not None:
        return index
    item_id = optional_field(item, "id", str, f"{where}.item")
    return item_id if item_id is not None else 0


def _reasoning_delta(items: Items, key: Hashable, part: tuple[str, int], delta: str) -> None:
    asm = items.asm
    items.seen = True
    last = items.parts.get(key)
    if last is not None and last != part and delta:
        block = asm.block(key)
        if isinstance(block, ThinkingContent) and block.thinking:
            asm.thinking(key, "\n\n")  # parts of one item joined as paragraphs
    items.parts[key] = part
    asm.thinking(key, delta)


def _item_added(items: Items, key: Hashable, item: dict[str, Any]) -> None:
    where = "response.output_item.added.item"
    itype = optional_field(item, "type", str, where)
    items.seen = True
    if itype == _CALL:
        asm = items.asm
        items.kinds[key] = _CALL
        call_id = optional_field(item, "call_id", str, where) or ""
        name = optional_field(item, "name", str, where) or ""
        if isinstance(asm.block(key), ToolCall):
            # Its argument deltas came first: the call exists, it learns its id and name.
            asm.tool_call(key, "", id=call_id or None, name=name or None)
        else:
            asm.start_tool_call(key, id=call_id, name=name)
            arguments = optional_field(item, "arguments", str, where)
            if arguments:
                asm.tool_call(key, arguments)
        block = asm.block(key)
        item_id = optional_field(item, "id", str, where)
        if item_id and isinstance(block, ToolCall):
            block.thought_signature = item_id  # also right if the stream ends before done
    elif itype in (_MESSAGE, _REASONING):
        # Blocks start at their first text, so an item with none leaves no empty block.
        items.kinds[key] = itype
    else:
        other_added(items, key, item, itype)


def _item_done(items: Items, key: Hashable, item: dict[str, Any]) -> None:
    """The whole item: text that never streamed is added (a server that sends only finished
    items, or the non-streamed answer), then the block ends with what goes back to the
    vendor."""
    where = "response.output_item.done.item"
    kinds = items.kinds
    itype = optional_field(item, "type", str, where)
    items.seen = True
    if kinds.get(key) == _DONE:
        return
    if itype == _MESSAGE:
        message_done(items.asm, key, item, where, cite=key not in items.cited)
    elif itype == _REASONING:
        block = reasoning_done(items.asm, key, item, where)
        item_id = item.get("id")
        if block is not None and isinstance(item_id, str) and item_id:
            items.by_id[item_id] = block
    elif itype == _CALL:
        call_done(items.asm, key, item, where)
    else:
        other_done(items, key, item, itype, where)
    kinds[key] = _DONE
    items.parts.pop(key, None)


def _terminal(items: Items, response: dict[str, Any], kind: str) -> None:
    asm = items.asm
    where = f"{kind}.response"
    asm.set_response_id(optional_field(response, "id", str, where))
    tier = optional_field(response, "service_tier", str, where)
    if tier is not None:
        # Not in the schema: a record of the tier billed (flex and priority change prices).
        asm.message.service_tier = tier  # type: ignore[attr-defined]
        factor = _TIER_PRICE_FACTORS.get(tier)
        if factor is not None and not is_azure(asm.model):
            # The cost is computed from the assembler's model: give it the tier's prices.
            prices = asm.model.prices
            scaled = {k: v * factor for k, v in prices.model_dump().items() if v is not None}
            asm.model = asm.model.model_copy(update={"prices": prices.model_copy(update=scaled)})
    output = optional_field(response, "output", list, where) or []
    if not items.seen:
        # Nothing streamed (a server that sends only the final response): read it whole.
        for index, raw in enumerate(output):
            _item_done(items, ("output", index), as_object(raw, f"{where}.output[]"))
    elif items.by_id:
        completed_items(items, output)
    counts = optional_field(response, "usage", dict, where)
    if counts is not None:
        usage(asm, counts)
    server_tool_usage(items, response, counts)
    status = optional_field(response, "status", str, where)
    if kind == "response.failed" or status in ("failed", "cancelled"):
        raise StreamFailure(_failure(response, status or "failed", where))
    details = optional_field(response, "incomplete_details", dict, where)
    reason = (
        optional_field(details, "reason", str, f"{where}.incomplete_details") if details else None
    )
    if kind == "response.incomplete" or status == "incomplete":
        asm.set_stop_reason(reason or "incomplete")
    else:
        asm.set_stop_reason(status or "completed")
    asm.finished = True


def _failure(response: dict[str, Any], status: str, where: str) -> StreamError:
    error = optional_field(response, "error", dict, where)
    if error is not None:
        code = optional_field(error, "code", str, f"{where}.error")
        vendor_type, message = vendor_error_fields({"error": error})
        return error_from_vendor(code or vendor_type, message, extra_kinds=ERROR_KINDS)
    return error_from_vendor(None, f"response {status} without error details")


def _error_event(obj: dict[str, Any]) -> None:
    """`{"type": "error", "code", "message"}` (documented) or `{"error": {...}}` (seen)."""
    if isinstance(obj.get("error"), dict):
        vendor_type, message = vendor_error_fields(obj)
        code = obj["error"].get("code")
    else:
        code = obj.get("code")
        vendor_type = None
        message = str(obj.get("message") or code or "unknown error")
    # A specific code (rate_limit_exceeded, context_length_exceeded) says more than a type.
    kind_key = code if isinstance(code, str) and code else vendor_type
    status = code if isinstance(code, int) else None
    raise StreamFailure(
        error_from_vendor(kind_key, message, status=status, extra_kinds=ERROR_KINDS)
    )


def _parse_response(asm: Assembler, obj: Any) -> None:
    """The non-streamed answer: one `response` object with every output item finished."""
    response = as_object(obj, "response")
    if response.get("object") != "response" and "output" not in response:
        # An error body with a 2xx status, or something that is not ours.
        if isinstance(response.get("error"), dict):
            _error_event(response)
        raise StreamFailure(
            StreamError(kind="protocol", message="the JSON answer is not a Responses object")
        )
    items = Items(asm)
    asm.set_response_id(optional_field(response, "id", str, "response"))
    kind = "response.completed"
    status = optional_field(response, "status", str, "response")
    if status == "incomplete":
        kind = "response.incomplete"
    elif status in ("failed", "cancelled"):
        kind = "response.failed"
    _terminal(items, response, kind)


def _auth_headers(model: Model, key: str) -> dict[str, str]:
    if is_azure(model):
        return {"api-key": key}
    return {"authorization": f"Bearer {key}"}


def _key_env(model: Model) -> str:
    env = _KEY_ENV.get(model.provider)
    if env is None:
        if is_azure(model):
            return _KEY_ENV["azure-openai"]
        if "api.openai.com" in model.base_url:
            return _KEY_ENV["openai"]
        env = "".join(c if c.isalnum() else "_" for c in model.provider.upper()) + "_API_KEY"
    return env


def _key_required(model: Model) -> bool:
    # Local servers (vLLM, LM Studio, Ollama) serve /v1/responses without a key.
    return model.provider in _KEY_ENV or is_azure(model) or "api.openai.com" in model.base_url


@dataclass(frozen=True)
class Compat:
    """What `Model.compat` may set for this API (Azure OpenAI)."""

    deployment: str | None = None
    """The Azure deployment name, when it is not the model id."""
    api_version: str | None = None
    """Azure's `api-version` for a classic `.../openai` base URL."""


WIRE = WireAPI(
    api=API,
    terminal_event="response.completed",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=_auth_headers,
    translator=_translator,
    api_key_env=_key_env,
    key_required=_key_required,
    parse_response=_parse_response,
    compat=Compat,
    base_url_env={"https://api.openai.com/v1": "OPENAI_BASE_URL"},
    providers={"openai": "https://api.openai.com/v1"},
    controls=_CONTROLS,
    extra=_EXTRA,
    extra_types=_EXTRA_TYPES,
    output_mode=lambda model: "native",
    server_tools=SERVER_TOOLS,
    file_types=FILE_TYPES,
)
