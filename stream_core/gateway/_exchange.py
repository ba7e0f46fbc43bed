"""One client request through the gateway: read, route, stream, answer in the dialect.

The request is read by its dialect's codec into a `Context` and `StreamOptions`, sent to
the model or route its model name maps to with `stream()`, and the events come back
written by the dialect's encoder as they arrive. Nothing reaches the client before the
first content: an error before it (a route with nothing left to try included) is answered
as the dialect's HTTP error, with its status; after it, as the dialect's mid-stream error.

Each chunk is awaited as it is sent, so a client that stops reading stops the reading of
the upstream (the server's write buffer is the only buffer); a client that goes away
cancels the upstream call at once; `stop()` (the server shutting down) ends the call
cleanly, as an abort the client's dialect closes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import anyio

from stream_core import (
    AssistantMessage,
    Model,
    Route,
    StreamError,
    StreamOptions,
    TextContent,
    UserMessage,
    stream,
)
from stream_core.provider import Dialect, Inbound, RequestFieldError

from . import _state
from ._calls import Receive, Send, upstream_api, watch_disconnect
from ._config import GatewayConfig, GatewayKey
from ._fit import fit_options, fit_server_tools
from ._passthrough import passthrough
from ._scrub import scrub, scrub_error

__all__ = ["Exchange", "Reply"]


DEGRADATIONS: dict[str, dict[str, str]] = {
    "anthropic-messages": {
        "metadata": "user_id is not sent to a foreign upstream",
        "context_management": "context edits are not applied for a foreign upstream: the "
        "history goes as the client sent it",
    },
    "openai-responses": {
        "store": "the gateway keeps nothing: store is not sent to a foreign upstream",
        "include": "what can be carried is carried: include is not sent to a foreign upstream",
        "prompt_cache_key": "sent as the session id where the upstream caches by it",
        "user": "not sent to a foreign upstream",
        "safety_identifier": "not sent to a foreign upstream",
        "service_tier": "not sent to a foreign upstream",
        "client_metadata": "not sent to a foreign upstream",
        "text.verbosity": "not sent to a foreign upstream (no such control)",
        "reasoning.summary": "thinking is shown as the upstream gives it, summarized or not",
        "reasoning.generate_summary": "thinking is shown as the upstream gives it",
        "reasoning.effort": "xhigh is sent as high, the highest effort stream-core names",
    },
    "openai-completions": {
        "user": "not sent to a foreign upstream",
        "stream_options": "usage is always reported",
        "n": "n=1 only (any other n is refused by the codec, naming it)",
        "store": "not sent to a foreign upstream",
        "metadata": "not sent to a foreign upstream",
        "service_tier": "not sent to a foreign upstream",
        "safety_identifier": "not sent to a foreign upstream",
        "prompt_cache_key": "sent as the session id where the upstream caches by it",
    },
}
"""Per dialect: the top-level fields a foreign upstream does without, and what becomes of
them (the gateway guide's tables print this). Any other field the codec leaves unread is
refused with a 400 naming it."""


@dataclass
class Reply:
    """What the exchange learned, for the access log: status, upstream, usage."""

    status: int = 200
    model: str = ""
    upstream: str = ""
    message: AssistantMessage | None = None
    error: str | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    prompt: str | None = None
    """The last user message's text, kept only with `GatewayConfig.log_prompts`."""


class Exchange:
    """Serves one request of one dialect (`run`)."""

    def __init__(self, config: GatewayConfig, dialect: Dialect, key: GatewayKey | None) -> None:
        self.config = config
        self.dialect = dialect
        self.key = key
        self.reply = Reply()
        self._cancel: anyio.Event | None = None
        self._stopped = False

    def stop(self) -> None:
        """End the call now, cleanly: the server is shutting down."""
        self._stopped = True
        if self._cancel is not None:
            self._cancel.set()

    async def run(self, body: Any, headers: dict[str, str], send: Send, receive: Receive) -> Reply:
        try:
            if not isinstance(body, dict):
                raise RequestFieldError("body", "a JSON object")
            if await passthrough(self, body, headers, send, receive):
                return self.reply  # the upstream speaks the client's dialect: its bytes
            inbound = self.dialect.parse_request(body, headers)
            if self.config.log_prompts:
                self.reply.prompt = _last_user_text(inbound.context.messages)
            target = self.config.target(inbound.model)
            self.reply.model = inbound.model
            if target is None:
                await self._error(send, "not_found", f"model {inbound.model!r} is not served here")
                return self.reply
            foreign = upstream_api(target) != {self.dialect.api}
            if isinstance(target, Model) and target.api == self.dialect.api:
                _stamp(inbound.context.messages, target)
            if foreign:
                self._refuse_unmodeled(inbound)
                inbound.context.messages = _state.restore(
                    inbound.context.messages, inbound.carriers, self.config.secret
                )
            options = self._options(inbound, target)
        except RequestFieldError as e:
            await self._error(send, "invalid_request", f"{e.field}: {e.message}")
            return self.reply
        carrier = self._carrier if foreign else None
        if inbound.stream:
            await self._stream(target, inbound, options, carrier, send, receive)
        else:
            await self._complete(target, inbound, options, carrier, send, receive)
        return self.reply

    def _carrier(self, message: AssistantMessage) -> str | None:
        return _state.pack(message, self.config.secret)

    def _refuse_unmodeled(self, inbound: Inbound) -> None:
        allowed = DEGRADATIONS.get(self.dialect.api, {})
        for name in inbound.unmodeled:
            if name not in allowed:
                raise RequestFieldError(
                    name, "cannot be carried to this model's upstream (another vendor's API)"
                )

    def _options(self, inbound: Inbound, target: Model | Route) -> StreamOptions:
        options = inbound.options
        options.cancel = self._cancel = anyio.Event()
        if self._stopped:
            self._cancel.set()
        if self.key is not None and self.key.budget_usd is not None:
            options.budget = f"gateway-key:{self.key.name}"
        fit_options(options, target)
        if upstream_api(target) != {self.dialect.api}:
            fit_server_tools(inbound.context, target)
        if isinstance(target, Model):
            env = self.config.key_env_for(target)
            if env and os.environ.get(env):
                options.api_key = os.environ[env]
        return options

    async def _error(
        self, send: Send, kind: str, message: str, retry_after: float | None = None
    ) -> None:
        if len(message) > _MESSAGE_CHARS:  # a client's own value quoted back, at length
            message = message[:_MESSAGE_CHARS] + "..."
        status, payload = self.dialect.error_body(kind, scrub(message))  # type: ignore[arg-type]
        headers = [(b"content-type", b"application/json")]
        if retry_after is not None and status == 429:
            headers.append((b"retry-after", str(max(1, round(retry_after))).encode()))
        self.reply.status = status
        self.reply.error = kind
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})

    @staticmethod
    def _failed(message: AssistantMessage, *, whole: bool = False) -> bool:
        """Whether the answer is the dialect's HTTP error rather than a message: it ended
        with an error before any content (`whole`: a non-streamed answer, whose error
        after content is an error too: the dialect has no partial body). A refusal or a
        content filter is a message in every dialect (a stop reason), never an error."""
        if message.stop_reason not in ("error", "aborted"):
            return False
        error = message.error
        if error is not None and error.kind in SAID_AS_STOP:
            return False
        return whole or not message.content

    async def _fail(self, send: Send, message: AssistantMessage) -> None:
        error = message.error
        kind = error.kind if error is not None else "server"
        text = error.message if error is not None else "the upstream failed"
        retry = error.retry_after if error is not None else None
        if kind == "aborted" and self._stopped:
            kind, text = "overloaded", SHUTTING_DOWN
        await self._error(send, kind, text, retry)

    async def _open(
        self, target: Model | Route, inbound: Inbound, options: StreamOptions, send: Send
    ) -> Any:
        """The call, or None once a 400 naming the field has answered: `stream()` checks
        its options at the call (a tool schema it cannot send, an option the model
        refuses), and that is the client's mistake, said in its dialect."""
        try:
            return stream(target, inbound.context, options)
        except (ValueError, TypeError) as e:
            await self._error(send, "invalid_request", str(e))
            return None

    async def _complete(self, target, inbound, options, carrier, send, receive) -> None:  # type: ignore[no-untyped-def]
        message: AssistantMessage | None = None
        opened = await self._open(target, inbound, options, send)
        if opened is None:
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_disconnect, receive, tg.cancel_scope, self.reply)
            async with opened as s:
                message = await s.result()
            tg.cancel_scope.cancel()
        if message is None:  # the client went away: the call was cancelled, no answer
            return
        self.reply.message = message
        if self._failed(message, whole=True):
            await self._fail(send, message)
            return
        scrub_error(message)
        payload = self.dialect.message_body(message, inbound.model, carrier)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})

    async def _stream(self, target, inbound, options, carrier, send, receive) -> None:  # type: ignore[no-untyped-def]
        encoder = self.dialect.encoder(inbound.model, carrier)
        if inbound.tool_names:
            encoder.tool_names = inbound.tool_names
        held: list[Any] = []
        started = False
        opened = await self._open(target, inbound, options, send)
        if opened is None:
            return
        async with anyio.create_task_group() as tg:
            watch = anyio.CancelScope()
            tg.start_soon(watch_disconnect, receive, tg.cancel_scope, self.reply, watch)
            async with opened as s:
                async for event in s:
                    if not started:
                        if event.type == "message_end":
                            self.reply.message = event.message
                            if self._failed(event.message):
                                await self._fail(send, event.message)
                                tg.cancel_scope.cancel()
                                return
                        elif event.type != "message_update":
                            held.append(event)
                            continue
                        started = True
                        await send(
                            {
                                "type": "http.response.start",
                                "status": 200,
                                "headers": [
                                    (b"content-type", encoder.media_type.encode()),
                                    (b"cache-control", b"no-cache"),
                                ],
                            }
                        )
                        for h in held:
                            chunk = encoder.feed(h)
                            if chunk:
                                await send(
                                    {"type": "http.response.body", "body": chunk, "more_body": True}
                                )
                        held.clear()
                    if event.type == "message_end":
                        self.reply.message = event.message
                        scrub_error(event.message)
                        if self._stopped and event.message.stop_reason == "aborted":
                            _shutting_down(event.message)
                    chunk = encoder.feed(event)
                    if chunk:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
            # The watcher stops before the last send: a server says `http.disconnect` once a
            # response is complete, which is not the client leaving.
            watch.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()


