"""How `vendor_bytes` says a stop reason and an error kind in each built-in API.

Read from the providers' own tables (each one's `WIRE.stop_reasons` and the error table its
decoder gives `error_from_vendor`), never written a second time: what the writer sends is
what the reader reads. A kind is said by an error event where the API's error table has a
word for it, else by a stop reason where its stop table has one (Anthropic's `refusal`,
Gemini's `SAFETY`, Bedrock's `guardrail_intervened`). The kinds an API has no word for are
`UNEXPRESSED` (the testing guide lists them): written as the API's own server error, they
come back `server`.
"""

from __future__ import annotations

import importlib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from .._dialects import DIALECTS, dialect
from .._errors import STATUS_KINDS, is_context_overflow
from .._kinds import BLOCK_KINDS
from .._types import Citation, ErrorKind
from ._faux import FauxTurn

__all__ = [
    "UNEXPRESSED",
    "Block",
    "ErrorWord",
    "Turn",
    "block_summary",
    "error_word",
    "http_error",
    "read_turn",
    "stop_word",
]

_ALL_KINDS: frozenset[ErrorKind] = frozenset(typing.get_args(ErrorKind))
_CLIENT: frozenset[ErrorKind] = frozenset(
    {"network", "aborted", "invalid_output", "budget", "expired"}
)
"""Kinds the client finds (a dropped connection, the caller's cancel, an answer that fails
its schema, a spent budget, a batch request its window ran out on): no vendor sends them in
an Anthropic, Gemini, Bedrock or Ollama stream."""

UNEXPRESSED: dict[str, frozenset[ErrorKind]] = {
    "anthropic-messages": _CLIENT | {"content_filter", "protocol"},
    "google-generative-ai": _CLIENT | {"context_overflow", "refusal"},
    "bedrock-converse-stream": _CLIENT | {"context_overflow", "refusal", "protocol"},
    # A mid-stream Ollama error is a bare message: `{"error": "..."}`.
    "ollama-chat": _ALL_KINDS - {"server"},
    "ollama-generate": _ALL_KINDS - {"server"},
}
"""The error kinds each API has no word for in a stream (APIs not named say every kind:
the OpenAI-style error events name it). `vendor_bytes` writes them as the API's server
error: they come back `server`, or `context_overflow` when the message is worded so."""

_MODULES = {
    "anthropic-messages": ("anthropic", "ERROR_TYPES"),
    "google-generative-ai": ("google", "ERROR_STATUSES"),
    "bedrock-converse-stream": ("bedrock", "EXCEPTION_KINDS"),
    "openai-completions": ("openai_completions", None),
    "mistral-conversations": ("mistral", None),
    "openai-responses": ("openai_responses", None),
    "ollama-chat": ("ollama", ""),
    "ollama-generate": ("ollama", ""),
}
"""Each API's provider module and its table of error words: None where the error event
names the kind itself (OpenAI-style `type` / `code`, read by `error_from_vendor`), "" where
the API has no error words (a bare message, read as `server`)."""


@dataclass(frozen=True)
class ErrorWord:
    """How an error kind is said: `event` (an error event with `word` as its type, code,
    status or exception name) or `stop` (`word` as the stop reason), and the `kind` the
    provider reads back."""

    how: Literal["event", "stop"]
    word: str
    kind: ErrorKind


def _first(table: Mapping[str, str], value: str) -> str | None:
    return next((word for word, means in table.items() if means == value), None)


@cache
def _tables(api: str) -> tuple[Mapping[str, str], Mapping[str, ErrorKind] | None]:
    """(stop table, error table) of `api`'s provider."""
    module_name, table = _MODULES[api]
    module = importlib.import_module(f"stream_core.providers.{module_name}")
    wire = module.GENERATE_WIRE if api == "ollama-generate" else module.WIRE
    if table is None:
        errors: Mapping[str, ErrorKind] | None = None
    else:
        errors = getattr(module, table) if table else {}
    return wire.stop_reasons, errors


