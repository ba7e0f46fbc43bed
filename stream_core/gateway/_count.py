"""`POST /v1/messages/count_tokens`: the input tokens of an Anthropic Messages request, for
the model its model name maps to.

- Upstream Anthropic (the API, not Vertex AI): the vendor's own count
  (`/v1/messages/count_tokens`), exact. The client's body goes as it came (the model
  name replaced by the upstream's id), with its `anthropic-version` and `anthropic-beta`.
- Upstream Gemini (the Gemini API): its `countTokens`, exact, for the request the gateway
  would send (`generateContentRequest`: system instruction and tools included).
- Any other upstream (or one whose count endpoint is down): stream-core's estimate
  (`estimate_context_tokens`: system prompt, messages, tools), which errs high on code
  and low on images. The answer's `x-stream-core-count` header says which: `exact` or
  `estimate`.

A route counts with its first deployment. A request the vendor's count refuses (400) is
that vendor's error in the Anthropic shape; a vendor key never appears in an answer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import httpx

from stream_core import Model, Route, StreamOptions, estimate_context_tokens
from stream_core.provider import (
    Inbound,
    RequestFieldError,
    WireAPI,
    dialect,
    error_from_status,
    get_provider,
)

from . import _state
from ._config import GatewayConfig

__all__ = ["count_tokens"]

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

logger = logging.getLogger("stream_core.gateway")

TIMEOUT = httpx.Timeout(30.0, connect=10.0)
"""How long a vendor's count may take before the estimate answers instead."""

_ANTHROPIC_VERSION = "2023-06-01"
_MOST = 1 << 31
"""A vendor's count at or past this is no request's: the estimate answers instead."""
_REFUSED = frozenset({400, 404, 413, 422})
"""Statuses of a vendor's count that are the request's fault: answered as its error.
Any other failure (the gateway's own key refused, a 429, a 5xx, the network) answers
with the estimate instead."""


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


async def count_tokens(
    config: GatewayConfig, body: Any, headers: Mapping[str, str], send: Send
) -> int:
    """Answer one count request (see the module's docstring); returns the HTTP status."""
    anthropic = dialect("anthropic-messages")
    try:
        if not isinstance(body, dict):
            raise RequestFieldError("body", "a JSON object")
        # A count request has no max_tokens; the Messages reader may want one.
        inbound = anthropic.parse_request({"max_tokens": 1, **body}, headers)
    except RequestFieldError as e:
        return await _error(send, "invalid_request", f"{e.field}: {e.message}")
    target = config.target(inbound.model)
    if target is None:
        return await _error(send, "not_found", f"model {inbound.model!r} is not served here")
    model = target.deployments[0].model if isinstance(target, Route) else target
    try:
        tokens = await _exact(config, model, inbound, body)
    except _Refused as refused:
        kind = error_from_status(refused.status, refused.message).kind
        return await _error(send, kind, refused.message)
    how = "exact"
    if tokens is None:
        how = "estimate"
        context = inbound.context
        if inbound.carriers:
            messages = _state.restore(context.messages, inbound.carriers, config.secret)
            context = context.model_copy(update={"messages": messages})
        tokens = estimate_context_tokens(context)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"x-stream-core-count", how.encode()),
            ],
        }
    )
    await send(
        {"type": "http.response.body", "body": json.dumps({"input_tokens": tokens}).encode()}
    )
    return 200


async def _exact(
    config: GatewayConfig, model: Model, inbound: Inbound, body: dict[str, Any]
) -> int | None:
    """The vendor's own count, or None where there is none (or it could not be had)."""
    if model.api == "anthropic-messages" and model.provider == "anthropic":
        key = _key(config, model)
        if key is None:
            return None
        url = model.base_url.rstrip("/") + "/v1/messages/count_tokens"
        payload = _anthropic_payload(body, inbound, config, model)
        sent = {
            "content-type": "application/json",
            "anthropic-version": inbound.headers.get("anthropic-version", _ANTHROPIC_VERSION),
            **_beta(inbound),
            **_wire(model).auth_headers(model, key),
            **model.headers,
        }
        found = await _post(url, payload, sent, key)
        value = found.get("input_tokens") if found is not None else None
    elif model.api == "google-generative-ai" and model.provider == "google":
        key = _key(config, model)
        if key is None:
            return None
        context = inbound.context
        if inbound.carriers:
            messages = _state.restore(context.messages, inbound.carriers, config.secret)
            context = context.model_copy(update={"messages": messages})
        wire = _wire(model)
        try:
            req = wire.build_request(model, context, _count_options(inbound.options))
        except (ValueError, TypeError):
            return None  # what the upstream cannot take: the real call says so
        url = re.sub(r":streamGenerateContent(\?.*)?$", ":countTokens", req.url)
        payload = {"generateContentRequest": {"model": f"models/{model.id}", **req.payload}}
        sent = {
            "content-type": "application/json",
            **req.headers,
            **wire.auth_headers(model, key),
            **model.headers,
        }
        found = await _post(url, payload, sent, key)
        value = found.get("totalTokens") if found is not None else None
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MOST:
        return None  # not a count (the estimate answers)
    return value


