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

import importlib.util
import json
import os
import re
import sys
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _quote  # a JSON string literal, raw UTF-8
from typing import Any, TypeVar

import anyio
from pydantic_core import from_json

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    ErrorKind,
    ImageContent,
    Model,
    StreamError,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.provider import (
    IMAGE_OMITTED_TEXT,
    Assembler,
    ProtocolError,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    copy_controls,
    error_from_vendor,
    optional_field,
    output_spec,
    parse_json,
    prepare_messages,
    setting_in_url,
)

from ._gemini_schema import SchemaTooLarge, clean_schema, json_schema

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

# An in-stream `{"error": {"code", "message", "status"}}` names a google.rpc status.
_ERROR_STATUSES: dict[str, ErrorKind] = {
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

# Reasoning effort -> `thinkingLevel`, for models that take a level instead of a budget
# (first matching id fragment wins); other reasoning models get `thinkingBudget`.
_THINKING_LEVELS: tuple[tuple[str, dict[str, str]], ...] = (
    ("gemini-3-pro", {"minimal": "low", "low": "low", "medium": "high", "high": "high"}),
    ("gemini-3", {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}),
)

# Models that reject a function call without a thought signature in the current turn; a
# call from another model gets Google's documented placeholder instead.
_SIGNATURE_REQUIRED = ("gemini-3",)
_PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"
# Models that take images inside a function response (`functionResponse.parts`); others
# get them in a user turn after the responses.
_NESTED_RESPONSE_IMAGES = ("gemini-3",)

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

VERTEX = "google-vertex"
_GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
VERTEX_BASE_URL = "https://{host}/v1/projects/{project}/locations/{location}/publishers/google"
_VERTEX_KEY_ENV = "GOOGLE_CLOUD_API_KEY"
_VERTEX_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


# --- request ------------------------------------------------------------------------------


def _build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    payload: dict[str, Any] = {"contents": _convert_messages(model, context)}
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
    if context.tools:
        payload["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters": _tool_schema(i, t.name, t.parameters),
                    }
                    for i, t in enumerate(context.tools)
                ]
            }
        ]
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
    url = _base_url(model, options).rstrip("/") + f"/models/{model.id}:streamGenerateContent"
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
    for fragment, levels in _THINKING_LEVELS:
        if fragment in model.id:
            config["thinkingLevel"] = levels[options.reasoning]
            return config
    config["thinkingBudget"] = options.thinking_budget()
    return config


def _base_url(model: Model, options: StreamOptions) -> str:
    """The Gemini API base as given. For Vertex AI, `VERTEX_BASE_URL`'s placeholders are
    filled from the project and location (a base URL without them is used as it is); each
    must be a plain name, and with no project (and no express-mode key) the call raises at
    `stream()` naming the settings: a template is never sent as it is."""
    if model.provider != VERTEX or "{" not in model.base_url:
        return model.base_url
    env = os.environ
    project = _vertex_setting(
        ("project", model.compat.get("project")),
        ("GOOGLE_CLOUD_PROJECT", env.get("GOOGLE_CLOUD_PROJECT")),
        ("GCLOUD_PROJECT", env.get("GCLOUD_PROJECT")),
        part="path",
    )
    location = _vertex_setting(
        ("location", model.compat.get("location")),
        ("GOOGLE_CLOUD_LOCATION", env.get("GOOGLE_CLOUD_LOCATION")),
        part="host",
    )
    location = location or "global"
    host = "aiplatform.googleapis.com"
    if location != "global":
        host = f"{location}-{host}"
    if not project:
        if _vertex_key(options):
            return f"https://{host}/v1/publishers/google"  # express mode: the key names it
        raise ValueError(
            "model.base_url: Vertex AI needs a project to fill its template: set "
            'GOOGLE_CLOUD_PROJECT or Model.compat["project"] (or give an express-mode '
            f"API key in {_VERTEX_KEY_ENV})"
        )
    return model.base_url.format(host=host, project=project, location=location)


def _vertex_setting(*found: tuple[str, object], part: str) -> str | None:
    """The first setting given, checked as one host label or path segment, naming where it
    came from when it is not one (a location like `x.evil.example/#` would move the host)."""
    for name, value in found:
        if value is None or value == "" or (isinstance(value, str) and not value.strip()):
            continue
        where = f'Model.compat["{name}"]' if name.islower() else f"{name} (from the environment)"
        return setting_in_url(value, where, part=part)
    return None


