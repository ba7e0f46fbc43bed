"""Amazon Bedrock's Converse API (`POST /model/{modelId}/converse-stream`), in the binary AWS
event-stream framing (`stream_core.provider.EventStreamDecoder`).

Events: `messageStart`; `contentBlockStart` (only tool calls have one), `contentBlockDelta`
(text, `reasoningContent` text / signature / redacted blob, `toolUse` input fragments) and
`contentBlockStop`, keyed by `contentBlockIndex`; `messageStop` with the stop reason; then
`metadata` with the usage, the last event. A body that ends after `messageStop` without
`metadata` is complete all the same (no usage). Exception messages (`throttlingException`,
`modelStreamErrorException`, ...) end the stream with the kind of their HTTP status.
Documents, citations, Nova's server tools (`toolUse` of type `server_tool_use`, `toolResult`),
generated images and any block kind not known here: `_bedrock_blocks`, both ways.

Auth: a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK` or `StreamOptions.api_key`) is sent as
a bearer token; without one the request is SigV4-signed with credentials from the standard
chain (`providers/_aws.py`). Region: `extra["region"]`, `AWS_REGION`, `AWS_DEFAULT_REGION`,
the profile's `region`, the one in a `bedrock-runtime` base URL, else us-east-1. A base URL
that is not `bedrock-runtime.<region>.amazonaws.com` (a VPC endpoint, a proxy) is used as is.

`StreamOptions.extra`: `region` (the AWS region), `profile` (an AWS profile name).

Request controls (`WIRE.controls`): `tool_choice` becomes `toolConfig.toolChoice` (`auto`,
`any` for "required", `tool` with a name). Converse has no "none": the tools are left out
instead, unless the history holds tool calls or results, which Converse only takes with a
`toolConfig` (its ValidationException); that case raises at `stream()` rather than letting
the model call tools. Claude refuses a forced tool and a `top_p` below 0.95 while extended
thinking is on, so those pairs raise too. `stop` -> `inferenceConfig.stopSequences`, `top_p` ->
`inferenceConfig.topP`. No `parallel_tool_calls`, seed or penalties; `top_k` exists only in
each model family's own `additionalModelRequestFields` (its name differs per family), so it is
left out: send it with `on_payload`. `output_schema`: `outputConfig.textFormat` (type
`json_schema`, `structure.jsonSchema` with the schema as a JSON string) on the models AWS
documents with structured outputs in Converse (Claude 4.5 and later, `_native_output`), the
schema's objects closed with `additionalProperties: false`; other models get the forced tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic_core import from_json

from stream_core import (
    AssistantStream,
    Context,
    ErrorKind,
    Model,
    StreamError,
    StreamOptions,
    ThinkingContent,
)
from stream_core.provider import (
    ADAPTIVE_EFFORTS,
    Assembler,
    EventStreamDecoder,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    closed_schema,
    error_from_vendor,
    function_tools_of,
    optional_field,
    output_spec,
    parse_json,
    refuse_forced_tool,
    required_field,
    server_tool_objects,
    thinking_mode,
)

from . import _aws
from ._bedrock_blocks import FILE_TYPES, BlockReader, read_block
from ._bedrock_blocks import USAGE_FIELDS as _USAGE_FIELDS
from ._bedrock_blocks import server_tool_counts as _server_tool_counts
from ._bedrock_endpoint import DEFAULT_REGION, endpoint, profile, region
from ._bedrock_messages import API
from ._bedrock_messages import CLAUDE as _CLAUDE
from ._bedrock_messages import called_tools as _called_tools
from ._bedrock_messages import convert_messages as _convert_messages
from ._bedrock_messages import sends_tools as _sends_tools
from ._bedrock_tools import SERVER_TOOLS, server_tool_refusal
from ._claude import (
    claude_schema,
    claude_version,
    fit_thinking_budget,
    thinking_top_p_problem,
)

_STOP_REASONS: dict[str, StopRule] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",  # output cut because the window filled
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    # The model's output did not parse: nothing to add (a broken tool call is truncated).
    "malformed_model_output": "stop",
    "malformed_tool_use": "stop",
}

# Exception messages in the stream (and their kinds where the shared table has none); the
# first name for a kind is the one `vendor_bytes` writes (stream_core/testing/_codec.py).
EXCEPTION_KINDS: dict[str, ErrorKind] = {
    "throttlingException": "rate_limit",
    "serviceUnavailableException": "overloaded",
    "modelNotReadyException": "overloaded",
    "internalServerException": "server",
    "modelStreamErrorException": "server",
    "modelTimeoutException": "timeout",
    "validationException": "invalid_request",
    "accessDeniedException": "auth",
    "resourceNotFoundException": "not_found",
}


# Prompt caching (`cachePoint` blocks): models whose id holds one of these, minus the older
# Claude models that reject it. `Compat.cache_points` overrides.
_CACHE_MODELS = ("anthropic.claude", "amazon.nova")
_NO_CACHE_MODELS = ("claude-3-haiku", "claude-3-sonnet", "claude-3-opus", "claude-3-5-sonnet")
# Claude takes Anthropic's thinking config through `additionalModelRequestFields`.
_INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"

_SERVICE = "bedrock"

# Portable control -> the Converse field it becomes (README table).
_CONTROLS: dict[str, str] = {
    "tool_choice": "toolConfig.toolChoice: auto / any / tool+name (none: tools left out)",
    "stop": "inferenceConfig.stopSequences",
    "top_p": "inferenceConfig.topP",
    "output_schema": "outputConfig.textFormat json_schema (forced tool on other models)",
}
# The `StreamOptions.extra` keys read here.
_EXTRA: dict[str, str] = {
    "region": "the AWS region (before AWS_REGION, the profile's and the base URL's)",
    "profile": "the AWS profile whose credentials and region are used",
}
_TOOL_CHOICES: dict[str, dict[str, Any]] = {"auto": {"auto": {}}, "required": {"any": {}}}


@dataclass(frozen=True)
class Compat:
    """`Model.compat` flags for Bedrock."""

    cache_points: bool | None = None
    """Send `cachePoint` blocks (None: by the model id, see `_CACHE_MODELS`)."""


def _native_output(model: Model) -> bool:
    """Structured outputs in Converse: Claude Sonnet/Haiku/Opus 4.5 and later (AWS's list)."""
    if _CLAUDE not in model.id:
        return False
    version = claude_version(model.id)
    return version is not None and version[1:] >= (4, 5)


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


# --- endpoint and auth --------------------------------------------------------------------


def _sign(
    request: httpx.Request, model: Model, options: StreamOptions, api_key: str | None
) -> tuple[str, ...]:
    if api_key:
        return ()  # a Bedrock API key: the bearer header is all it takes
    credentials = _aws.find_credentials(profile(options))
    if credentials is None:
        raise StreamFailure(
            StreamError(
                kind="auth",
                message=(
                    f"no AWS credentials for {model.provider}: set AWS_BEARER_TOKEN_BEDROCK "
                    "(a Bedrock API key), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                    "or a profile in ~/.aws/credentials, or pass StreamOptions(api_key=...)"
                ),
            )
        )
    signature = _aws.sign_request(
        request, credentials, region=region(model, options), service=_SERVICE
    )
    return (*credentials.secrets, signature)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    cache = _cache_point(model, options)
    max_tokens = options.max_tokens or model.max_tokens
    payload: dict[str, Any] = {"messages": _convert_messages(model, context, cache)}
    if context.system_prompt:
        payload["system"] = [{"text": context.system_prompt}, *([cache] if cache else [])]
    inference: dict[str, Any] = {"maxTokens": max_tokens}
    fields: dict[str, Any] = {}
    budget = options.thinking_budget() if model.reasoning and _CLAUDE in model.id else None
    if budget is not None and thinking_mode(model) == "adaptive":
        # Claude 4.6+: the model decides how much to think, within the effort.
        assert options.reasoning is not None
        fields["thinking"] = {"type": "adaptive"}
        fields["output_config"] = {"effort": ADAPTIVE_EFFORTS[options.reasoning]}
    elif budget is not None:
        # Claude's rules (`_claude`): the budget leaves room for the answer; no temperature.
        budget = fit_thinking_budget(budget, max_tokens)
        inference["maxTokens"] = max(max_tokens, budget + 1024)
        fields["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if context.tools:
            fields["anthropic_beta"] = [_INTERLEAVED_THINKING_BETA]
    elif options.temperature is not None:
        inference["temperature"] = options.temperature
    if options.stop:
        inference["stopSequences"] = list(options.stop)
    if options.top_p is not None:
        problem = thinking_top_p_problem(options.top_p, f"{API} (Claude)", options.reasoning)
        if budget is not None and problem is not None:
            raise ValueError(problem)
        inference["topP"] = options.top_p
    payload["inferenceConfig"] = inference
    if fields:
        payload["additionalModelRequestFields"] = fields
    if context.tools and _sends_tools(payload["messages"], options):
        config: dict[str, Any] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description or t.name,
                        "inputSchema": {"json": t.parameters},
                    }
                }
                for t in function_tools_of(context.tools)
            ]
            # stream() has refused the kinds this model does not run (server_tool_refusal).
            + server_tool_objects(context.tools, SERVER_TOOLS)
        }
        choice = _tool_choice(options, thinking=budget is not None)
        if choice is not None:
            config["toolChoice"] = choice
        payload["toolConfig"] = config
    elif not context.tools:
        called = _called_tools(payload["messages"])
        if called:
            # A history with tool blocks and no tools declared (after a compaction or a
            # handoff): Converse requires a toolConfig for it, so the tools the history
            # calls are declared, taking any arguments.
            payload["toolConfig"] = {
                "tools": [
                    {
                        "toolSpec": {
                            "name": name,
                            "description": f"{name} (called earlier in this conversation)",
                            "inputSchema": {"json": {"type": "object"}},
                        }
                    }
                    for name in called
                ]
            }
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode != "tool":
        schema = closed_schema(spec.schema)
        if _CLAUDE in model.id:
            schema = claude_schema(schema)  # Claude's subset, the rest in descriptions
        definition: dict[str, Any] = {
            "schema": json.dumps(schema, ensure_ascii=False),
            "name": spec.name,
        }
        if spec.description is not None:
            definition["description"] = spec.description
        payload["outputConfig"] = {
            "textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}}
        }
    headers = {"accept": "application/vnd.amazon.eventstream, application/json"}
    return WireRequest(url=endpoint(model, options), payload=payload, headers=headers)


