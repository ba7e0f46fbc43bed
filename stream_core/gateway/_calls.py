"""What the translated and the same-dialect paths share about one call: the APIs a target
speaks, and watching for the client going away."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

import anyio

from stream_core import Model, Route

__all__ = ["Receive", "Send", "upstream_api", "watch_disconnect"]

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class _Noted(Protocol):
    error: str | None


def upstream_api(target: Model | Route) -> set[str]:
    """The wire APIs `target` (a model, or every deployment of a route) speaks."""
    if isinstance(target, Model):
        return {target.api}
    return {d.model.api for d in target.deployments}


async def watch_disconnect(
    receive: Receive,
    scope: anyio.CancelScope,
    reply: _Noted,
    watch: anyio.CancelScope | None = None,
) -> None:
    """Cancels the exchange when the client goes away: the upstream call ends at once.
    `watch` (cancelled by the exchange) ends the watching without a verdict."""
    with watch or anyio.CancelScope():
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if reply.error is None:  # else an error answer went out: it is complete
                    reply.error = "client_disconnected"
                scope.cancel()
                return
