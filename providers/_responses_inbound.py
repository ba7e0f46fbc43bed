"""A Responses request read back into a `Context` and `StreamOptions`: the tested inverse
of the provider's request builder (`openai_responses._build_request`,
`_responses_input.convert_messages`), for the gateway serving `POST /v1/responses`.

- `instructions`, and the `system` / `developer` messages before the first turn, are the
  system prompt (joined by blank lines); such a message later in `input` is read as a
  user message (a context has one system prompt).
- `input` (a string, or items): user messages (`input_text`, `input_image`, `input_file`
  parts); the assistant side of a turn, every item from one user or tool-output item to
  the next, is ONE `AssistantMessage` (messages with their id and phase in
  `text_signature` and annotations as citations, reasoning items, function calls and the
  built-in, server and approval items, read as the translator reads them); tool outputs
  of every type are `ToolResultMessage`s. A reasoning item whose `encrypted_content` is a
  state carrier (`CARRIER_PREFIX`) is not content: `Inbound.carriers`.
- `tools`: function tools; a custom (freeform) tool as a function of one string
  argument `input` and `local_shell` as a function taking the command, so another
  vendor's model can call them (their calls come back as `function_call`s, which Codex
  runs); hosted tools as `ServerTool`s of a portable kind where the builder makes the
  same object back, else `ServerTool.native`.
- `tool_choice`, `parallel_tool_calls`, `max_output_tokens`, `temperature`, `top_p`,
  `reasoning.effort`, `text.format` (`output_schema`), `prompt_cache_key` (the session
  id) and `prompt_cache_retention` go into `StreamOptions`.

What is not read goes to `Inbound.unmodeled`: top-level fields as sent, and the parts of
read fields that have no place (`reasoning.summary` other than the default,
`reasoning.effort: xhigh` sent as `high`, `text.verbosity`) under their dotted path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stream_core import (
    AssistantMessage,
    Context,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
    VendorContent,
)
from stream_core.provider import (
    CARRIER_PREFIX,
    Inbound,
    RequestFieldError,
    StreamFailure,
    as_object,
    optional_field,
    required_field,
)

from ._responses_builtin import (
    CLIENT_CALLS,
    SERVER_RESULTS,
    _client_arguments,
    _client_name,
    _image,
    _reading,
    approval,
    citation,
    result_block,
    role,
    server_call,
)
from ._responses_inbound_parts import approval_answer, field_error, parts, tool_result
from ._responses_inbound_tools import namespace_names
from ._responses_inbound_tools import options as read_options
from ._responses_inbound_tools import tools as read_tools
from ._responses_items import part_texts
from .openai_responses import API

__all__ = ["parse_request"]

_READ = frozenset(
    {
        "model",
        "stream",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "text",
        "prompt_cache_key",
        "prompt_cache_retention",
    }
)
"""The top-level fields the parser reads; every other goes to `Inbound.unmodeled`."""

_OUTPUTS = frozenset({"function_call_output", *(out for _, _, out in CLIENT_CALLS.values())})
"""Item types that answer a call (a function call, or a built-in call the caller ran)."""

_HEADERS = ("openai-beta",)
"""Request headers the dialect defines, for a same-dialect upstream."""


def parse_request(body: Mapping[str, Any], headers: Mapping[str, str]) -> Inbound:
    """The client's Responses request as an `Inbound`; `RequestFieldError` names the field
    it cannot read."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestFieldError("model", "the model's name, a non-empty string")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestFieldError("stream", "a boolean")
    unmodeled = {k: v for k, v in body.items() if k not in _READ}
    history = _History(model)
    history.read(body.get("instructions"), body.get("input"))
    tools = read_tools(body.get("tools"))
    flattened = namespace_names(body.get("tools"))
    options = read_options(body, unmodeled)
    try:
        context = Context(
            system_prompt="\n\n".join(history.system) or None,
            messages=history.messages,
            tools=tools or None,
        )
    except ValidationError as e:  # pragma: no cover - every block is built typed
        raise RequestFieldError("input", str(e)) from None
    said = {k: headers[k] for k in _HEADERS if k in headers}
    return Inbound(
        model=model,
        context=context,
        options=options,
        stream=bool(stream),
        unmodeled=unmodeled,
        carriers=history.carriers,
        headers=said,
        tool_names=flattened,
    )