def _vertex_key(options: StreamOptions) -> str | None:
    return options.api_key or os.environ.get(_VERTEX_KEY_ENV) or None


def _convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    messages = prepare_messages(context, api=API, provider=model.provider, model_id=model.id)
    vision = "image" in model.input
    nested_images = any(f in model.id for f in _NESTED_RESPONSE_IMAGES)
    out: list[dict[str, Any]] = []
    # Gemini pairs responses with calls by position: one user turn, in call order.
    order: dict[str, int] = {}  # tool-call id -> position in the last model turn
    responses: list[tuple[int, dict[str, Any]]] = []
    images: list[dict[str, Any]] = []  # tool-result images for models that cannot nest them
    for m in messages:
        if isinstance(m, ToolResultMessage):
            at = order.get(m.tool_call_id, len(order))
            responses.append((at, _function_response(m, vision, nested_images, images)))
            continue
        if responses:
            out.append({"role": "user", "parts": _in_call_order(responses)})
            responses = []
        if images:
            out.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})
            images = []
        if isinstance(m, UserMessage):
            content: Sequence[object] = (
                [TextContent(text=m.content)] if isinstance(m.content, str) else m.content
            )
            parts = _user_parts(content, vision=vision)
            if parts:
                out.append({"role": "user", "parts": parts})
        else:
            calls = [b.id for b in m.content if isinstance(b, ToolCall)]
            order = {call_id: i for i, call_id in enumerate(calls)}
            parts = _model_parts(model, m)
            if parts:
                out.append({"role": "model", "parts": parts})
    if responses:
        out.append({"role": "user", "parts": _in_call_order(responses)})
    if images:
        out.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})
    # Consecutive turns of one role (function responses, their images, the user's next
    # words) become one turn: roles alternate, responses first.
    merged: list[dict[str, Any]] = []
    for turn in out:
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1]["parts"] += turn["parts"]
        else:
            merged.append(turn)
    return merged


def _in_call_order(responses: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [part for _, part in sorted(responses, key=lambda r: r[0])]


def _user_parts(content: Sequence[object], *, vision: bool) -> list[Any]:
    parts: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                parts.append({"text": b.text})
        elif not isinstance(b, ImageContent):
            continue  # a block of a type we do not know: kept in the history, never sent
        elif vision:
            parts.append({"inlineData": {"mimeType": b.mime_type, "data": b.data}})
        else:
            parts.append({"text": IMAGE_OMITTED_TEXT})
    return parts


def _function_response(
    m: ToolResultMessage, vision: bool, nested: bool, images: list[dict[str, Any]]
) -> dict[str, Any]:
    text = "\n".join(b.text for b in m.content if isinstance(b, TextContent))
    pictures = [
        {"inlineData": {"mimeType": b.mime_type, "data": b.data}}
        for b in m.content
        if isinstance(b, ImageContent)
    ]
    if not text:
        text = "(see attached image)" if pictures and vision else "(no output)"
    response: dict[str, Any] = {
        "name": m.tool_name,
        "response": {"error": text} if m.is_error else {"output": text},
    }
    if pictures and vision:
        if nested:
            response["parts"] = pictures
        else:
            images.extend(pictures)
    return {"functionResponse": response}


def _model_parts(model: Model, m: AssistantMessage) -> list[dict[str, Any]]:
    # `prepare_messages` already turned another model's thinking into text and dropped its
    # signatures: whatever signature is left is this model's own.
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextContent):
            if b.text.strip() or b.text_signature:
                part: dict[str, Any] = {"text": b.text}
                if b.text_signature:
                    part["thoughtSignature"] = b.text_signature
                parts.append(part)
        elif isinstance(b, ThinkingContent):
            if b.redacted or not (b.thinking.strip() or b.signature):
                continue
            part = {"thought": True, "text": b.thinking}
            if b.signature:
                part["thoughtSignature"] = b.signature
            parts.append(part)
        elif isinstance(b, ToolCall):
            part = {"functionCall": {"name": b.name, "args": b.arguments}}
            signature = b.thought_signature
            if signature is None and any(f in model.id for f in _SIGNATURE_REQUIRED):
                signature = _PLACEHOLDER_SIGNATURE
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
    return parts


# --- response -----------------------------------------------------------------------------