def _stamp(messages: list[Any], target: Model) -> None:
    """The client's assistant turns, read from its own dialect, were written by the model
    its name maps to: they say so, so `prepare_messages` sends their signatures back (the
    codec only knows the name the client sent)."""
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and m.api == target.api:
            if m.provider != target.provider or m.model != target.id:
                messages[i] = m.model_copy(update={"provider": target.provider, "model": target.id})


def _last_user_text(messages: list[Any]) -> str:
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                return m.content
            return " ".join(b.text for b in m.content if isinstance(b, TextContent))
    return ""


SAID_AS_STOP = frozenset({"refusal", "content_filter"})
"""Error kinds each dialect says as a stop reason of a 200 answer (Anthropic `refusal`,
OpenAI `content_filter`), not as an HTTP error."""

SHUTTING_DOWN = "the gateway is shutting down; try again"

_MESSAGE_CHARS = 1000
"""How much of an error's message a client gets (one quoting a giant value is cut)."""


def _shutting_down(message: AssistantMessage) -> None:
    """A stream the server's shutdown ended: to the client, an `overloaded` error its SDK
    retries (elsewhere), not an abort of its own."""
    message.stop_reason = "error"
    message.error = StreamError(kind="overloaded", message=SHUTTING_DOWN, retryable=True)
