"""The `faux` provider: a scripted model for testing code that uses stream-core.

Each turn is turned into a body in a tiny private NDJSON framing and served by an
in-memory transport, so the answer runs through the real pipeline (decoder, assembler,
grammar, retries, timeouts, cancel) exactly as a vendor's would; nothing leaves the process.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from pydantic import PrivateAttr, ValidationError

from .._blocks import SERVER_TOOL_KINDS
from .._decoding.fields import as_object, optional_field
from .._decoding.sse import NDJSONBytesDecoder
from .._errors import RETRYABLE_KINDS, RETRYABLE_STATUSES, ProtocolError, StreamFailure
from .._kinds import BLOCK_KINDS, kind_of
from .._models import Model, ModelPrices
from .._options import StreamOptions, copy_controls
from .._pipeline.assembler import Assembler, StopRule
from .._pipeline.stream import AssistantStream
from .._registry import get_provider, register_provider
from .._server_tools import ServerTool
from .._types import (
    AssistantMessage,
    Citation,
    Context,
    ErrorKind,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from .._wire import Translator, WireAPI, WireRequest, output_spec, parse_json
from ._faux_controls import CONTROLS, shape_turn

API = "faux"

_STOP_REASONS: dict[str, StopRule] = {
    "stop": "stop",
    "length": "length",
    "tool_use": "tool_use",
    "refusal": "refusal",
    "content_filter": "content_filter",
}
_USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")


@dataclass(frozen=True)
class FauxTurn:
    """One scripted answer: the frames of its body, and how the body ends."""

    frames: tuple[dict[str, Any], ...]
    stall_after: int | None = None
    """Send this many frames, then nothing more, ever (an idle timeout's case)."""
    cut_after: int | None = None
    """Send this many frames, then close the body (a dropped connection's case)."""
    status: int = 200
    http_body: bytes = b""
    """With a status other than 200: the error body sent instead of a stream."""
    error_kind: ErrorKind | None = None
    """The kind a `faux_error` turn names (kept as is, HTTP or in-stream)."""
    retry_after: float | None = None
    """Seconds a `faux_error` turn asks the caller to wait (`retry-after`)."""

    @property
    def retried(self) -> bool:
        """Whether the pipeline retries this turn (before any content): an HTTP error by
        its status, as a vendor's; an error event by its kind."""
        if self.error_kind is None:
            return False
        if self.status != 200:
            by_status = self.status in RETRYABLE_STATUSES or self.status >= 500
            return by_status and self.error_kind != "context_overflow"
        return self.error_kind in RETRYABLE_KINDS and len(self.frames) == 1


def faux_text(text: str, *, usage: Usage | None = None) -> FauxTurn:
    """A plain text answer."""
    return faux_message(_message([TextContent(text=text)], usage))


def faux_tool_call(
    name: str,
    arguments: dict[str, Any],
    *,
    id: str | None = None,
    text: str | None = None,
    usage: Usage | None = None,
) -> FauxTurn:
    """An answer calling one tool (after `text`, if given); ends `tool_use`."""
    blocks: list[TextContent | ThinkingContent | ToolCall] = []
    if text:
        blocks.append(TextContent(text=text))
    blocks.append(ToolCall(id=id or f"call_{name}", name=name, arguments=arguments))
    return faux_message(_message(blocks, usage))


def _message(
    blocks: Sequence[TextContent | ThinkingContent | ToolCall], usage: Usage | None
) -> AssistantMessage:
    return AssistantMessage(
        api=API, provider="faux", model="faux", content=list(blocks), usage=usage or Usage()
    )


def faux_error(
    kind: ErrorKind,
    message: str | None = None,
    *,
    status: int | None = None,
    retry_after: float | None = None,
) -> FauxTurn:
    """An answer that fails with `kind`: an error event in the stream, or with `status` an
    HTTP error response (`retry_after` seconds: its `retry-after` header, or the event's
    `retry_after`). The message's `error.kind` is `kind` either way. The pipeline retries
    it as a vendor's error (an HTTP error by its status: 408/409/429/5xx; an event by its
    kind), and the retry takes the script's next turn (set `max_retries=0` to see it)."""
    if status is not None and not 400 <= status <= 599:
        raise ValueError(f"faux_error status must be an HTTP error (400-599), got {status}")
    text = message or f"faux {kind} error"
    if status is not None:
        body = json.dumps({"error": {"type": kind, "message": text}}).encode()
        return FauxTurn(
            frames=(), status=status, http_body=body, error_kind=kind, retry_after=retry_after
        )
    frame: dict[str, Any] = {"kind": kind, "message": text}
    if retry_after is not None:
        frame["retry_after"] = retry_after
    return FauxTurn(frames=({"error": frame},), error_kind=kind, retry_after=retry_after)


def faux_stall(turn: FauxTurn | str | None = None, *, after: int = 0) -> FauxTurn:
    """Send the first `after` frames of `turn`, then hang (exercises `idle_timeout`)."""
    base = _as_turn(turn if turn is not None else "")
    return dataclasses.replace(base, stall_after=after)


def faux_cut(turn: FauxTurn | AssistantMessage | str, *, after: int) -> FauxTurn:
    """Send the first `after` frames of `turn`, then close the body early (EOF)."""
    return dataclasses.replace(_as_turn(turn), cut_after=after)


def faux_message(message: AssistantMessage) -> FauxTurn:
    """A turn answering exactly `message`: its blocks (text with its citations, thinking,
    tool calls, and every block of a `block_*` kind: server tool calls and results, files,
    approval requests, vendor blocks), stop reason, usage (server-tool counts included)
    and container. An `UnknownContent` block cannot be scripted: `ValueError`."""
    frames: list[dict[str, Any]] = []
    for i, block in enumerate(message.content):
        frames.extend(_block_frames(i, block))
        frames.append({"end": i})
    if message.stop_reason in ("error", "aborted") and message.error is not None:
        frames.append({"error": {"kind": message.error.kind, "message": message.error.message}})
        return FauxTurn(frames=tuple(frames))
    stop = message.stop_reason
    if stop == "stop" and any(isinstance(b, ToolCall) for b in message.content):
        stop = "tool_use"
    usage = {k: getattr(message.usage, k) for k in _USAGE_FIELDS}
    done: dict[str, Any] = {"stop": stop, "usage": usage}
    if message.usage.server_tools:
        done["server_tools"] = dict(message.usage.server_tools)
    if message.container:
        done["container"] = message.container
    frames.append({"done": done})
    return FauxTurn(frames=tuple(frames))


def _block_frames(i: int, block: Any) -> list[dict[str, Any]]:
    """The frames of content block `i` (before its `end`)."""
    frame: dict[str, Any]
    if isinstance(block, TextContent):
        frame = {"b": i, "text": block.text}
        if block.text_signature is not None:
            frame["text_signature"] = block.text_signature
        cites = [{"b": i, "cite": c.model_dump(mode="json")} for c in block.citations or ()]
        return [frame, *cites]
    if isinstance(block, ThinkingContent):
        frame = {"b": i, "thinking": block.thinking}
        if block.signature:
            frame["signature"] = block.signature
        if block.redacted:
            frame["redacted"] = True
        return [frame]
    if isinstance(block, ToolCall):
        args = block.partial_json if block.truncated else json.dumps(block.arguments)
        tool: dict[str, Any] = {"id": block.id, "name": block.name}
        for name in _CALL_EXTRAS:
            if getattr(block, name) is not None:
                tool[name] = getattr(block, name)
        return [{"b": i, "tool": tool, "args": args}]
    kind = kind_of(block)
    if kind is None or kind.family != "block":
        what = getattr(block, "type", type(block).__name__)
        raise ValueError(
            f"faux_message: block {i} ({what!r}) cannot be scripted: an UnknownContent has "
            "no kind to stream (use VendorContent for a vendor block)"
        )
    return [{"b": i, "block": block.model_dump(mode="json")}]


_CALL_EXTRAS = ("thought_signature", "caller", "builtin", "raw")
"""A tool call's optional fields a faux `tool` frame carries (when set)."""


def _as_turn(turn: FauxTurn | AssistantMessage | str) -> FauxTurn:
    if isinstance(turn, FauxTurn):
        return turn
    if isinstance(turn, AssistantMessage):
        return faux_message(turn)
    if isinstance(turn, str):
        return faux_text(turn)
    raise TypeError(
        f"a faux turn is a FauxTurn, AssistantMessage or str, not {type(turn).__name__}"
    )


@dataclass
class _Script:
    turns: list[FauxTurn]
    chunk_size: int | None
    delay: float
    contexts: list[Context] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    served: int = 0
    client: httpx.AsyncClient | None = None
    retrying: FauxTurn | None = None
    """The retryable error turn the current call's last attempt got (the pipeline asks
    again); None once a call gets anything else, and at each new call."""

    def next_response(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        self.requests.append(payload)
        if self.served >= len(self.turns):
            self.served += 1
            retried = self.retrying
            if retried is not None and retried.status != 200:
                # The call's own answer was a retryable HTTP error: the same answer, which
                # `_FauxStream` marks as retried and final (nothing left to answer with).
                return self._http_response(retried, {_RETRIED_HEADER: "1"})
            if retried is not None:
                error = {**retried.frames[0]["error"], "retryable": False}
                error["message"] = f"{error['message']}{_RETRIED_NOTE}"
                return _ndjson(b"".join(_lines([{"error": error}])))
            frame = {
                "error": {
                    "kind": "invalid_request",
                    "message": f"faux script exhausted: {len(self.turns)} turn(s) scripted, "
                    f"this is request {self.served}",
                }
            }
            return _ndjson(b"".join(_lines([frame])))
        turn = self.turns[self.served]
        self.served += 1
        self.retrying = turn if turn.retried else None
        if turn.status != 200:
            return self._http_response(turn, {})
        scripted: Sequence[dict[str, Any]] = turn.frames
        if turn.cut_after is not None or turn.stall_after is not None:
            # `after` counts the turn's own frames, before any chunk_size split.
            limit = turn.cut_after if turn.cut_after is not None else turn.stall_after
            scripted = turn.frames[:limit]
        # As a vendor would: tool_choice checked, stop and max_tokens applied.
        frames = list(self._split(shape_turn(scripted, payload, self.served)))
        return _ndjson(self._body(frames, stall=turn.stall_after is not None))

    def _http_response(self, turn: FauxTurn, extra: dict[str, str]) -> httpx.Response:
        headers = {"content-type": "application/json", **extra}
        if turn.error_kind is not None:
            headers[_KIND_HEADER] = turn.error_kind
        if turn.retry_after is not None:
            headers["retry-after"] = f"{turn.retry_after:g}"
        return httpx.Response(turn.status, headers=headers, content=turn.http_body)

    def _split(self, frames: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        size = self.chunk_size
        for frame in frames:
            key = next((k for k in ("text", "thinking", "args") if k in frame), None)
            value = frame.get(key) if key else None
            if size is None or not isinstance(value, str) or len(value) <= size:
                yield frame
                continue
            for n, start in enumerate(range(0, len(value), size)):
                piece = {k: v for k, v in frame.items() if n == 0 or k in ("b", key)}
                piece[key] = value[start : start + size]  # type: ignore[index]
                yield piece

    async def _body(self, frames: Sequence[dict[str, Any]], *, stall: bool) -> AsyncIterator[bytes]:
        for line in _lines(frames):
            if self.delay:
                await anyio.sleep(self.delay)
            yield line
        if stall:
            await anyio.sleep(math.inf)


_KIND_HEADER = "x-faux-error-kind"
_RETRIED_HEADER = "x-faux-retried"
_RETRIED_NOTE = " (the pipeline retried it: the faux script had no further answer)"


class _FauxStream(AssistantStream):
    """The pipeline's stream; an HTTP error of a `faux_error` turn keeps the kind it names
    (a vendor's gets the kind of its status and type)."""

    def _status_error(self, response: httpx.Response, error: StreamError) -> StreamError:
        kind = response.headers.get(_KIND_HEADER)
        if kind and kind != error.kind:
            error = error.model_copy(update={"kind": kind})
        if response.headers.get(_RETRIED_HEADER):
            note = error.message + _RETRIED_NOTE
            error = error.model_copy(update={"message": note, "retryable": False})
        return error


def _lines(frames: Iterable[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(f).encode() + b"\n" for f in frames]


def _ndjson(content: Any) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, content=content)


class FauxModel(Model):
    """A `Model` whose answers are scripted; see `faux_model`."""

    _script: _Script = PrivateAttr()

    @property
    def contexts(self) -> list[Context]:
        """The context of every call, in order: what the code under test sent."""
        return self._script.contexts

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body the pipeline sent (retries included): model, messages, ..."""
        return self._script.requests

    @property
    def remaining(self) -> int:
        """Turns not yet served."""
        return max(0, len(self._script.turns) - self._script.served)


_ids = itertools.count(1)


def faux_model(
    turns: Sequence[FauxTurn | AssistantMessage | str],
    *,
    chunk_size: int | None = None,
    delay: float = 0.0,
    id: str | None = None,
    prices: ModelPrices | None = None,
) -> FauxModel:
    """A model (api `faux`) answering successive calls with `turns`, in order.

    Text, thinking and tool-call arguments stream in deltas of `chunk_size` characters
    (whole when None), `delay` seconds apart. A call past the end of the script ends with
    an `invalid_request` error naming the exhaustion. `prices` (USD per million tokens)
    give its messages a cost, so a session's total stays known when a faux model takes
    part (a summarizer in a compaction test).
    """
    if chunk_size is not None and chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    _ensure_registered()
    model = FauxModel(
        id=id or f"faux-{next(_ids)}",
        name="faux",
        api=API,
        provider="faux",
        base_url="http://faux.invalid",
        reasoning=True,
        input=["text", "image"],
        prices=prices or ModelPrices(),
    )
    model._script = _Script([_as_turn(t) for t in turns], chunk_size, delay)
    return model


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    if not isinstance(model, FauxModel):
        raise TypeError("the faux provider serves models made by stream_core.testing.faux_model")
    script = model._script
    if script.client is None:
        # One in-memory client per script: no sockets, so it is safe across event loops.
        script.client = httpx.AsyncClient(transport=httpx.MockTransport(script.next_response))
    opts = dataclasses.replace(options or StreamOptions(), client=script.client)
    s = WIRE.open(model, context, opts)
    s.__class__ = _FauxStream  # the same stream, with faux HTTP errors keeping their kind
    script.retrying = None
    script.contexts.append(s._context)
    return s


# --- wire ---------------------------------------------------------------------------------


_FILE_TYPES = frozenset(
    {
        "application/pdf",
        "application/json",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "text/plain",
        "text/csv",
        "text/html",
        "text/markdown",
        "image/jpeg",
        "image/png",
        "image/gif",
        "image/webp",
    }
)
"""The files the faux model takes: documents, text and images some built-in API takes."""


def _server_tool_object(tool: ServerTool) -> dict[str, Any]:
    return tool.model_dump(mode="json")


_RECORDED = {c: c for c in CONTROLS if c != "output_schema"}
"""The controls recorded under their own names (the schema is recorded as sent)."""


def _build(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    payload = {"model": model.id, **context.model_dump(mode="json", exclude_none=True)}
    if options.max_tokens is not None:
        payload["max_tokens"] = options.max_tokens
    if options.temperature is not None:
        payload["temperature"] = options.temperature
    # Every control is recorded on the call (`FauxModel.requests`), the schema as sent.
    copy_controls(options, _RECORDED, payload)
    spec = output_spec(WIRE, model, options)
    if spec is not None:
        payload["output_schema"] = spec.schema
    return WireRequest(url="http://faux.invalid/v1/faux", payload=payload)


def _translator(asm: Assembler) -> Translator:
    def translate(event: str, data: str) -> None:
        frame = as_object(parse_json(data, "line"), "line")
        error = frame.get("error")
        if error is not None:
            err = as_object(error, "line.error")
            kind = optional_field(err, "kind", str, "line.error") or "server"
            message = optional_field(err, "message", str, "line.error") or ""
            retryable = optional_field(err, "retryable", bool, "line.error")
            retry_after = optional_field(err, "retry_after", float, "line.error")
            raise StreamFailure(
                StreamError(
                    kind=kind,  # type: ignore[arg-type]
                    message=message,
                    retryable=kind in RETRYABLE_KINDS if retryable is None else retryable,
                    retry_after=None if retry_after is None else float(retry_after),
                )
            )
        if "end" in frame:
            asm.end(("b", frame["end"]))
        elif "text" in frame:
            key = ("b", frame.get("b"))
            asm.text(key, frame["text"])
            if "text_signature" in frame:
                _text_signature(asm, key, frame)
        elif "thinking" in frame:
            key = ("b", frame.get("b"))
            signature = frame.get("signature")
            if frame.get("redacted") and not asm.is_open(key):
                # A redacted block may hold no text: open it so it is kept.
                asm.start_thinking(key, signature=signature, redacted=True)
            asm.thinking(key, frame["thinking"], signature=signature)
        elif "args" in frame:
            tool = as_object(frame.get("tool") or {}, "line.tool")
            key = ("b", frame.get("b"))
            asm.tool_call(
                key,
                frame["args"],
                id=optional_field(tool, "id", str, "line.tool"),
                name=optional_field(tool, "name", str, "line.tool"),
            )
            if len(tool) > 2:
                _call_extras(asm, key, tool)
        elif "block" in frame:
            asm.start_block(("b", frame.get("b")), _typed_block(frame["block"]))
        elif "cite" in frame:
            asm.cite(("b", frame.get("b")), _citation(frame["cite"]))
        elif "done" in frame:
            done = as_object(frame["done"], "line.done")
            asm.set_stop_reason(optional_field(done, "stop", str, "line.done"))
            usage = as_object(done.get("usage") or {}, "line.done.usage")
            asm.set_usage(**{k: usage[k] for k in _USAGE_FIELDS if k in usage})
            if "server_tools" in done:
                asm.set_server_tools(as_object(done["server_tools"], "line.done.server_tools"))
            if "container" in done:
                asm.set_container(as_object(done["container"], "line.done.container"))
            asm.finished = True

    return translate


def _typed_block(data: Any) -> Any:
    """A `block` frame's JSON as its typed block (`BLOCK_KINDS`, `block_*` kinds only)."""
    data = as_object(data, "line.block")
    kind = BLOCK_KINDS.get(optional_field(data, "type", str, "line.block") or "")
    if kind is None or kind.family != "block":
        raise ProtocolError(f"line.block: {data.get('type')!r} is not a block_* kind")
    try:
        return kind.cls.model_validate(data)
    except ValidationError as e:
        raise ProtocolError(f"line.block: not a valid {kind.type} block: {e}") from None


def _citation(data: Any) -> Citation:
    try:
        return Citation.model_validate(as_object(data, "line.cite"))
    except ValidationError as e:
        raise ProtocolError(f"line.cite: not a valid citation: {e}") from None


def _text_signature(asm: Assembler, key: Any, frame: dict[str, Any]) -> None:
    block = asm.block(key)
    if isinstance(block, TextContent):
        block.text_signature = optional_field(frame, "text_signature", str, "line")


def _call_extras(asm: Assembler, key: Any, tool: dict[str, Any]) -> None:
    """A tool frame's optional fields, set on the call it opened."""
    call = asm.block(key)
    if not isinstance(call, ToolCall):
        return  # a structured-output call streams as text
    for name in ("thought_signature", "builtin"):
        if name in tool:
            setattr(call, name, optional_field(tool, name, str, "line.tool"))
    for name in ("caller", "raw"):
        if name in tool:
            setattr(call, name, as_object(tool[name], f"line.tool.{name}"))


WIRE = WireAPI(
    api=API,
    terminal_event='a line with "done"',
    stop_reasons=_STOP_REASONS,
    build_request=_build,
    auth_headers=lambda model, key: {},
    translator=_translator,
    api_key_env=lambda model: None,
    key_required=lambda model: False,
    decoder=NDJSONBytesDecoder,
    controls=CONTROLS,
    output_mode=lambda model: "native",  # the scripted text is the structured answer
    rate_limited=False,  # scripted 429s must not pause the process's limiter for real
    # A harness's own context (web search asked for, a PDF sent) runs offline unchanged:
    # every portable server-tool kind and the files some built-in API documents. The
    # request records them as given (`FauxModel.requests`).
    server_tools={kind: _server_tool_object for kind in SERVER_TOOL_KINDS},
    file_types=_FILE_TYPES,
)


def _ensure_registered() -> None:
    try:
        if get_provider(API).stream is stream:
            return
    except ValueError:
        pass
    register_provider(API, stream, source="stream_core.testing", wire=WIRE)