_TEXT, _THINKING = "text", "thinking"
_CANDIDATE = "chunk.candidates[0]"
_CONTENT = _CANDIDATE + ".content"
_PART = _CONTENT + ".parts[]"
_CALL = _PART + ".functionCall"
_PIECE = _CALL + ".partialArgs[]"


def _field(obj: dict[str, Any], key: str, kind: type[T], where: str) -> T | None:
    """`optional_field`, with the common case (absent, or exactly the type) inline: it runs
    for every field of every chunk."""
    value = obj.get(key)
    if value is None or value.__class__ is kind:
        return value
    return optional_field(obj, key, kind, where)


class _Reader:
    """The translator's state across chunks: the call being streamed and a call counter."""

    __slots__ = ("asm", "calls", "streaming", "usage", "writer")

    def __init__(self, asm: Assembler) -> None:
        self.asm = asm
        self.usage: dict[str, Any] | None = None  # the last snapshot applied
        self.calls = 0
        self.streaming: Hashable | None = None
        self.writer: _ArgsWriter | None = None

    def chunk(self, obj: dict[str, Any], where: str) -> None:
        asm = self.asm
        if obj.get("error") is not None:
            _fail(obj)
        if asm.message.response_id is None:
            asm.set_response_id(_field(obj, "responseId", str, where))
        # Hot reads are `_field` written out: the helper is called only when the type is off.
        candidates = obj.get("candidates")
        if candidates is not None and candidates.__class__ is not list:
            optional_field(obj, "candidates", list, where)
        if candidates:
            self.candidate(candidates[0], _CANDIDATE)
        else:
            feedback = _field(obj, "promptFeedback", dict, where)
            reason = feedback and _field(feedback, "blockReason", str, where + ".promptFeedback")
            if feedback and reason:
                # The prompt itself was blocked: no candidate will come.
                detail = _field(feedback, "blockReasonMessage", str, where + ".promptFeedback")
                asm.set_stop_reason(reason, detail=detail, rule="content_filter")
                asm.finished = True
        usage = obj.get("usageMetadata")
        if usage is not None and usage.__class__ is not dict:
            optional_field(obj, "usageMetadata", dict, where)
        if usage and usage != self.usage:
            self.usage = usage
            _usage(asm, usage, where + ".usageMetadata")

    def candidate(self, cand: Any, where: str) -> None:
        # `where` strings are constants: built per chunk they would cost more than the reads.
        if cand.__class__ is not dict:
            as_object(cand, where)
        content = cand.get("content")
        if content is not None and content.__class__ is not dict:
            optional_field(cand, "content", dict, where)
        parts = content.get("parts") if content else None
        if parts is not None and parts.__class__ is not list:
            optional_field(content, "parts", list, _CONTENT)
        if parts:
            for part in parts:
                if part.__class__ is not dict:
                    as_object(part, _PART)
                self.part(part)
        finish = cand.get("finishReason")
        if finish is not None and finish.__class__ is not str:
            optional_field(cand, "finishReason", str, where)
        if finish:
            self.end_call()
            detail = _field(cand, "finishMessage", str, where)
            self.asm.set_stop_reason(finish, detail=detail)
            self.asm.finished = True

    def part(self, part: dict[str, Any]) -> None:
        asm = self.asm
        where = _PART
        signature = part.get("thoughtSignature")
        if signature is not None and signature.__class__ is not str:
            optional_field(part, "thoughtSignature", str, where)
        signature = signature or None
        text = part.get("text")
        if text is not None:
            if text.__class__ is not str:
                optional_field(part, "text", str, where)
            if self.streaming is not None:
                self.end_call()
            thought = part.get("thought")
            if thought is not None and thought.__class__ is not bool:
                optional_field(part, "thought", bool, where)
            if thought:
                asm.end(_TEXT)
                asm.thinking(_THINKING, text)
                key = _THINKING
            else:
                asm.end(_THINKING)
                asm.text(_TEXT, text)
                key = _TEXT
            if signature:
                _sign(asm, key, signature)
            return
        call = part.get("functionCall")
        if call is not None:
            if call.__class__ is not dict:
                optional_field(part, "functionCall", dict, where)
            self.function_call(call, signature, _CALL)
        elif part:
            # Server-side tool parts (executableCode, codeExecutionResult, inline data) have
            # no block of ours (nor a place for their signature); they end the text around.
            self.end_call()
            asm.end(_TEXT)
            asm.end(_THINKING)

    def function_call(self, call: dict[str, Any], signature: str | None, where: str) -> None:
        asm = self.asm
        name = call.get("name")
        if name is not None and name.__class__ is not str:
            optional_field(call, "name", str, where)
        partial = call.get("partialArgs")
        if partial is not None and partial.__class__ is not list:
            optional_field(call, "partialArgs", list, where)
        more = call.get("willContinue")
        if more is not None and more.__class__ is not bool:
            optional_field(call, "willContinue", bool, where)
        more = more or False
        key = self.streaming
        # A name starts a new call, unless it repeats the open call's name on a part that
        # carries more of its arguments.
        if key is None or (
            name is not None and (partial is None or name != getattr(asm.block(key), "name", None))
        ):
            self.end_call()
            args = _field(call, "args", dict, where)
            if name is None and args is None and partial is None:
                return  # an empty call part with no call open: nothing to end
            asm.end(_TEXT)
            asm.end(_THINKING)
            key = ("call", self.calls)
            self.calls += 1
            call_id = _field(call, "id", str, where)
            asm.tool_call(key, "", id=call_id or None, name=name or "")
            if args is not None:
                asm.tool_call(key, json.dumps(args, ensure_ascii=False))
                more = False
            else:
                self.streaming, self.writer = key, _ArgsWriter()
        if signature:
            block = asm.block(key)
            if isinstance(block, ToolCall):
                block.thought_signature = signature
        if partial and self.writer is not None:
            for piece in partial:
                if piece.__class__ is not dict:
                    as_object(piece, _PIECE)
                self.writer.add(asm, key, piece, _PIECE)
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


