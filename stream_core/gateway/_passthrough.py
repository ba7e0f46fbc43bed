"""Same dialect, byte-faithful: the client's body to the upstream, the upstream's bytes back.

When every deployment a model name maps to speaks the client's own dialect, the gateway
does not translate. The call still goes through `stream()`, so routes, retries, quotas,
budgets, usage and OpenTelemetry all apply, but:

- the request sent is the client's JSON body as it came (`StreamOptions.on_payload`),
  only `model` set to the upstream's id (and what the request builder writes to address
  the endpoint, e.g. Vertex AI's `anthropic_version`); `stream` stays as the client asked;
- the dialect's own request headers are the client's (`anthropic-beta` exactly as sent,
  none when it sent none; `anthropic-version`), never its credentials;
- what the client receives is the upstream's bytes, as they arrive (`_tee`), not the
  encoder's: the library reads the same bytes for usage, limits and the access log. A
  failed attempt's bytes (a 429 before a route falls over) never reach the client.

The client's request is still read by its codec, for the estimates quotas and routes
make; a request the codec cannot read is never refused here (a rough context stands in).
A history holding the gateway's state carriers (from an earlier turn on another vendor)
takes the translated path, which takes them out.

Errors before content: the upstream's own status and body when the last attempt answered
the dialect's error (`{"error": {...}}`) and that error is the call's; a stream the
upstream ended itself (an error event, a refusal, an empty answer) is forwarded as it is;
anything else (no connection, a timeout, a route with nothing left) is the codec's error.
After content, a stream cut by the network or a timeout ends with the dialect's error
event after the last whole frame.

Chat Completions: a streamed call whose request builder asks for usage
(`stream_options.include_usage`) sends it even when the client did not, so the call is
counted; the usage-only chunk is then not forwarded (every other chunk is, with its
`"usage": null`). A non-streamed call is answered with the upstream's JSON body unchanged
(the upstream is given `first_byte_timeout` of at least `NON_STREAMED_FIRST_BYTE`); when
the upstream streamed anyway, the codec writes the body from the message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from stream_core import (
    AssistantMessage,
    Context,
    Model,
    Route,
    StreamError,
    StreamOptions,
    UserMessage,
    stream,
)
from stream_core.provider import DIALECTS, Inbound, RequestFieldError

from . import _tee
from ._calls import upstream_api, watch_disconnect
from ._scrub import scrub

if TYPE_CHECKING:
    from ._calls import Receive, Send
    from ._exchange import Exchange

__all__ = ["NON_STREAMED_FIRST_BYTE", "passthrough"]

logger = logging.getLogger("stream_core.gateway")

NON_STREAMED_FIRST_BYTE = 600.0
"""The least `first_byte_timeout` of a non-streamed same-dialect call: its headers come
when the whole answer is written."""
TAIL_WAIT = 5.0
"""After the message's end, how long the rest of the upstream's body (a trailing
`data: [DONE]`) is waited for before the client's response is closed."""

DIALECT_HEADERS: dict[str, dict[str, str]] = {
    "anthropic-messages": {"anthropic-beta": "exact", "anthropic-version": "replace"},
}
"""Per dialect: the request headers the client's value is sent for. `exact`: the
upstream gets the client's value, or none when the client sent none (the builder's own
betas are the translated path's); `replace`: the client's value replaces the builder's,
where the builder writes one (Vertex AI takes no `anthropic-version`)."""

NEVER_FORWARDED = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "accept-encoding",
    }
)
"""Headers a codec's `Inbound.headers` may list that are never sent on: credentials (the
upstream gets the gateway's key) and the framing of the client's own request."""

ANSWER_HEADERS = ("content-type", "request-id", "x-request-id", "retry-after", "retry-after-ms")
"""The upstream response headers the client gets with its bytes (and `content-encoding`
when the upstream compressed them): its rate-limit and organisation headers stay."""

