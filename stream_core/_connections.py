"""The shared clients' connection limits, set for the whole process.

Kept apart from `_transport` (and free of httpx) so that setting them at start-up imports
nothing heavy. `_transport` reads them each time it makes a shared client.
"""

from __future__ import annotations

import math

DEFAULT_MAX_KEEPALIVE = 256
DEFAULT_KEEPALIVE_EXPIRY = 30.0


class _Limits:
    """The current limits, and a generation count that says when they changed."""

    __slots__ = ("generation", "keepalive_expiry", "max_connections", "max_keepalive")

    def __init__(self) -> None:
        self.max_connections: int | None = None
        self.max_keepalive = DEFAULT_MAX_KEEPALIVE
        self.keepalive_expiry = DEFAULT_KEEPALIVE_EXPIRY
        self.generation = 0


limits = _Limits()


def configure_connections(
    *,
    max_connections: int | None = None,
    max_keepalive: int = DEFAULT_MAX_KEEPALIVE,
    keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
) -> None:
    """Set the connection limits of the shared clients (calls without `StreamOptions.client`).

    `max_connections`: open connections per event loop's client; None (the default) for
    no limit: each open stream holds one connection for its whole life, so a limit only
    queues streams behind others that may last minutes (see README, "Connections, timeouts
    and cancel"). With a limit, a call that waits longer than `StreamOptions.pool_timeout`
    for a connection ends `timeout`, "connection pool full: N in use", not retried.
    `max_keepalive`: idle connections kept for reuse, each for `keepalive_expiry` seconds.

    Every argument is set (an omitted one goes back to its default). It applies to every
    call that starts afterwards, on every event loop: each loop's next call makes a new
    shared client, and streams already open finish on the old one, which is closed when
    its loop ends. Call it once at start-up.
    """
    if max_connections is not None and (
        not isinstance(max_connections, int) or isinstance(max_connections, bool)
    ):
        raise TypeError(f"max_connections must be an int or None, not {max_connections!r}")
    if max_connections is not None and max_connections < 1:
        raise ValueError(f"max_connections must be at least 1 (or None), not {max_connections}")
    if not isinstance(max_keepalive, int) or isinstance(max_keepalive, bool):
        raise TypeError(f"max_keepalive must be an int, not {max_keepalive!r}")
    if max_keepalive < 0:
        raise ValueError(f"max_keepalive must be at least 0, not {max_keepalive}")
    if not isinstance(keepalive_expiry, int | float) or isinstance(keepalive_expiry, bool):
        raise TypeError(f"keepalive_expiry must be a number, not {keepalive_expiry!r}")
    if not (keepalive_expiry > 0 and math.isfinite(keepalive_expiry)):
        raise ValueError(f"keepalive_expiry must be positive and finite, not {keepalive_expiry}")
    limits.max_connections = max_connections
    limits.max_keepalive = max_keepalive
    limits.keepalive_expiry = float(keepalive_expiry)
    limits.generation += 1
