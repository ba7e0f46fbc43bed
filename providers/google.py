"""Google Gemini (`POST {base}/models/{id}:streamGenerateContent?alt=sse`), also Vertex AI.

Every SSE event is one whole `GenerateContentResponse`; only `candidates[0]` is read. Its
parts are text, `thought: true` text (thinking) and `functionCall`s, each of which may carry
a `thoughtSignature` that goes back to the same model verbatim. A call usually arrives whole
in one part (start, one delta, end back to back; several per chunk). Vertex AI can also
stream a call's arguments: a part `{name, willContinue: true}` opens it, parts with
`partialArgs` (`jsonPath` + a value, strings possibly in pieces) add to it, and a part
without `willContinue` closes it; the pieces are written out as JSON text as they come.

`usageMetadata` is a cumulative snapshot on any chunk. The terminal event is the chunk
carrying `finishReason` (or a `promptFeedback.blockReason` with no candidates).

Vertex AI is provider `google-vertex`: the URL comes from the project and location (model
`compat` or `GOOGLE_CLOUD_PROJECT`/`GOOGLE_CLOUD_LOCATION`), the key is an express-mode API
key (`GOOGLE_CLOUD_API_KEY`) or else an OAuth token from Application Default Credentials
(the optional extra `stream-core[vertex]`, google-auth). Same translator and request.

Portable controls (`_CONTROLS`): `tool_choice` becomes `toolConfig.functionCallingConfig`
(sent only with tools), the sampling controls become `generationConfig` fields, and
`output_schema` is native (`responseMimeType` + `responseJsonSchema`). Gemini has no knob
for `parallel_tool_calls`, so `False` raises. `StreamOptions.extra` (`_EXTRA`):
`cached_content`, the name of an explicit cache (`cachedContents/...`) sent as
`cachedContent`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_core import from_json

from stream_core import (
    AssistantStream,
    Context,
    ErrorKind,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from stream_core.provider import (
    ANY,
    Assembler,
    First,
    Inner,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    copy_controls,
    error_from_vendor,
    function_tools_of,
    optional_field,
    output_spec,
    parse_json,
    server_tool_objects,
    shape,
    thinking_level,
)

from ._gemini_args import PIECE, ArgsWriter
from ._gemini_messages import convert_messages
from ._gemini_parts import PartReader
from ._gemini_schema import SchemaTooLarge, clean_schema, json_schema
from ._gemini_tools import FILE_TYPES, SERVER_TOOLS
from ._vertex import VERTEX, VERTEX_KEY_ENV, vertex_base_url, vertex_token
from ._vertex import VERTEX_BASE_URL as VERTEX_BASE_URL  # kept: a Vertex model is made with it

API = "google-generative-ai"
T = TypeVar("T")

_STOP_REASONS: dict[str, StopRule] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    # The model wrote a call we cannot use: an error of kind protocol, its text kept.
    "MALFORMED_FUNCTION_CALL": "protocol",
    "UNEXPECTED_TOOL_CALL": "protocol",
    "TOO_MANY_TOOL_CALLS": "protocol",
}

# An in-stream `{"error": {"code", "message", "status"}}` names a google.rpc status; the first
# status for a kind is the one `vendor_bytes` writes (stream_core/testing/_codec.py).
ERROR_STATUSES: dict[str, ErrorKind] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "ABORTED": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "server",
}

# Our usage field <- Gemini's counts (a snapshot: each present count replaces).
_PROMPT, _CACHED = "promptTokenCount", "cachedContentTokenCount"
_TOOL_PROMPT = "toolUsePromptTokenCount"
_CANDIDATES, _THOUGHTS = "candidatesTokenCount", "thoughtsTokenCount"

# Portable control -> the Gemini field it becomes (README "Request controls").
_CONTROLS = {
    "tool_choice": "toolConfig.functionCallingConfig.mode (+ allowedFunctionNames)",
    "stop": "generationConfig.stopSequences",
    "top_p": "generationConfig.topP",
    "top_k": "generationConfig.topK",
    "seed": "generationConfig.seed",
    "presence_penalty": "generationConfig.presencePenalty",
    "frequency_penalty": "generationConfig.frequencyPenalty",
    "output_schema": "generationConfig.responseMimeType + responseJsonSchema",
}
# The `StreamOptions.extra` keys read here.
_EXTRA = {"cached_content": "cachedContent: an explicit cache's name (cachedContents/...)"}
# Sampling controls -> their `generationConfig` field.
_GENERATION_FIELDS = {
    "stop": "stopSequences",
    "top_p": "topP",
    "top_k": "topK",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
# `StreamOptions.tool_choice` -> `functionCallingConfig.mode` ({"tool": n} is ANY + the name).
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}

_GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    payload: dict[str, Any] = {"contents": convert_messages(model, context, API)}
    if context.system_prompt:
        payload["systemInstruction"] = {"parts": [{"text": context.system_prompt}]}
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    copy_controls(options, _GENERATION_FIELDS, config)
    spec = output_spec(WIRE, model, options)
    if spec is not None and spec.mode != "tool":  # tool mode: the pipeline forced a tool
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = json_schema(spec.schema)
    if model.reasoning:
        config["thinkingConfig"] = _thinking_config(model, options)
    if config:
        payload["generationConfig"] = config
    functions = function_tools_of(context.tools)
    tools: list[dict[str, Any]] = []
    if functions:
        declarations = [
            {
                "name": t.name,
                "description": t.description,
                "parameters": _tool_schema(i, t.name, t.parameters),
            }
            for i, t in enumerate(functions)
        ]
        tools.append({"functionDeclarations": declarations})
    # Gemini may refuse some built-in tools beside functions on older models: sent as
    # asked, the vendor's answer says so. Its table nests each tool's options itself.
    tools += server_tool_objects(context.tools, SERVER_TOOLS, merge_options=False)
    if tools:
        payload["tools"] = tools
    if functions:
        choice = options.tool_choice
        if choice is not None:
            calling: dict[str, Any]
            if isinstance(choice, dict):
                calling = {"mode": "ANY", "allowedFunctionNames": [choice["tool"]]}
            else:
                calling = {"mode": _TOOL_MODES[choice]}
            payload["toolConfig"] = {"functionCallingConfig": calling}
    cached = options.extra.get("cached_content")
    if isinstance(cached, str):
        payload["cachedContent"] = cached  # explicit cache (implicit caching needs nothing)
    url = vertex_base_url(model, options).rstrip("/") + f"/models/{model.id}:streamGenerateContent"
    return WireRequest(url=url + "?alt=sse", payload=payload)


def _tool_schema(index: int, name: str, parameters: Any) -> Any:
    try:
        return clean_schema(parameters)
    except SchemaTooLarge as exc:
        raise ValueError(f"context.tools[{index}].parameters ({name!r}): {exc}") from None
    except RecursionError:
        raise ValueError(
            f"context.tools[{index}].parameters ({name!r}): nested too deeply to rewrite for Gemini"
        ) from None


def _thinking_config(model: Model, options: StreamOptions) -> dict[str, Any]:
    config: dict[str, Any] = {"includeThoughts": True}
    if options.reasoning is None:
        return config
    # Gemini 3 takes a level instead of a budget (the per-model rules say which levels).
    level = thinking_level(model, options.reasoning)
    if level is not None:
        config["thinkingLevel"] = level
        return config
    config["thinkingBudget"] = options.thinking_budget()
    return config


# --- response -----------------------------------------------------------------------------

_TEXT, _THINKING = "text", "thinking"
_CANDIDATE = "chunk.candidates[0]"
_CONTENT = _CANDIDATE + ".content"
_PART = _CONTENT + ".parts[]"
_CALL = _PART + ".functionCall"
_PIECE = _CALL + ".partialArgs[]"
# What a chunk is read for, with its first part, in one call; any other part, and a call
# part's call with its first argument piece, likewise.
_PART_FIELDS = shape(_PART, thoughtSignature=str, text=str, thought=bool, functionCall=dict)
_CHUNK = shape(
    "chunk",
    error=ANY,
    candidates=First(
        shape(
            _CANDIDATE,
            content=Inner(shape(_CONTENT, parts=First(_PART_FIELDS))),
            finishReason=str,
        )
    ),
    usageMetadata=dict,
)
_CALL_FIELDS = shape(_CALL, name=str, partialArgs=First(PIECE), willContinue=bool)
_USAGE = shape(
    "chunk.usageMetadata",
    promptTokenCount=int,
    candidatesTokenCount=int,
    thoughtsTokenCount=int,
    cachedContentTokenCount=int,
    toolUsePromptTokenCount=int,
)
_FEEDBACK = shape("chunk.promptFeedback", blockReason=str, blockReasonMessage=str)


class _Reader:
    """The translator's state across chunks: the call being streamed, a call counter and
    the reader of server-tool, file and unknown parts and of grounding metadata."""

    __slots__ = ("asm", "calls", "others", "streaming", "usage", "writer")

    def __init__(self, asm: Assembler) -> None:
        self.asm = asm
        self.others = PartReader(asm)
        self.usage: dict[str, Any] | None = None  # the last snapshot applied
        self.calls = 0
        self.streaming: Hashable | None = None
        self.writer: ArgsWriter | None = None

    def chunk(self, obj: dict[str, Any], where: str) -> None:
        asm = self.asm
        error, candidates, parts, signature, text, thought, call, finish, usage = _CHUNK(obj, where)
        if error is not None:
            _fail(obj)
        if asm.message.response_id is None:
            asm.set_response_id(optional_field(obj, "responseId", str, where))
        if candidates:
            if parts:
                # The first part was read with the chunk, any other with one call each; a
                # call part goes straight to its reader.
                if call is not None and text is None:
                    self.function_call(call, signature)
                else:
                    self.part(parts[0], signature, text, thought, call)
                if len(parts) > 1:
                    for part in parts[1:]:
                        self.part(part, *_PART_FIELDS(part))
            candidate = candidates[0]
            n = len(candidate)  # more than content and index: metadata, a finish, ...
            if n > 2 or (n == 2 and "index" not in candidate):
                self.others.metadata(candidate)
            if finish:
                self.end_call()
                asm.end(_TEXT)
                asm.end(_THINKING)
                self.others.finish()
                where = f"{where}.candidates[0]"
                detail = optional_field(candidates[0], "finishMessage", str, where)
                asm.set_stop_reason(finish, detail=detail)
                asm.finished = True
        else:
            feedback = optional_field(obj, "promptFeedback", dict, where)
            if feedback:
                reason, detail = _FEEDBACK(feedback, where + ".promptFeedback")
                if reason:
                    # The prompt itself was blocked: no candidate will come.
                    asm.set_stop_reason(reason, detail=detail, rule="content_filter")
                    asm.finished = True
        if usage and usage != self.usage:
            self.usage = usage
            _usage(asm, usage, where + ".usageMetadata")

    def part(
        self,
        part: dict[str, Any],
        signature: str | None,
        text: str | None,
        thought: bool | None,
        call: dict[str, Any] | None,
    ) -> None:
        asm = self.asm
        if text is not None:
            if self.streaming is not None:
                self.end_call()
            if thought:
                if _TEXT in asm.open_keys:
                    asm.end(_TEXT)
                key = _THINKING
                if signature and text and _signed(asm.block(key)):
                    asm.end(key)  # a second signed part: its own block keeps its signature
                asm.thinking(_THINKING, text)
            else:
                if _THINKING in asm.open_keys:
                    asm.end(_THINKING)
                key = _TEXT
                if signature and text and _signed(asm.block(key)):
                    asm.end(key)
                asm.text(_TEXT, text)
            if signature and not _sign(asm, key, signature):
                self.others.keep(part)  # a signature no block here can hold: the part as sent
        elif call is not None:
            self.function_call(call, signature or None)
        elif part:
            # Server-side tool parts, files and unknown parts (_gemini_parts): each ends
            # the text around it and becomes a block of its own.
            self.end_call()
            asm.end(_TEXT)
            asm.end(_THINKING)
            self.others.part(part)

    def function_call(self, call: dict[str, Any], signature: str | None) -> None:
        asm = self.asm
        # The call, and its first argument piece, in one read.
        name, partial, path, path_more, string, more = _CALL_FIELDS(call)
        more = more or False
        key = self.streaming
        # A name starts a new call, unless it repeats the open call's name on a part that
        # carries more of its arguments.
        if key is None or (
            name is not None and (partial is None or name != getattr(asm.block(key), "name", None))
        ):
            self.end_call()
            args = optional_field(call, "args", dict, _CALL)  # read once per call
            if name is None and args is None and partial is None:
                return  # an empty call part with no call open: nothing to end
            asm.end(_TEXT)
            asm.end(_THINKING)
            key = ("call", self.calls)
            self.calls += 1
            call_id = optional_field(call, "id", str, _CALL)
            asm.tool_call(key, "", id=call_id or None, name=name or "")
            if args is not None:
                asm.tool_call(key, json.dumps(args, ensure_ascii=False))
                more = False
            else:
                self.streaming, self.writer = key, ArgsWriter()
        if signature:
            block = asm.block(key)
            if isinstance(block, ToolCall):
                block.thought_signature = signature
        if partial and self.writer is not None:
            self.writer.add(asm, key, partial[0], path, path_more, string)
            if len(partial) > 1:
                for piece in partial[1:]:
                    self.writer.add(asm, key, piece, *PIECE(piece, _PIECE))
        if not more:
            if self.streaming is not None:
                self.end_call()
            else:
                asm.end(key)

    def end_call(self) -> None:
        key, writer = self.streaming, self.writer
        if key is None or writer is None:
            return
        self.streaming = self.writer = None
        writer.close(self.asm, key)
        self.asm.end(key)


def _signed(block: object) -> bool:
    return isinstance(block, TextContent | ThinkingContent) and bool(
        block.text_signature if isinstance(block, TextContent) else block.signature
    )


def _sign(asm: Assembler, key: str, signature: str) -> bool:
    """Keep a part's signature on the block it belongs to; False when that block already
    holds another one, or is no block of ours that holds one (the caller keeps the part)."""
    block: object = asm.block(key)
    if block is None and asm.message.content:
        # An empty part that only carries the signature, after its block ended.
        block = asm.message.content[-1]
    if isinstance(block, TextContent) and block.text_signature in (None, signature):
        block.text_signature = signature
    elif isinstance(block, ThinkingContent) and block.signature in (None, signature):
        block.signature = signature
    elif isinstance(block, ToolCall) and block.thought_signature in (None, signature):
        block.thought_signature = signature
    else:
        return False
    return True


def _fail(obj: dict[str, Any]) -> None:
    """An error object inside the stream: the same kinds as the matching HTTP status."""
    err = obj["error"]
    if not isinstance(err, dict):
        raise StreamFailure(error_from_vendor(None, str(err)))
    status = optional_field(err, "status", str, "error")
    vendor_type = status or optional_field(err, "type", str, "error")
    code = err.get("code")
    message = err.get("message")
    text = message if isinstance(message, str) and message else vendor_type or "unknown error"
    raise StreamFailure(
        error_from_vendor(
            vendor_type,
            text,
            status=code if type(code) is int else None,
            extra_kinds=ERROR_STATUSES,
        )
    )


def _usage(asm: Assembler, usage: dict[str, Any], where: str) -> None:
    prompt, candidates, thoughts, cached, tool_prompt = _USAGE(usage, where)
    values: dict[str, int] = {}
    if prompt is not None:
        cached = cached or 0
        # Tool-use prompt tokens (a built-in tool's results read back) bill as input.
        values["input"] = max(0, prompt - cached) + (tool_prompt or 0)
        values["cache_read"] = cached
    if candidates is not None or thoughts is not None:
        values["output"] = (candidates or 0) + (thoughts or 0)
        values["reasoning"] = thoughts or 0
    if values:
        asm.set_usage(**values)


def _translator(asm: Assembler) -> Translator:
    reader = _Reader(asm)

    def on_event(event: str, data: str) -> None:
        try:
            obj = from_json(data, allow_inf_nan=False)
        except ValueError:
            obj = parse_json(data, event or "chunk")  # raises, naming the event
        if type(obj) is dict:  # any other value: a kind of chunk we do not know
            reader.chunk(obj, event or "chunk")

    return on_event


def _parse_response(asm: Assembler, obj: Any) -> None:
    """A `generateContent` answer (one chunk), or the JSON array `streamGenerateContent`
    sends without `alt=sse`."""
    reader = _Reader(asm)
    for i, chunk in enumerate(obj if isinstance(obj, list) else [obj]):
        reader.chunk(as_object(chunk, f"response[{i}]"), "response")
        if asm.finished:
            return


# --- auth ---------------------------------------------------------------------------------


def _api_key_env(model: Model) -> str:
    if model.provider == VERTEX:
        return VERTEX_KEY_ENV
    # GEMINI_API_KEY is Google's documented name; GOOGLE_API_KEY is the older one.
    if not os.environ.get("GEMINI_API_KEY") and os.environ.get("GOOGLE_API_KEY"):
        return "GOOGLE_API_KEY"
    return "GEMINI_API_KEY"


@dataclass(frozen=True)
class Compat:
    """What `Model.compat` may set for this API."""

    project: str | None = None
    """Vertex AI project (else `GOOGLE_CLOUD_PROJECT`)."""
    location: str | None = None
    """Vertex AI location (else `GOOGLE_CLOUD_LOCATION`, else `global`)."""


WIRE = WireAPI(
    api=API,
    terminal_event="a chunk with finishReason",
    stop_reasons=_STOP_REASONS,
    build_request=_build_request,
    auth_headers=lambda model, key: {"x-goog-api-key": key},
    translator=_translator,
    api_key_env=_api_key_env,
    key_required=lambda model: model.provider != VERTEX,
    parse_response=_parse_response,
    bearer_token=vertex_token,
    compat=Compat,
    providers={"google": _GEMINI_BASE_URL},
    controls=_CONTROLS,
    extra=_EXTRA,
    extra_types={"cached_content": (str,)},
    output_mode=lambda model: "native",
    server_tools=SERVER_TOOLS,
    file_types=FILE_TYPES,
)