LOCAL_KINDS = frozenset({"network", "timeout", "protocol", "aborted"})
"""Error kinds found by the library rather than said in the upstream's bytes: a body cut
by the network or a timeout, or one that broke its format."""

_BINARY_KEYS = frozenset({"data", "url", "image_url", "file_data", "signature"})
_BINARY_KEYS |= {"encrypted_content", "model"}


async def passthrough(
    exchange: Exchange, body: dict[str, Any], headers: dict[str, str], send: Send, receive: Receive
) -> bool:
    """Serve `body` byte-faithfully when the model name's every deployment speaks the
    client's dialect; False (nothing sent) when the translated path serves it."""
    api = exchange.dialect.api
    name = body.get("model")
    if not isinstance(name, str) or api not in DIALECTS:
        return False
    target = exchange.config.target(name)
    if target is None or upstream_api(target) != {api}:
        return False
    inbound = _read(exchange, body, headers, name)
    if inbound.carriers:
        return False
    exchange.reply.model = name
    await _Call(exchange, body, headers, inbound, target).run(send, receive)
    return True


def _read(exchange: Exchange, body: dict[str, Any], headers: dict[str, str], name: str) -> Inbound:
    """The codec's reading of the request, or a rough one when it cannot read it."""
    try:
        return exchange.dialect.parse_request(body, headers)
    except Exception as exc:  # a codec's refusal, or a shape it does not know: forwarded
        logger.debug("passthrough: the codec could not read the request (%s)", exc)
        return rough_inbound(body, name)


def rough_inbound(body: Mapping[str, Any], name: str) -> Inbound:
    """A context that stands in for a request the codec cannot read: one user message
    holding the request's strings (base64 data and URLs left out), so the estimates
    quotas make stay of the right size; the output limit as the client set it."""
    texts: list[str] = []
    stack: list[Any] = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            stack.extend(v for k, v in value.items() if k not in _BINARY_KEYS)
        elif isinstance(value, list):
            stack.extend(value)
    options = StreamOptions()
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            options.max_tokens = value
            break
    text = "\n".join(reversed(texts)) or "."
    context = Context(messages=[UserMessage(content=text)])
    return Inbound(model=name, context=context, options=options, stream=body.get("stream") is True)