def stop_word(api: str, stop: str) -> str:
    """The vendor's stop value for a portable stop reason (`stop`, `length`, `tool_use`):
    the first its provider reads as that (a call's stop is `stop` where the API has none)."""
    stops = _tables(api)[0]
    return _first(stops, stop) or _first(stops, "stop" if stop == "tool_use" else stop) or stop


def error_word(api: str, kind: ErrorKind, message: str = "") -> ErrorWord:
    """How `api` says `kind` mid-stream (see the module's docstring)."""
    if kind in UNEXPRESSED.get(api, ()):
        said = error_word(api, "server")
        back: ErrorKind = "context_overflow" if is_context_overflow(message) else "server"
        return ErrorWord(said.how, said.word, back)
    stops, errors = _tables(api)
    if errors is None:
        word: str | None = kind
    else:
        word = _first(errors, kind) if errors else ""
    if word is not None:
        back = kind
        if kind in ("invalid_request", "server") and is_context_overflow(message):
            back = "context_overflow"  # the provider reads the wording too
        return ErrorWord("event", word, back)
    stop = _first(stops, kind)
    if stop is None:
        raise AssertionError(f"{api} has no word for {kind!r}: add it to UNEXPRESSED")
    return ErrorWord("stop", stop, kind)


def http_status(kind: ErrorKind) -> int:
    """The HTTP status an error event of `kind` carries (500 where no status means it)."""
    return next((status for status, means in STATUS_KINDS.items() if means == kind), 500)


def http_error(
    api: str, kind: ErrorKind, message: str, status: int | None = None
) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of an HTTP error of `kind` as `api`'s server answers it: the
    dialect codec's `error_body` where the API has a dialect (Anthropic; OpenAI's, which
    Mistral and Responses share), else `status` (the one the library reads as `kind` by
    default) with Gemini's status word (`error_word`) or the bare message Bedrock and
    Ollama send. `status` overrides the dialect's own."""
    if api in DIALECTS or api == "mistral-conversations":  # Mistral's: OpenAI's shape
        codec = dialect(api if api in DIALECTS else "openai-completions")
        said, body = codec.error_body(kind, message)
        return status or said, body
    status = status or http_status(kind)
    if api == "google-generative-ai":
        word = error_word(api, kind, message).word
        return status, {"error": {"code": status, "message": message, "status": word}}
    return status, {"error": message} if api.startswith("ollama") else {"message": message}


# --- a faux turn as the writers read it ------------------------------------------------------


_SUMMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "server_tool_call": ("id", "name", "kind"),
    "server_tool_result": ("call_id",),
    "file": (),
    "approval_request": ("id",),
    "vendor": ("vendor_type",),
}
"""What a recording's `expect` says of a block of a `block_*` kind, by type."""


def block_summary(block: Any) -> dict[str, Any]:
    """A `block_*` kind's block as a recording's `expect` lists it (the contract kit's
    `check_expect` compares the keys an expectation names): `server_tool_call` {id, name,
    kind}, `server_tool_result` {call_id}, `file`, `approval_request` {id}, `vendor`
    {vendor_type}; any other kind by its type alone."""
    out: dict[str, Any] = {"type": block.type}
    for name in _SUMMARY_FIELDS.get(block.type, ()):
        out[name] = getattr(block, name)
    return out


@dataclass
class Block:
    """One scripted block. `kind`: `text`, `thinking`, `tool` (a call: `id`, `name`, its
    arguments' JSON in `text`), or `block`: any block of a `block_*` kind (server tool call
    or result, file, approval request, vendor block), typed, in `data`."""

    kind: str  # text | thinking | tool | block
    text: str = ""
    signature: str | None = None
    id: str = ""
    name: str = ""
    citations: list[Citation] = field(default_factory=list)
    """A text block's citations, in order."""
    data: Any = None
    """A `block`'s content block (`ServerToolCall`, `ServerToolResult`, `FileContent`,
    `ApprovalRequest`, `VendorContent`, ...)."""
    redacted: bool = False
    """A thinking block sent only as an encrypted payload (in `signature`)."""
    text_signature: str | None = None
    tool: dict[str, Any] = field(default_factory=dict)
    """A tool call's optional fields as scripted: `caller`, `builtin`, `raw`,
    `thought_signature` (absent when unset)."""
    pieces: list[str] = field(default_factory=list)
    """`text` as the turn's frames gave it, one non-empty piece a frame: the writers send
    each as one delta (a Gemini call in pieces as Vertex AI's `partialArgs`)."""