def _tool_choice(options: StreamOptions, *, thinking: bool) -> dict[str, Any] | None:
    if thinking:
        refuse_forced_tool(
            options,
            API,
            f"for Claude while extended thinking is on (reasoning={options.reasoning!r})",
        )
    choice = options.tool_choice
    if isinstance(choice, dict):
        return {"tool": {"name": choice["tool"]}}
    if choice is None:
        return None
    return dict(_TOOL_CHOICES[choice])


def _cache_point(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    if options.cache_retention == "none":
        return None
    enabled = Compat(**model.compat).cache_points
    if enabled is None:
        enabled = any(m in model.id for m in _CACHE_MODELS) and not any(
            m in model.id for m in _NO_CACHE_MODELS
        )
    if not enabled:
        return None
    point: dict[str, Any] = {"type": "default"}
    if options.cache_retention == "long" and _CLAUDE in model.id:
        point["ttl"] = "1h"
    return {"cachePoint": point}


# --- response -----------------------------------------------------------------------------


def _usage(asm: Assembler, usage: dict[str, Any], where: str) -> None:
    asm.set_usage(
        **{
            ours: optional_field(usage, theirs, int, where)
            for ours, theirs in _USAGE_FIELDS.items()
        }
    )
    if "serverToolUsage" in usage:
        asm.set_server_tools(_server_tool_counts(usage))


def _exception(name: str, body: dict[str, Any]) -> StreamFailure:
    message = optional_field(body, "message", str, name) or name
    original = body.get("originalMessage")
    if isinstance(original, str) and original:
        message += f" ({original})"
    status = body.get("originalStatusCode")
    return StreamFailure(
        error_from_vendor(
            name,
            f"{name}: {message}",
            status=status if type(status) is int and 400 <= status < 600 else None,
            extra_kinds=EXCEPTION_KINDS,
        )
    )


def _translator(asm: Assembler) -> Translator:
    blocks = BlockReader(asm)  # documents' citations, server tools, images, unknown kinds
    special = blocks.keys  # the indices whose deltas `blocks` reads
    stopped = False

    def on_event(event: str, data: str) -> None:
        nonlocal stopped
        if event == "contentBlockDelta":
            try:
                obj = from_json(data, allow_inf_nan=False)
            except ValueError:
                obj = parse_json(data, event)  # raises, naming the event
            if obj.__class__ is dict:
                # The common case first, in plain reads; anything else takes the checked path.
                key, delta = obj.get("contentBlockIndex"), obj.get("delta")
                if key.__class__ is int and delta.__class__ is dict and key not in special:
                    text = delta.get("text")
                    if text.__class__ is str:
                        asm.text(key, text)
                        return
                    tool = delta.get("toolUse")
                    if tool.__class__ is dict:
                        fragment = tool.get("input")
                        if fragment.__class__ is str:
                            asm.tool_call(key, fragment)
                            return
            obj = as_object(obj, event)
            key = required_field(obj, "contentBlockIndex", int, event)
            delta = required_field(obj, "delta", dict, event)
            if key in special:
                blocks.delta(key, delta)
            elif not _delta(asm, key, delta):
                blocks.delta(key, delta)  # a citation, a kind of delta not read here
        elif event == "contentBlockStart":
            obj = as_object(parse_json(data, event), event)
            key = required_field(obj, "contentBlockIndex", int, event)
            start = optional_field(obj, "start", dict, event) or {}
            if blocks.start(key, start, f"{event}.start"):
                return
            tool = optional_field(start, "toolUse", dict, f"{event}.start")
            where = f"{event}.start.toolUse"
            if tool is None:
                return  # text and reasoning blocks have no start
            asm.start_tool_call(
                key,
                id=optional_field(tool, "toolUseId", str, where) or "",
                name=optional_field(tool, "name", str, where) or "",
            )
        elif event == "contentBlockStop":
            obj = as_object(parse_json(data, event), event)
            key = required_field(obj, "contentBlockIndex", int, event)
            blocks.stop(key)
            asm.end(key)
        elif event == "messageStop":
            obj = as_object(parse_json(data, event), event)
            blocks.finish()
            asm.set_stop_reason(optional_field(obj, "stopReason", str, event))
            stopped = asm.complete_at_eof = True
        elif event == "metadata":
            obj = as_object(parse_json(data, event), event)
            usage = optional_field(obj, "usage", dict, event)
            if usage is not None:
                _usage(asm, usage, f"{event}.usage")
            # The last event Bedrock sends; before the stop it ends nothing.
            asm.finished = stopped
        elif event == "messageStart":
            parse_json(data, event)
        elif event in EXCEPTION_KINDS or event.endswith("Exception"):
            raise _exception(event, as_object(parse_json(data, event), event))
        # other event types: forward compatibility, ignored

    return on_event


def _delta(asm: Assembler, key: int, delta: dict[str, Any]) -> bool:
    """Text, a call's input or reasoning; False for any other delta."""
    where = "contentBlockDelta.delta"
    text = optional_field(delta, "text", str, where)
    if text is not None:
        asm.text(key, text)
        return True
    tool = optional_field(delta, "toolUse", dict, where)
    if tool is not None:
        asm.tool_call(key, optional_field(tool, "input", str, f"{where}.toolUse") or "")
        return True
    reasoning = optional_field(delta, "reasoningContent", dict, where)
    if reasoning is None:
        return False
    where += ".reasoningContent"
    thinking = optional_field(reasoning, "text", str, where)
    signature = optional_field(reasoning, "signature", str, where)
    redacted = optional_field(reasoning, "redactedContent", str, where)
    if thinking:
        asm.thinking(key, thinking)
    if signature:
        if not isinstance(asm.block(key), ThinkingContent):
            asm.start_thinking(key)
        asm.thinking_signature(key, signature)
    if redacted:
        block = asm.block(key)
        if isinstance(block, ThinkingContent) and block.redacted:
            asm.thinking_signature(key, redacted)
        else:
            # The encrypted reasoning goes back as it came, in the signature field.
            asm.start_thinking(key, signature=redacted, redacted=True)
    return True


def _parse_response(asm: Assembler, obj: Any) -> None:
    """Bedrock's non-streamed `Converse` answer, read as a whole."""
    answer = as_object(obj, "answer")
    output = optional_field(answer, "output", dict, "answer") or {}
    message = optional_field(output, "message", dict, "answer.output") or {}
    content = optional_field(message, "content", list, "answer.output.message") or []
    for i, raw in enumerate(content):
        where = f"answer.output.message.content[{i}]"
        block = as_object(raw, where)
        key = ("block", i)
        text = optional_field(block, "text", str, where)
        tool = optional_field(block, "toolUse", dict, where)
        reasoning = optional_field(block, "reasoningContent", dict, where)
        if read_block(asm, key, block, where):
            pass  # citations, server tools, images, other kinds (`_bedrock_blocks`)
        elif text is not None:
            asm.text(key, text)
        elif tool is not None:
            where += ".toolUse"
            arguments = tool.get("input")
            asm.start_tool_call(
                key,
                id=optional_field(tool, "toolUseId", str, where) or "",
                name=optional_field(tool, "name", str, where) or "",
            )
            if arguments is not None:
                asm.tool_call(key, _json_text(arguments))
        elif reasoning is not None:
            where += ".reasoningContent"
            redacted = optional_field(reasoning, "redactedContent", str, where)
            plain = optional_field(reasoning, "reasoningText", dict, where) or {}
            if redacted:
                asm.start_thinking(key, signature=redacted, redacted=True)
            else:
                where += ".reasoningText"
                signature = optional_field(plain, "signature", str, where)
                asm.start_thinking(key, signature=signature or None)
                asm.thinking(key, optional_field(plain, "text", str, where) or "")
        asm.end(key)
    asm.set_stop_reason(optional_field(answer, "stopReason", str, "answer"))
    usage = optional_field(answer, "usage", dict, "answer")
    if usage is not None:
        _usage(asm, usage, "answer.usage")
    asm.finished = True


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


WIRE = WireAPI(
    api=API,
    terminal_event="messageStop",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=lambda model, key: {"authorization": f"Bearer {key}"},
    translator=_translator,
    api_key_env=lambda model: "AWS_BEARER_TOKEN_BEDROCK",
    key_required=lambda model: False,  # SigV4 credentials serve as well (`sign`)
    decoder=EventStreamDecoder,
    sign=_sign,
    parse_response=_parse_response,
    compat=Compat,
    controls=_CONTROLS,
    extra=_EXTRA,
    extra_types={"region": (str,), "profile": (str,)},
    output_mode=lambda model: "native" if _native_output(model) else "tool",
    server_tools=SERVER_TOOLS,
    server_tool_refusal=server_tool_refusal,
    file_types=FILE_TYPES,
    providers={"amazon-bedrock": f"https://bedrock-runtime.{DEFAULT_REGION}.amazonaws.com"},
)
