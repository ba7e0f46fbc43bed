"""Holding one batch or file request of the fake vendor: a test's way to stop a client at
a step of its own choosing, and kill it there.

    hold = server.batches.holds.add("POST", r"/v1/messages/batches", when="after")
    ...                      # start the client
    hold.wait()              # the vendor created the batch; its answer has not gone out
    os.kill(pid, SIGKILL)    # the client never learns the batch's id
    hold.release()

`when="before"`: the request is held before the vendor handles it (an upload in flight:
nothing stored yet); `"after"`: once handled, before its answer is written (a create the
vendor accepted and bills, whose id the client never reads). A hold stops the first
request that matches, once; later ones pass. `drop()` ends it unanswered instead (held
`before`: never handled, as an upload cut by a kill). A held request waits at most `timeout`
seconds, then goes on, so a test that forgets to release never hangs the server.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Dropped", "Hold", "Holds"]

When = Literal["before", "after"]


class Dropped(ConnectionAbortedError):
    """A held request dropped (`Hold.drop`): the server closes its connection unanswered,
    as when a client dies before its request was read whole (nothing is handled)."""


@dataclass
class Hold:
    """One request to stop (see the module docstring)."""

    method: str
    pattern: re.Pattern[str]
    when: When
    timeout: float
    arrived: threading.Event = field(default_factory=threading.Event)
    """Set when the request it stops has arrived (and is being held)."""
    released: threading.Event = field(default_factory=threading.Event)
    path: str | None = None
    """The path of the request it stopped."""
    dropped: bool = False

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait until the request it stops has arrived; False when none did in `timeout`."""
        return self.arrived.wait(timeout)

    def release(self) -> None:
        """Let the held request go on (its client may be gone: its answer is then lost)."""
        self.released.set()

    def drop(self) -> None:
        """End the held request unanswered; held `before`, it is never handled."""
        self.dropped = True
        self.released.set()


class Holds:
    """The fake vendor's holds (`BatchBackend.holds`)."""

    def __init__(self) -> None:
        self._holds: list[Hold] = []
        self._lock = threading.Lock()

    def add(
        self, method: str, pattern: str, *, when: When = "before", timeout: float = 60.0
    ) -> Hold:
        """Hold the next `method` request whose path matches `pattern` (fully)."""
        if when not in ("before", "after"):
            raise ValueError(f"when: 'before' or 'after', not {when!r}")
        hold = Hold(method.upper(), re.compile(pattern), when, timeout)
        with self._lock:
            self._holds.append(hold)
        return hold

    def release_all(self) -> None:
        """Release every hold, held or not yet met, and forget them."""
        with self._lock:
            holds, self._holds = self._holds, []
        for hold in holds:
            hold.release()

    def stop(self, when: When, method: str, path: str) -> None:
        """Called by the fake vendor around each batch or file request: blocks while a hold
        that matches it is held."""
        if not self._holds:
            return
        with self._lock:
            hold = next(
                (
                    h
                    for h in self._holds
                    if h.when == when and h.method == method and h.pattern.fullmatch(path)
                ),
                None,
            )
            if hold is None:
                return
            self._holds.remove(hold)
        hold.path = path
        hold.arrived.set()
        hold.released.wait(hold.timeout)
        if hold.dropped:
            raise Dropped(f"{method} {path}: dropped by a test's hold")