@dataclass
class Turn:
    blocks: list[Block] = field(default_factory=list)
    stop: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)
    error: tuple[str, str] | None = None  # (kind, message) as scripted
    said: ErrorWord | None = None  # how the API says the error
    vendor_stop: str = ""  # the API's stop value (an error's, where a stop says it)
    server_tools: dict[str, int] = field(default_factory=dict)
    """`Usage.server_tools`: vendor-run tool calls by kind (or vendor name)."""
    container: dict[str, Any] | None = None
    """`AssistantMessage.container`: the vendor's code-execution container."""

    @property
    def failed(self) -> tuple[str, str] | None:
        """(the API's error word, message) when an error event ends the turn."""
        if self.error is None or self.said is None or self.said.how != "event":
            return None
        return self.said.word, self.error[1]

    @property
    def detail(self) -> str | None:
        """An error's message where a stop reason says the error."""
        return self.error[1] if self.error is not None and self.failed is None else None


def read_turn(turn: FauxTurn, api: str) -> Turn:
    """A faux turn's frames as blocks, stop reason, usage and error, said in `api`."""
    out = Turn()
    by_index: dict[Any, Block] = {}
    for frame in turn.frames:
        if "error" in frame:
            out.error = (frame["error"].get("kind", "server"), frame["error"].get("message", ""))
        elif "done" in frame:
            out.stop = frame["done"].get("stop") or "stop"
            done = frame["done"]
            out.usage = {k: int(v) for k, v in (done.get("usage") or {}).items()}
            out.server_tools = {k: int(v) for k, v in (done.get("server_tools") or {}).items()}
            out.container = done.get("container") or None
        elif "block" in frame:
            data = frame["block"]
            new = Block("block", data=BLOCK_KINDS[data["type"]].cls.model_validate(data))
            by_index[frame.get("b")] = new
            out.blocks.append(new)
        elif "cite" in frame:
            index = frame.get("b")
            cited = by_index.get(index)
            if cited is None:  # a citation may come before its text
                cited = by_index[index] = Block("text")
                out.blocks.append(cited)
            cited.citations.append(Citation.model_validate(frame["cite"]))
        elif "text" in frame or "thinking" in frame or "args" in frame:
            index = frame.get("b")
            block = by_index.get(index)
            if block is None:
                if "tool" in frame:
                    tool = frame["tool"]
                    block = Block("tool", id=str(tool.get("id")), name=str(tool.get("name")))
                    block.tool = {k: v for k, v in tool.items() if k not in ("id", "name")}
                else:
                    block = Block("text" if "text" in frame else "thinking")
                by_index[index] = block
                out.blocks.append(block)
            piece = frame.get("text") or frame.get("thinking") or frame.get("args")
            if piece:
                block.pieces.append(piece)  # joined below: no copy per piece
            if frame.get("signature"):
                block.signature = frame["signature"]
            if frame.get("redacted"):
                block.redacted = True
            if frame.get("text_signature") is not None:
                block.text_signature = frame["text_signature"]
    for b in out.blocks:
        b.text = "".join(b.pieces)
    out.vendor_stop = stop_word(api, out.stop)
    if out.error is not None:
        kind, message = out.error
        if kind not in _ALL_KINDS:
            raise ValueError(f"vendor_bytes: {kind!r} is not an error kind (see ErrorKind)")
        out.said = error_word(api, kind, message)
        if out.said.how == "stop":
            out.vendor_stop = out.said.word
    return out