def _sign(asm: Assembler, key: str, signature: str) -> None:
    """Keep a part's signature on the block it belongs to (a later one replaces it)."""
    block: object = asm.block(key)
    if block is None and asm.message.content:
        # An empty part that only carries the signature, after its block ended.
        block = asm.message.content[-1]
    if isinstance(block, TextContent):
        block.text_signature = signature
    elif isinstance(block, ThinkingContent):
        block.signature = signature
    elif isinstance(block, ToolCall) and block.thought_signature is None:
        block.thought_signature = signature


_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[['\"]((?:[^'\"\\]|\\.)*)['\"]\]")


def _parse_path(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise ProtocolError(f"partialArgs: jsonPath {path!r} does not start at $")
    tokens: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if m is None:
            raise ProtocolError(f"partialArgs: unreadable jsonPath {path!r}")
        name, index, quoted = m.groups()
        tokens.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = m.end()
    if not tokens:
        raise ProtocolError("partialArgs: jsonPath $ names no argument")
    return tokens


class _ArgsWriter:
    """Writes streamed `partialArgs` (a path and a value each) as the JSON text of the
    arguments object, in order, so the call streams like any other: containers are opened
    and closed as the paths move on, a string in pieces stays open until its last piece."""

    __slots__ = ("open_string", "path", "raw_path", "stack", "started")

    def __init__(self) -> None:
        self.started = False
        self.raw_path: str | None = None
        self.path: list[str | int] = []
        # Open containers: [path token, child count, closing bracket]; the root is stack[0].
        self.stack: list[list[Any]] = [[None, 0, "}"]]
        self.open_string: list[str | int] | None = None

    def add(self, asm: Assembler, key: Hashable, piece: dict[str, Any], where: str) -> None:
        raw_path = piece.get("jsonPath")
        if raw_path is not None and raw_path.__class__ is not str:
            optional_field(piece, "jsonPath", str, where)
        raw_path = raw_path or ""
        if raw_path != self.raw_path:  # a string in pieces repeats its path
            self.raw_path, self.path = raw_path, _parse_path(raw_path)
        path = self.path
        more = piece.get("willContinue")
        if more is not None and more.__class__ is not bool:
            optional_field(piece, "willContinue", bool, where)
        more = more or False
        value = piece.get("stringValue", piece)  # `piece` itself: the key is absent
        if self.open_string is path and value is not piece:
            # The common case: one more piece of the string being written.
            if value is not None and value.__class__ is not str:
                optional_field(piece, "stringValue", str, where)
            fragment = _quote(value or "")
            if more:
                fragment = fragment[1:-1]
            else:
                fragment = fragment[1:]
                self.open_string = None
            asm.tool_call(key, fragment)
            return
        out: list[str] = []
        if not self.started:
            out.append("{")
            self.started = True
        if self.open_string is not None:
            out.append('"')
            self.open_string = None
        self._descend(path, out)
        if "stringValue" in piece:
            text = _quote(_field(piece, "stringValue", str, where) or "")
            if more:
                out.append(text[:-1])
                self.open_string = path
            else:
                out.append(text)
        elif "numberValue" in piece:
            number = _field(piece, "numberValue", float, where)
            out.append(json.dumps(number, allow_nan=False))
        elif "boolValue" in piece:
            out.append(json.dumps(_field(piece, "boolValue", bool, where)))
        else:
            out.append("null")  # nullValue, or a value kind we do not know
        asm.tool_call(key, "".join(out))

    def _descend(self, path: list[str | int], out: list[str]) -> None:
        """Close containers that `path` has left, open the ones it enters, and write the
        separator and key before its value."""
        stack = self.stack
        parents = path[:-1]
        common = 0
        while common < len(parents) and common + 1 < len(stack):
            if stack[common + 1][0] != parents[common]:
                break
            common += 1
        while len(stack) > common + 1:
            out.append(stack.pop()[2])
        for depth in range(common, len(path)):
            token = path[depth]
            parent = stack[-1]
            if parent[1]:
                out.append(",")
            parent[1] += 1
            if isinstance(token, str):
                out.append(_quote(token) + ":")
            if depth < len(path) - 1:
                array = isinstance(path[depth + 1], int)
                out.append("[" if array else "{")
                stack.append([token, 0, "]" if array else "}"])

    def close(self, asm: Assembler, key: Hashable) -> None:
        out = ['"'] if self.open_string is not None else []
        if not self.started:
            out.append("{")
            self.started = True
        self.open_string = None
        while self.stack:
            out.append(self.stack.pop()[2])
        asm.tool_call(key, "".join(out))


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
            extra_kinds=_ERROR_STATUSES,
        )
    )