class _History:
    """`input` read item by item into messages (see the module's docstring)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.messages: list[Message] = []
        self.system: list[str] = []
        self.carriers: dict[int, str] = {}
        self.turn: AssistantMessage | None = None
        self.calls: dict[str, ToolCall] = {}
        self.last_search = ""
        self.leading = True

    def read(self, instructions: Any, items: Any) -> None:
        if isinstance(instructions, str):
            if instructions:
                self.system.append(instructions)
        elif instructions is not None:
            raise RequestFieldError("instructions", "a string")
        if isinstance(items, str):
            self.add(UserMessage(content=items))
            return
        if items is None:
            return
        if not isinstance(items, list):
            raise RequestFieldError("input", "a string or a list of items")
        for i, raw in enumerate(items):
            where = f"input[{i}]"
            if not isinstance(raw, dict):
                raise RequestFieldError(where, "an item: a JSON object")
            try:
                self.item(raw, where)
            except StreamFailure as e:
                raise field_error(e.error, where) from None

    def add(self, message: Message) -> None:
        self.turn = None
        self.leading = False
        self.messages.append(message)

    def assistant(self) -> AssistantMessage:
        """The assistant message the current run of assistant-side items fills."""
        self.leading = False
        if self.turn is None:
            self.turn = AssistantMessage(api=API, provider="openai", model=self.model)
            self.messages.append(self.turn)
        return self.turn

    def item(self, item: dict[str, Any], where: str) -> None:
        itype = optional_field(item, "type", str, where)
        if itype in (None, "message"):
            self.message(item, where)
        elif itype == "reasoning":
            self.reasoning(item, where)
        elif itype == "function_call":
            self.function_call(item, where)
        elif itype == "mcp_approval_response":
            self.add(UserMessage(content=[approval_answer(item, where)]))
        elif itype in _OUTPUTS and self.answers(item, itype, where):
            call = self.calls.get(required_field(item, "call_id", str, where))
            self.add(tool_result(item, itype, call, where))
        else:
            self.other(item, itype, where)

    def answers(self, item: dict[str, Any], itype: str, where: str) -> bool:
        """Whether an output item answers a call the client ran (else the vendor ran it:
        a hosted shell's output, a server tool search's)."""
        call = self.calls.get(optional_field(item, "call_id", str, where) or "")
        return itype not in SERVER_RESULTS or (call is not None and bool(call.builtin))

    def message(self, item: dict[str, Any], where: str) -> None:
        role_ = item.get("role")
        if role_ in ("system", "developer"):
            text = _plain_text(item.get("content"), f"{where}.content")
            if self.leading:
                self.system.append(text)
            else:
                self.add(UserMessage(content=text))
        elif role_ == "user":
            content = item.get("content")
            if isinstance(content, str):
                self.add(UserMessage(content=content))
            else:
                self.add(UserMessage(content=parts(content, f"{where}.content")))
        elif role_ == "assistant":
            block = _assistant_text(item, where)
            if block is not None:
                self.assistant().content.append(block)
        else:
            raise RequestFieldError(f"{where}.role", "one of user, assistant, system, developer")

    def reasoning(self, item: dict[str, Any], where: str) -> None:
        encrypted = optional_field(item, "encrypted_content", str, where)
        turn = self.assistant()
        if encrypted and encrypted.startswith(CARRIER_PREFIX):
            self.carriers[len(self.messages) - 1] = encrypted
            return
        texts = part_texts(item, "summary", where) or part_texts(item, "content", where)
        if encrypted:
            # The whole item, as the translator keeps it: it goes back to its model.
            signature = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            block = ThinkingContent(
                thinking="\n\n".join(texts), signature=signature, redacted=not texts
            )
        elif texts:
            block = ThinkingContent(thinking="\n\n".join(texts))
        else:
            return  # nothing to read, nothing to send back
        turn.content.append(block)

    def function_call(self, item: dict[str, Any], where: str) -> None:
        call_id = required_field(item, "call_id", str, where)
        name = required_field(item, "name", str, where)
        text = optional_field(item, "arguments", str, where) or ""
        try:
            arguments = json.loads(text) if text.strip() else {}
        except ValueError:
            arguments = None
        call = ToolCall(id=call_id, name=name, arguments=arguments or {})
        if not isinstance(arguments, dict):
            call.truncated = True  # not a JSON object: a call never to be run
            call.partial_json = text
        item_id = optional_field(item, "id", str, where)
        if item_id:
            call.thought_signature = item_id
        caller = optional_field(item, "caller", dict, where)
        if caller is not None or "namespace" in item:
            call.caller, call.raw = caller, item
        self.calls[call_id] = call
        self.assistant().content.append(call)

    def other(self, item: dict[str, Any], itype: str | None, where: str) -> None:
        """Every other item, as the translator reads it (`_responses_builtin`)."""
        kind = role(item, itype) if itype is not None else "vendor"
        turn = self.assistant()
        if kind == "client" and itype is not None:
            call_id = optional_field(item, "call_id", str, where) or ""
            call = ToolCall(
                id=call_id,
                name=_client_name(item, itype, where),
                arguments=_client_arguments(item, itype),
                builtin=itype,
                raw=item,
            )
            item_id = optional_field(item, "id", str, where)
            if item_id:
                call.thought_signature = item_id
            self.calls[call_id] = call
            turn.content.append(call)
        elif kind == "server" and itype is not None:
            server = server_call(item, itype, where)
            server.raw = item
            turn.content.append(server)
            if itype == "tool_search_call":
                self.last_search = server.id
            found: Any = (
                _image(item, server.id, where)
                if itype == "image_generation_call"
                else _reading(item, itype, server, where)
            )
            if found is not None:
                turn.content.append(found)
        elif kind == "result" and itype is not None:
            turn.content.append(result_block(item, itype, where, self.last_search))
        elif kind == "approval":
            turn.content.append(approval(item, where))
        else:
            turn.content.append(VendorContent(api=API, data=item))


def _plain_text(content: Any, where: str) -> str:
    """A system or developer message's text (a string, or text parts joined)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestFieldError(where, "a string or a list of text parts")
    texts = []
    for j, raw in enumerate(content):
        part = as_object(raw, f"{where}[{j}]")
        if part.get("type") not in ("input_text", "output_text", "text"):
            raise RequestFieldError(f"{where}[{j}].type", "a system message holds text parts")
        texts.append(required_field(part, "text", str, f"{where}[{j}]"))
    return "\n\n".join(texts)


