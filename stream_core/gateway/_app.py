"""The gateway as an ASGI application: `create_app(config)`.

Paths (each also answered without the `/v1` prefix):

- `POST /v1/messages`, `POST /v1/messages/count_tokens`: Anthropic Messages;
- `POST /v1/responses`: OpenAI Responses;
- `POST /v1/chat/completions`: OpenAI Chat Completions;
- `GET /v1/models`: the model names served, in Anthropic's shape when the request carries
  `anthropic-version`, else OpenAI's;
- `GET /health`: 200 while the process serves; 503 once it is shutting down (`drain`).

A client authenticates with a gateway key (`x-api-key` or `Authorization: Bearer`) when
the config lists keys; the vendors' keys stay in the gateway.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from stream_core.provider import Dialect, dialect

from ._config import GatewayConfig, GatewayKey
from ._exchange import Exchange

__all__ = ["create_app"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

ACCESS_LOG = logging.getLogger("stream_core.gateway.access")
logger = logging.getLogger("stream_core.gateway")

_PROMPT_CHARS = 200
"""With `log_prompts`: how much of the last user message the access line quotes."""

DIALECT_PATHS = {
    "/v1/messages": "anthropic-messages",
    "/v1/responses": "openai-responses",
    "/v1/chat/completions": "openai-completions",
}


class Gateway:
    """The ASGI application (see the module's docstring)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self._keys = {k.sha256: k for k in config.keys}
        self._limits_ready = False
        self._busy: dict[str, int] = {}  # key name -> its requests in flight
        self._live: set[Exchange] = set()
        self._draining = False
        self._stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if not self._limits_ready:  # a server that sends no lifespan events
            self._configure_limits()
        began = time.perf_counter()
        path = scope["path"].rstrip("/") or "/"
        if path == "/" and scope["method"] in ("HEAD", "GET"):
            # Claude Code opens its connection with `HEAD /` (no key): a plain 200.
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if not path.startswith("/v1/") and path != "/health":
            path = "/v1" + path
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status, key_name, model, extra = 200, "-", "-", ""
        counted: str | None = None  # the key whose requests in flight count this one
        send = sent = _Progress(send)
        try:
            if path == "/health":
                status = 503 if self._draining else 200
                await _json(send, status, {"status": "draining" if self._draining else "ok"})
                return
            key = self._authenticate(headers)
            if key is False:
                status = 401
                await _json(send, 401, _auth_error(path, headers))
                return
            key_name = key.name if isinstance(key, GatewayKey) else "-"
            method = scope["method"]
            if path == "/v1/models" and method == "GET":
                await _json(send, 200, self._models(headers))
                return
            api = DIALECT_PATHS.get(path)
            if api is None and path == "/v1/messages/count_tokens":
                api = "count_tokens"
            if api is None or method != "POST":
                status = 404
                await _json(
                    send, 404, {"error": {"type": "not_found_error", "message": f"{method} {path}"}}
                )
                return
            gkey = key if isinstance(key, GatewayKey) else None
            if gkey is not None and gkey.max_concurrent is not None and api != "count_tokens":
                if self._busy.get(gkey.name, 0) >= gkey.max_concurrent:
                    status = 429
                    code, payload = dialect(api).error_body(
                        "rate_limit", f"key {gkey.name!r}: {gkey.max_concurrent} requests in flight"
                    )
                    await _json(send, code, payload, [(b"retry-after", b"1")])
                    return
                self._busy[gkey.name] = self._busy.get(gkey.name, 0) + 1
                counted = gkey.name
            body = await self._body(receive, headers)
            if body is None:
                status = 413
                d = dialect("anthropic-messages" if api == "count_tokens" else api)
                await _json(send, 413, _too_large(d, self.config.max_request_bytes))
                return
            parsed, unreadable = _read_json(body)
            if unreadable is not None:
                status = 400
                d = dialect("anthropic-messages" if api == "count_tokens" else api)
                code, payload = d.error_body("invalid_request", unreadable)
                await _json(send, code, payload)
                return
            if api == "count_tokens":
                from ._count import count_tokens

                status = await count_tokens(self.config, parsed, headers, send)
                return
            exchange = Exchange(self.config, dialect(api), gkey)
            if self._stopping:
                exchange.stop()
            self._live.add(exchange)
            try:
                reply = await exchange.run(parsed, headers, send, receive)
            finally:
                self._live.discard(exchange)
            status, model = reply.status, _loggable(reply.model) or "-"
            if reply.message is not None:
                u = reply.message.usage
                extra = (
                    f" in={u.input} out={u.output} cache_read={u.cache_read}"
                    f" cache_write={u.cache_write} stop={reply.message.stop_reason}"
                )
            if reply.error:
                extra += f" error={reply.error}"
            if self.config.log_prompts and reply.prompt is not None:
                extra += f" prompt={json.dumps(reply.prompt[:_PROMPT_CHARS])}"
        except Exception:  # the last resort: a defect, said in the dialect, never raised
            logger.exception("gateway: %s %s failed", scope.get("method", "-"), path)
            status, extra = (500 if not sent.started else status), extra + " error=internal"
            await sent.fail(path)
        finally:
            if counted is not None:
                self._busy[counted] -= 1
            ms = (time.perf_counter() - began) * 1000
            ACCESS_LOG.info(
                "%s %s %d key=%s model=%s ms=%.1f%s",
                scope.get("method", "-"),
                path,
                status,
                key_name,
                model,
                ms,
                extra,
            )

    def drain(self, within: float) -> None:
        """Shutdown has begun (the server calls this from its event loop): `/health`
        answers 503, and the streams still running `within` seconds from now, less a
        second (half of `within` when it is under 2 s), are ended cleanly: the upstream
        call cancelled, the client's answer closed in its dialect."""
        if self._draining:
            return
        self._draining = True
        margin = 1.0 if within >= 2 else within / 2
        asyncio.get_running_loop().call_later(max(0.0, within - margin), self._stop_all)

    def _stop_all(self) -> None:
        self._stopping = True
        for exchange in list(self._live):
            exchange.stop()

    def _configure_limits(self) -> None:
        """Key budgets and the shared store, through `configure_limits`: once per
        process, only when the config names a store or a key has a budget (so an app
        mounted beside the user's own `configure_limits` leaves it alone otherwise)."""
        self._limits_ready = True
        keys = self.config.keys
        budgets = {f"gateway-key:{k.name}": k.budget_usd for k in keys if k.budget_usd is not None}
        if self.config.limits_store is None and not budgets:
            return
        from stream_core import configure_limits

        configure_limits(store=self.config.limits_store, budgets=budgets or None)

    def _authenticate(self, headers: dict[str, str]) -> GatewayKey | None | bool:
        """The caller's key; None when the config lists no keys; False: refused."""
        if not self._keys:
            return None
        presented = headers.get("x-api-key") or ""
        auth = headers.get("authorization", "")
        if not presented and auth.lower().startswith("bearer "):
            presented = auth[7:].strip()
        digest = hashlib.sha256(presented.encode()).hexdigest()
        found: GatewayKey | bool = False
        for known, key in self._keys.items():
            if hmac.compare_digest(known, digest):
                found = key
        return found

    def _models(self, headers: dict[str, str]) -> dict[str, Any]:
        names = self.config.model_names()
        if "anthropic-version" in headers:
            data = [
                {"type": "model", "id": n, "display_name": n, "created_at": "2025-01-01T00:00:00Z"}
                for n in names
            ]
            return {
                "data": data,
                "has_more": False,
                "first_id": names[0] if names else None,
                "last_id": names[-1] if names else None,
            }
        return {
            "object": "list",
            "data": [
                {"id": n, "object": "model", "created": 0, "owned_by": "stream-core"} for n in names
            ],
        }

    async def _body(self, receive: Receive, headers: dict[str, str]) -> bytes | None:
        limit = self.config.max_request_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b""
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if not self._limits_ready:
                    try:
                        self._configure_limits()
                    except (ValueError, TypeError, ImportError) as e:
                        await send({"type": "lifespan.startup.failed", "message": str(e)})
                        return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


MAX_DEPTH = 128
"""How deep a request body's arrays and objects may nest (deeper is refused, 400): far
more than any schema or history needs, far less than what would exhaust the recursion
of the readers, validators and writers a request goes through."""


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


_TOO_DEEP = f"the body nests arrays or objects deeper than {MAX_DEPTH} levels"


def _read_json(body: bytes) -> tuple[Any, str | None]:
    """The request body's JSON, or why it cannot be read (not JSON: `NaN` and `Infinity`
    are not; nested deeper than `MAX_DEPTH`)."""
    try:
        parsed = json.loads(body, parse_constant=_not_json)
    except RecursionError:
        return None, _TOO_DEEP
    except ValueError as e:
        said = str(e)  # NaN and Infinity say which; a parser's position helps no one
        return (
            None,
            f"the body is not JSON: {said}" if "JSON value" in said else "the body is not JSON",
        )
    stack = [(parsed, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return None, _TOO_DEEP
        items = value.values() if type(value) is dict else value if type(value) is list else ()
        for item in items:
            if type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
    return parsed, None


class _Progress:
    """One request's ASGI `send`, noting how far the answer got, for the last resort
    (`fail`): an exception the gateway did not expect never leaves the app."""

    __slots__ = ("_send", "ended", "started")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.ended = False

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended = True
        await self._send(message)

    async def fail(self, path: str) -> None:
        """The dialect's 500 before the answer started, else the answer's end."""
        try:
            if not self.started:
                api = DIALECT_PATHS.get(path)
                api = api or ("anthropic-messages" if "/messages" in path else "openai-completions")
                code, payload = dialect(api).error_body("server", "the gateway failed; try again")
                await _json(self, code, payload)
            elif not self.ended:
                await self({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:  # noqa: S110 - the client is gone: nothing to tell
            pass


def _loggable(text: str) -> str:
    """A client's string in the access line: escaped as JSON escapes it (ASCII only), so a
    newline cannot forge a line and a lone surrogate cannot break a log handler."""
    return json.dumps(text)[1:-1] if text else text


def _auth_error(path: str, headers: dict[str, str]) -> dict[str, Any]:
    if path.startswith("/v1/messages") or "anthropic-version" in headers:
        return {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid gateway key"},
        }
    return {
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "message": "invalid gateway key",
            "param": None,
        }
    }


def _too_large(d: Dialect, limit: int) -> dict[str, Any]:
    """The dialect's error body for a request over `max_request_bytes` (status 413)."""
    _, payload = d.error_body("invalid_request", f"the request is larger than {limit} bytes")
    error = payload.get("error")
    if isinstance(error, dict) and d.api == "anthropic-messages":
        error["type"] = "request_too_large"
    elif isinstance(error, dict):
        error["code"] = "request_too_large"
    return payload


async def _json(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def create_app(config: GatewayConfig) -> Gateway:
    """The gateway for `config`, an ASGI application to run or mount."""
    return Gateway(config)