class _Call:
    """One same-dialect call: the upstream's answer forwarded (module docstring)."""

    def __init__(
        self,
        exchange: Exchange,
        body: dict[str, Any],
        headers: dict[str, str],
        inbound: Inbound,
        target: Model | Route,
    ) -> None:
        self.exchange = exchange
        self.body = body
        self.name = inbound.model
        self._echoed = False
        self.inbound = inbound
        self.target = target
        self.streamed = body.get("stream") is True
        self.api = exchange.dialect.api
        modes = DIALECT_HEADERS.get(self.api, {})
        self.watching = anyio.CancelScope()
        self.tee = _tee.Tee(
            _request_headers(self.api, inbound, headers),
            frozenset(n for n, mode in modes.items() if mode == "replace"),
            check=_tee.FrameCheck(self.api) if self.streamed else None,
        )

    # --- the request ------------------------------------------------------------------

    def payload(self, payload: dict[str, Any], model: Model) -> dict[str, Any]:
        """`StreamOptions.on_payload`: the client's body, addressed to `model`."""
        out = dict(self.body)
        if "model" in payload:
            out["model"] = payload["model"]
        else:
            out.pop("model", None)
        if "anthropic_version" in payload and "anthropic_version" not in out:
            out["anthropic_version"] = payload["anthropic_version"]
        injected = False
        asked = payload.get("stream_options")
        if self.streamed and isinstance(asked, dict) and asked.get("include_usage") is True:
            theirs = out.get("stream_options")
            theirs = theirs if isinstance(theirs, dict) else {}
            if theirs.get("include_usage") is not True:
                out["stream_options"] = {**theirs, "include_usage": True}
                injected = True
        self.tee.drop_usage_chunk = injected
        return out

    async def _options(self, inbound: Inbound) -> StreamOptions:
        options = self.exchange._options(inbound, self.target)
        options.client = await _tee.gateway_client()
        options.on_payload = self.payload
        options.output_schema = None  # the client reads the answer itself
        if not self.streamed and options.first_byte_timeout is not None:
            options.first_byte_timeout = max(options.first_byte_timeout, NON_STREAMED_FIRST_BYTE)
        return options

    async def _open(self) -> Any:
        """The call's stream; a context the library refuses gives way to a rough one (the
        upstream judges the request). The exception when that is refused all the same."""
        try:
            return stream(self.target, self.inbound.context, await self._options(self.inbound))
        except (TypeError, ValueError) as exc:
            logger.debug("passthrough: the library refused the codec's reading (%s)", exc)
        rough = rough_inbound(self.body, self.name)
        try:
            return stream(self.target, rough.context, await self._options(rough))
        except (TypeError, ValueError) as exc:
            return exc

    # --- the answer -------------------------------------------------------------------

    async def run(self, send: Send, receive: Receive) -> None:
        token = _tee.current.set(self.tee)
        try:
            opened = await self._open()
            if isinstance(opened, Exception):
                self.watching.cancel()
                await self.exchange._error(send, "invalid_request", str(opened))
                return
            if self.streamed:
                await self._stream(opened, send, receive)
            else:
                await self._complete(opened, send, receive)
        finally:
            _tee.current.reset(token)

    async def _stream(self, opened: Any, send: Send, receive: Receive) -> None:
        tee = self.tee
        reply = self.exchange.reply
        started = False
        message: AssistantMessage | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, receive, tg.cancel_scope)
            async with opened as s:
                async for event in s:
                    kind = event.type
                    if kind == "message_end":
                        message = event.message
                        self._note(message)
                    if not started:
                        if kind == "message_start":
                            continue
                        if message is not None and not self._forwardable(message):
                            await self._refuse(send, message)
                            break
                        if not await self._start(send):
                            break
                        started = True
                    chunk = tee.take()
                    if chunk and not self._echoed:
                        chunk = self._echo_model(chunk)
                    if chunk:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if started:
                await self._end(send, message)
            tg.cancel_scope.cancel()
        if reply.message is None and message is not None:
            reply.message = message

    async def _complete(self, opened: Any, send: Send, receive: Receive) -> None:
        message: AssistantMessage | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, receive, tg.cancel_scope)
            async with opened as s:
                message = await s.result()
            tg.cancel_scope.cancel()
        if message is None:
            return  # the client went away
        self._note(message)
        attempt = self.tee.current
        whole = attempt is not None and 200 <= attempt.status < 300
        error = message.error
        sound = error is None or error.kind not in LOCAL_KINDS  # the library read it whole
        if whole and sound and attempt is not None and _is_json(attempt.media):
            with anyio.move_on_after(TAIL_WAIT):
                await attempt.ended.wait()
            body = attempt.body() if attempt.eof else b""
            if _json_object(body):
                await self._send_whole(send, attempt.status, attempt, self._echo_model(body))
                return
        if not self.exchange._failed(message, whole=True):
            payload = self.exchange.dialect.message_body(message, self.name, None)
            self.exchange.reply.status = 200
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            self.watching.cancel()
            await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
            return
        await self._refuse(send, message)

    def _echo_model(self, chunk: bytes) -> bytes:
        """An Anthropic answer's first `model` (its `message_start`'s, or the Message's)
        said as the name the client asked for: Claude Code keeps the signed thinking of
        an answer only while that model is the one it asked for, and without it the next
        turn of a tool loop is refused. The only byte the gateway changes on this path."""
        if self.exchange.dialect.api != "anthropic-messages":
            self._echoed = True
            return chunk
        found = _MODEL_FIELD.search(chunk)
        if found is None:
            return chunk
        self._echoed = True
        said = json.dumps(self.name).encode()  # ASCII: a lone surrogate stays escaped
        return chunk[: found.start(1)] + said + chunk[found.end(1) :]

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """The exchange's disconnect watcher, until the last byte goes out (`watching` is
        cancelled just before): a server answers `http.disconnect` once a response is
        finished, which is no client going away."""
        with self.watching:
            await watch_disconnect(receive, scope, self.exchange.reply)

    def _note(self, message: AssistantMessage) -> None:
        reply = self.exchange.reply
        reply.message = message
        reply.upstream = f"{message.provider}/{message.model}"

    def _forwardable(self, message: AssistantMessage) -> bool:
        """Whether a message that ended before any content is answered with the
        upstream's own stream (its error event, refusal or empty answer)."""
        attempt = self.tee.current
        if attempt is None or not 200 <= attempt.status < 300:
            return False
        error = message.error
        return error is None or error.kind not in LOCAL_KINDS

    async def _refuse(self, send: Send, message: AssistantMessage) -> None:
        """An error before content: the upstream's own when it is the call's and in the
        dialect's shape, else the codec's."""
        attempt = self.tee.current
        error = message.error
        if (
            attempt is not None
            and error is not None
            and attempt.status >= 400
            and error.status_code == attempt.status
            and error.kind not in VENDOR_KEY_KINDS
        ):
            with anyio.move_on_after(TAIL_WAIT):
                await attempt.ended.wait()
            body = attempt.body()
            if _dialect_error(body):
                self.exchange.reply.error = error.kind
                await self._send_whole(send, attempt.status, attempt, body)
                return
        self.watching.cancel()
        await self.exchange._fail(send, message)

    async def _start(self, send: Send) -> bool:
        """The response's head, from the serving attempt; False (an error sent) when no
        upstream response is there to forward."""
        attempt = self.tee.current
        if attempt is None or not 200 <= attempt.status < 300:
            self.watching.cancel()
            await self.exchange._error(send, "server", "no upstream answer to forward")
            return False
        self.tee.committed = True
        headers = _answer_headers(attempt, self.exchange.dialect.media_type)
        headers.append((b"cache-control", b"no-cache"))
        self.exchange.reply.status = attempt.status
        await send({"type": "http.response.start", "status": attempt.status, "headers": headers})
        return True

    async def _end(self, send: Send, message: AssistantMessage | None) -> None:
        """The rest of the upstream's body (its sound frames: `FrameCheck`); a body that
        did not end with the dialect's terminal event (cut by the network or a timeout,
        broken, or ended by an error the dialect does not end with) gets one, after its
        last whole frame."""
        tee = self.tee
        attempt = tee.current
        error = message.error if message is not None else None
        local = error is not None and error.kind in LOCAL_KINDS
        if attempt is not None and not local:
            with anyio.move_on_after(TAIL_WAIT):
                await attempt.ended.wait()
        tail = b"" if attempt is None or (local and attempt.encoded) else tee.take(whole=not local)
        check = tee.check
        if check is not None and not check.ended and attempt is not None and not attempt.encoded:
            tail += self._closing(message, check)
        self.watching.cancel()
        await send({"type": "http.response.body", "body": tail, "more_body": False})

    def _closing(self, message: AssistantMessage | None, check: _tee.FrameCheck) -> bytes:
        """The dialect's terminal event for a stream the upstream did not end with one
        (or with one a client cannot read): after an answer that ended well, its end
        (`message_stop`, `response.completed`, `[DONE]`); else its error (Responses:
        `response.failed`); nothing for a client that went away."""
        error = message.error if message is not None else None
        if check.broken:
            error = StreamError(kind="protocol", message="the upstream's stream broke its format")
        elif message is not None and message.stop_reason not in ("error", "aborted"):
            if self.api == "openai-completions":
                return b"data: [DONE]\n\n"
            if self.api == "anthropic-messages":
                return b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
            return self._responses_end(message, check)
        kind = error.kind if error is not None else "network"
        text = error.message if error is not None else "the upstream's stream ended early"
        if kind == "aborted":
            if not getattr(self.exchange, "_stopped", False):
                return b""  # the client went away: no one to tell
            kind, text = "overloaded", "the gateway is shutting down; try again"
        dialect = self.exchange.dialect
        if self.api == "openai-responses" and message is not None:
            said = StreamError(kind=kind, message=scrub(text))
            failed = message.model_copy(update={"stop_reason": "error", "error": said})
            return self._responses_end(failed, check)
        _, payload = dialect.error_body(kind, scrub(text))
        head = b"data: " if self.api == "openai-completions" else b"event: error\ndata: "
        return head + json.dumps(payload).encode() + b"\n\n"

    def _responses_end(self, message: AssistantMessage, check: _tee.FrameCheck) -> bytes:
        """A Responses stream's terminal event, holding the whole answer (its codec's)."""
        response = self.exchange.dialect.message_body(message, self.name, None)
        status = response.get("status")
        kind = f"response.{status if status in ('incomplete', 'failed') else 'completed'}"
        event = {"type": kind, "sequence_number": check.sequence + 1, "response": response}
        return f"event: {kind}\ndata: ".encode() + json.dumps(event).encode() + b"\n\n"

    async def _send_whole(
        self, send: Send, status: int, attempt: _tee.Attempt, body: bytes
    ) -> None:
        self.exchange.reply.status = status
        headers = _answer_headers(attempt, "application/json")
        await send({"type": "http.response.start", "status": status, "headers": headers})
        self.watching.cancel()
        await send({"type": "http.response.body", "body": body})