def _assistant_text(item: dict[str, Any], where: str) -> TextContent | None:
    """An assistant message item as the translator reads it: one text block of its parts,
    their annotations as citations (spans from the start of the block), its id and phase
    in `text_signature`."""
    content = item.get("content")
    if isinstance(content, str):
        return TextContent(text=content) if content else None
    if not isinstance(content, list):
        raise RequestFieldError(f"{where}.content", "a string or a list of output_text parts")
    texts: list[str] = []
    citations = []
    offset = 0
    for j, raw in enumerate(content):
        at = f"{where}.content[{j}]"
        part = as_object(raw, at)
        ptype = part.get("type")
        if ptype in ("output_text", "input_text", "text"):
            text = optional_field(part, "text", str, at) or ""
        elif ptype == "refusal":
            text = optional_field(part, "refusal", str, at) or ""
        else:
            raise RequestFieldError(f"{at}.type", "an assistant message holds output_text parts")
        for note in optional_field(part, "annotations", list, at) or ():
            if isinstance(note, dict):
                citations.append(citation(note, offset))
        texts.append(text)
        offset += len(text)
    signature = {}
    for key in ("id", "phase"):
        value = optional_field(item, key, str, where)
        if value:
            signature[key] = value
    block = TextContent(text="".join(texts), citations=citations or None)
    if signature:
        block.text_signature = json.dumps(signature, separators=(",", ":"))
    return block if block.text or signature or citations else None