def _anthropic_payload(
    body: dict[str, Any], inbound: Inbound, config: GatewayConfig, model: Model
) -> dict[str, Any]:
    """The client's body, for the vendor's count: its own model id, no generation
    fields the count endpoint refuses. A body carrying another vendor's state (an earlier
    turn answered elsewhere) is rebuilt from its context by the provider instead."""
    if inbound.carriers:
        context = inbound.context
        messages = _state.restore(context.messages, inbound.carriers, config.secret)
        context = context.model_copy(update={"messages": messages})
        try:
            req = _wire(model).build_request(model, context, _count_options(inbound.options))
            body = req.payload
        except (ValueError, TypeError):
            pass
    kept = {k: v for k, v in body.items() if k in _ANTHROPIC_COUNT_FIELDS}
    kept["model"] = model.id
    return kept


_ANTHROPIC_COUNT_FIELDS = frozenset(
    {
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "mcp_servers",
        "context_management",
        "output_format",
        "output_config",
    }
)
"""What Anthropic's count endpoint takes of a Messages body (`model` set by the gateway)."""


def _beta(inbound: Inbound) -> dict[str, str]:
    beta = inbound.headers.get("anthropic-beta")
    return {"anthropic-beta": beta} if beta else {}


def _count_options(options: StreamOptions) -> StreamOptions:
    return dataclasses.replace(options, max_tokens=None, api_key=None)


def _wire(model: Model) -> WireAPI:
    wire = get_provider(model.api).wire
    if wire is None:  # pragma: no cover - both APIs counted are the built-in pipeline's
        raise RuntimeError(f"{model.api} has no wire definition")
    return wire


def _key(config: GatewayConfig, model: Model) -> str | None:
    env = config.key_env_for(model) or _wire(model).api_key_env(model)
    return (os.environ.get(env) or None) if env else None


async def _post(
    url: str, payload: dict[str, Any], headers: dict[str, str], key: str
) -> dict[str, Any] | None:
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            # ASCII JSON: a lone surrogate a client escaped stays escaped (httpx's `json=`
            # writes UTF-8, which cannot hold one).
            content = json.dumps(payload).encode()
            headers = {**headers, "content-type": "application/json"}
            response = await client.post(url, content=content, headers=headers)
    except httpx.HTTPError as exc:
        logger.warning(
            "count_tokens: %s unreachable (%s); estimating", _host(url), type(exc).__name__
        )
        return None
    if response.status_code in _REFUSED:
        raise _Refused(response.status_code, _message(response, key))
    if response.status_code != 200:
        logger.warning("count_tokens: %s answered %d; estimating", _host(url), response.status_code)
        return None
    try:
        found = response.json()
    except (ValueError, RecursionError):  # not JSON, or nested past reading
        return None
    return found if isinstance(found, dict) else None


def _message(response: httpx.Response, key: str) -> str:
    """The vendor's error text (never the key), else its status."""
    text = ""
    try:
        data = response.json()
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
    except (ValueError, RecursionError):  # not JSON, or nested past reading
        pass
    text = (text or f"the vendor's count answered {response.status_code}")[:500]
    return text.replace(key, "[redacted]") if key else text


def _host(url: str) -> str:
    return httpx.URL(url).host


async def _error(send: Send, kind: Any, message: str) -> int:
    status, payload = dialect("anthropic-messages").error_body(kind, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
    return status
