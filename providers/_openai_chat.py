"""The Chat Completions stream, shared by the APIs that speak it: `openai_completions` (OpenAI
and every server that copies it) and `mistral` (Mistral's own endpoint, the same chunks).

The translator from `chat.completion.chunk`s to assembler calls, the non-streamed
`chat.completion` reader, the usage and reasoning-field tables, and the request pieces both
APIs send the same way (`tool_choice_field`, `json_schema_format`). Each API module keeps
its own request builder, stop-reason table and compat flags.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from pydantic_core import from_json

from stream_core import AssistantMessage, TextContent, ThinkingContent, ToolChoice
from stream_core.provider import (
    ANY,
    Assembler,
    First,
    Inner,
    OutputSpec,
    StreamFailure,
    Translator,
    as_object,
    error_from_vendor,
    optional_field,
    parse_json,
    required_field,
    shape,
    vendor_error_fields,
)

from ._chat_citations import (
    KNOWN_DELTA_FIELDS,
    ChatExtras,
    reference_citations,
    server_tool_counts,
)

__all__ = [
    "SIGNATURE_FIELDS",
    "chat_codec",
    "json_schema_format",
    "parse_response",
    "tool_choice_field",
    "translator",
]

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
# A delta with no other field is plain text (`role` and `content` only).
_PLAIN = frozenset(("role", "content"))
_CALL_ONLY = frozenset(("role", "tool_calls"))

# Reasoning signatures a server carries next to that text, and takes back on the assistant
# message from the same model: OpenRouter's `reasoning_details` (text, summary or encrypted
# items, each with an `index`) and LiteLLM's Anthropic-shaped `thinking_blocks`. Streamed
# as fragments; these string fields are concatenated per item, the others keep their last
# value (a signature arrives whole).
SIGNATURE_FIELDS = ("reasoning_details", "thinking_blocks")
_CONCATENATED = frozenset({"text", "summary", "thinking"})

_TOOL_CHOICES: dict[str, str] = {"auto": "auto", "none": "none", "required": "required"}


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


# --- response -----------------------------------------------------------------------------

_TEXT, _THINKING = "text", "thinking"


def chat_codec(api: str) -> tuple[Callable[[Assembler], Translator], _Reader]:
    """(translator, non-streamed reader) for `api`: the blocks they keep verbatim
    (`VendorContent`) name it."""

    def translator(asm: Assembler) -> Translator:
        return _translator(asm, api)

    def parse_response(asm: Assembler, obj: Any) -> None:
        _parse_response(asm, obj, api)

    return translator, parse_response


def _translator(asm: Assembler, api: str) -> Translator:
    last_tool: list[Hashable] = [("tool", 0)]
    details = _ReasoningDetails(asm)
    extras = ChatExtras(asm, api)

    def on_event(event: str, data: str) -> None:
        if data == "[DONE]":
            details.settle()
            extras.settle()
            asm.finished = True
            return
        where = "chunk" if event in ("", "message") else event  # "message": SSE's default
        try:
            chunk = from_json(data, allow_inf_nan=False)
        except ValueError:
            chunk = parse_json(data, where)  # raises, naming the event
        # The shape checks that the chunk is an object, naming it.
        (usage, error, delta, content, refusal, tools, index, call_id, args, name, finish,
         choice_usage) = _CHUNK(chunk, where)  # fmt: skip
        if usage is None and "x_groq" in chunk:  # older Groq streams put usage only here
            groq = optional_field(chunk, "x_groq", dict, where) or {}
            usage = optional_field(groq, "usage", dict, where + ".x_groq")
        if error or event == "error":
            _fail(asm, chunk, error, usage)
        if asm.message.response_id is None:
            # Read once: the first chunk names the response and the served model.
            asm.set_response_id(optional_field(chunk, "id", str, where))
            asm.set_response_model(chunk.get("model"))
            extras.top_level(chunk)
        if delta:
            if type(content) is str and _PLAIN.issuperset(delta):
                # The common delta, text alone, without the general path's call.
                if content:
                    if _THINKING in asm.open_keys:
                        asm.end(_THINKING)
                    asm.text(_TEXT, content)
            elif (
                index is not None
                and type(args) is str
                and not call_id
                and name is None
                and _CALL_ONLY.issuperset(delta)
                and len(tools) == 1
                and ("tool", index) in asm.open_keys
            ):
                # The common delta, more arguments for the open call, likewise.
                last_tool[0] = key = ("tool", index)
                asm.tool_call(key, args)
            else:
                _delta(asm, delta, content, refusal, tools, last_tool, extras)
                if "reasoning_details" in delta or "thinking_blocks" in delta:
                    details.add(delta)
        if finish:
            asm.set_stop_reason(finish)
        if not usage:
            usage = choice_usage  # Moonshot puts it on the choice
        if usage:
            _usage(asm, usage)
        if finish or usage:
            # Perplexity's sources ride on every chunk: read on these (and the first).
            extras.top_level(chunk)

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
# What a translator reads from every chunk (with its first tool call), and from every
# further tool call: one call each.
_TOOL_CALL = shape(
    _TOOL_CALLS,
    index=int,
    id=str,
    function=Inner(shape(_TOOL_CALLS + ".function", arguments=(str, dict), name=str)),
)
_CHUNK = shape(
    "chunk",
    usage=dict,
    error=ANY,
    choices=First(
        keep=False,
        reader=shape(
            _CHOICE,
            delta=shape(_DELTA, content=(str, list), refusal=str, tool_calls=First(_TOOL_CALL)),
            finish_reason=str,
            usage=dict,
        ),
    ),
)
_MESSAGE = shape("response.choices[0].message", content=(str, list), refusal=str, tool_calls=list)
_PARTS = "chunk.choices[0].delta.content[]"
_THOUGHT_PARTS = "chunk.choices[0].delta.content[].thinking[]"


def _delta(
    asm: Assembler,
    delta: dict[str, Any],
    content: str | list[Any] | None,
    refusal: str | None,
    tool_calls: list[Any] | None,
    last_tool: list[Hashable],
    extras: ChatExtras,
) -> None:
    # One delta may carry reasoning, text and tool calls together; they go in that order.
    if not _REASONING_SET.isdisjoint(delta):
        for name in _REASONING_FIELDS:
            reasoning = optional_field(delta, name, str, _DELTA)
            if reasoning:
                if asm.is_open(_TEXT):
                    asm.end(_TEXT)
                asm.thinking(_THINKING, reasoning, signature=name)
                break
    if content:
        if type(content) is str:
            if asm.is_open(_THINKING):
                asm.end(_THINKING)
            asm.text(_TEXT, content)
        else:  # Mistral-style typed parts
            _content_parts(asm, content, extras)  # type: ignore[arg-type]
    if refusal:
        # OpenAI puts a refusal in its own field and still says `stop`: kept as text, and
        # the message ends as an error of kind refusal (CONTRACT 3.1).
        asm.text(_TEXT, refusal)
        asm.set_stop_reason(None, detail="refusal", rule="refusal")
    if not KNOWN_DELTA_FIELDS.issuperset(delta):
        extras.delta(delta)  # citations, files, server-run tools, any other field
    if tool_calls is None:
        return
    for tc in tool_calls:
        index, call_id, args, name = _TOOL_CALL(tc)  # an item not an object: named there
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
        if args is None:
            args = ""
        elif type(args) is dict:  # a server sending the arguments as an object
            args = json.dumps(args, ensure_ascii=False)
        asm.tool_call(key, args, id=call_id, name=name)
        last_tool[0] = key


class _ReasoningDetails:
    """Collects `SIGNATURE_FIELDS` fragments per thinking block, merged by item `index`
    (or type), and stores them on the block as the JSON signature `{field: [items]}` when
    the answer is complete (`settle`): once, not per fragment."""

    def __init__(self, asm: Assembler) -> None:
        self._asm = asm
        # (block, wire field, items by merge key), one entry per block and field.
        self._kept: list[tuple[ThinkingContent, str, dict[Hashable, dict[str, Any]]]] = []

    def add(self, delta: dict[str, Any]) -> None:
        for name in SIGNATURE_FIELDS:
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


def _content_parts(asm: Assembler, parts: list[Any], extras: ChatExtras) -> None:
    at = _PARTS  # one name for every part: no string built per delta
    for item in parts:
        if type(item) is not dict:
            continue  # not a part: nothing to keep
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
        elif ptype == "text" or ptype is None:
            text = optional_field(part, "text", str, at)
            if text:
                asm.end(_THINKING)
                asm.text(_TEXT, text)
        elif ptype == "reference":
            _reference(asm, part, extras)
        else:  # a part of a kind we do not type: kept as the vendor sent it
            extras.keep_part(part)


def _reference(asm: Assembler, part: dict[str, Any], extras: ChatExtras) -> None:
    """Mistral's `reference` chunk after the text it supports: citations on the open text
    block, spanning the text since the previous reference."""
    block = asm.block(_TEXT)
    if not isinstance(block, TextContent):
        block = None
    end = len(block.text) if block is not None else 0
    start = max((c.end or 0 for c in block.citations or ()), default=0) if block else 0
    for citation in reference_citations(part, min(start, end), end):
        asm.cite(_TEXT, citation)


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
    if "num_search_queries" in usage or "server_tool_use" in usage:
        counts = server_tool_counts(usage)
        if counts:
            asm.set_server_tools(counts)
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


def _parse_response(asm: Assembler, obj: Any, api: str) -> None:
    """A whole `chat.completion` (a proxy or server that ignored `stream: true`): its
    message is read as one delta, so it gives the same events as a stream in one piece."""
    body = as_object(obj, "response")
    extras = ChatExtras(asm, api)
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
            content, refusal, tools = _MESSAGE(message)
            _delta(asm, message, content, refusal, tools, [("tool", 0)], extras)
            details.add(message)
            details.settle()
        extras.top_level(body)
        extras.settle()
        asm.end_all()
        asm.set_stop_reason(optional_field(choice, "finish_reason", str, "response.choices[0]"))
        usage = usage or optional_field(choice, "usage", dict, "response.choices[0]")
    if usage:
        _usage(asm, usage)
    asm.finished = True


_Reader = Callable[[Assembler, Any], None]
translator, parse_response = chat_codec("openai-completions")