def _request_headers(
    api: str, inbound: Inbound, headers: Mapping[str, str]
) -> dict[str, str | None]:
    """What `Tee.begin` sets on each upstream request (see `DIALECT_HEADERS`)."""
    out: dict[str, str | None] = {}
    for name, value in inbound.headers.items():
        name = name.lower()
        if name not in NEVER_FORWARDED and isinstance(value, str):
            out[name] = value
    for name, mode in DIALECT_HEADERS.get(api, {}).items():
        sent = headers.get(name) or out.get(name)
        if sent is not None:
            out[name] = sent
        elif mode == "exact":
            out[name] = None
    for name, said in out.items():
        if said is not None and not _HEADER_VALUE.fullmatch(said):
            raise RequestFieldError(name, "a header of printable ASCII (as the vendor takes it)")
    return out


_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
"""A header value an upstream request can carry (RFC 9110 field content, ASCII)."""


def _answer_headers(attempt: _tee.Attempt, media: str) -> list[tuple[bytes, bytes]]:
    got = attempt.headers
    out = [(b"content-type", (got.get("content-type") or media).encode("latin-1"))]
    for name in ANSWER_HEADERS[1:]:
        value = got.get(name)
        if value is not None:
            out.append((name.encode(), value.encode("latin-1")))
    if attempt.encoded:
        out.append((b"content-encoding", got["content-encoding"].encode("latin-1")))
    return out


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


VENDOR_KEY_KINDS = frozenset({"auth", "permission"})
"""Errors about the gateway's own vendor key: never forwarded as the vendor wrote them (a
vendor may quote part of the key, and the client's key is the gateway's, not this one)."""


_MODEL_FIELD = re.compile(rb'"model"\s*:\s*("(?:[^"\\]|\\.)*")')
"""The first `"model": "..."` of an Anthropic answer (group 1: the JSON string)."""


def _json_object(body: bytes) -> bool:
    """Whether a whole answer's body is a JSON object (an upstream may say
    `application/json` of anything)."""
    try:
        return isinstance(json.loads(body), dict)
    except (ValueError, RecursionError):
        return False


def _dialect_error(body: bytes) -> bool:
    """Whether an error body is in the shape every dialect here shares: a JSON object
    whose `error` is an object (Anthropic adds `"type": "error"`)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("error"), dict)