def _usage(asm: Assembler, usage: dict[str, Any], where: str) -> None:
    prompt = _field(usage, _PROMPT, int, where)
    candidates = _field(usage, _CANDIDATES, int, where)
    thoughts = _field(usage, _THOUGHTS, int, where)
    values: dict[str, int] = {}
    if prompt is not None:
        cached = _field(usage, _CACHED, int, where) or 0
        # Tool-use prompt tokens (a built-in tool's results read back) bill as input.
        tool_prompt = _field(usage, _TOOL_PROMPT, int, where) or 0
        values["input"] = max(0, prompt - cached) + tool_prompt
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
        if obj.__class__ is dict:
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
        return _VERTEX_KEY_ENV
    # GEMINI_API_KEY is Google's documented name; GOOGLE_API_KEY is the older one.
    if not os.environ.get("GEMINI_API_KEY") and os.environ.get("GOOGLE_API_KEY"):
        return "GOOGLE_API_KEY"
    return "GEMINI_API_KEY"


def _google_auth_installed() -> bool:
    if "google.auth" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.auth") is not None
    except (ImportError, ValueError):
        return False


async def _vertex_token(model: Model) -> str | None:
    """An OAuth token from Application Default Credentials (Vertex AI without a key).

    google-auth's refresh is blocking I/O (a metadata server or token endpoint): it runs in
    a worker thread so the event loop keeps going.
    """
    if model.provider != VERTEX:
        return None
    # Only look for google-auth here: importing it (requests, urllib3) is itself tens of
    # milliseconds of CPU, so it happens in the worker thread with the refresh.
    if not _google_auth_installed():
        raise StreamFailure(
            StreamError(
                kind="auth",
                message="Vertex AI without an API key needs Application Default Credentials: "
                "install stream-core[vertex], or set GOOGLE_CLOUD_API_KEY",
            )
        )

    def fetch() -> str:
        import google.auth
        import google.auth.transport.requests

        credentials, _ = google.auth.default(scopes=[_VERTEX_SCOPE])
        credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call,unused-ignore]
        return str(credentials.token)

    try:
        return await anyio.to_thread.run_sync(fetch, abandon_on_cancel=True)
    except Exception as exc:  # google.auth.exceptions.* and the transport's errors
        raise StreamFailure(
            StreamError(kind="auth", message=f"Vertex AI credentials: {type(exc).__name__}: {exc}")
        ) from None


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
    bearer_token=_vertex_token,
    compat=Compat,
    providers={"google": _GEMINI_BASE_URL},
    controls=_CONTROLS,
    extra=_EXTRA,
    extra_types={"cached_content": (str,)},
    output_mode=lambda model: "native",
)
