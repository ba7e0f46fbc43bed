"""The limiter's state in one file shared by the worker processes of one host, no server
(`configure_limits(store="/path")`).
"""

from __future__ import annotations

import json
import os
import time
import weakref
from typing import Any

import anyio

from .._transport import _loop_key
from . import window
from .stores import LimitSettlement, LimitStore, _Tables
from .window import Snapshot

__all__ = ["FileStore"]


class FileStore(LimitStore):
    """One JSON file shared by the processes of one host, each change made under an
    exclusive `flock` (POSIX hosts). The lock is taken without blocking, retried every
    millisecond on the event loop, so a busy file never stalls other calls."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import fcntl  # noqa: F401  (POSIX only: fail at configure time, not at a call)

        self._turns: weakref.WeakKeyDictionary[Any, anyio.Lock] = weakref.WeakKeyDictionary()
        self.path = os.fspath(path)
        self.name = f"file {self.path}"
        with open(self.path, "a", encoding="utf-8"):
            pass  # made now, so a path that cannot be written raises at configure time

    async def _apply(self, change: Any) -> Any:
        # One call of this process at a time asks for the file lock (in turn, first come
        # first served): the others wait on the event loop, never in a spin on the file.
        loop = _loop_key()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = anyio.Lock()
        async with turn:
            return await self._locked(change)

    async def _locked(self, change: Any) -> Any:
        import fcntl

        with open(self.path, "r+", encoding="utf-8") as f:
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await anyio.sleep(0.001)
            try:
                text = f.read()
                try:
                    data = json.loads(text) if text.strip() else {}
                except ValueError:
                    data = {}  # a file cut by a crash: start over, open
                if not isinstance(data, dict):
                    data = {}
                tables = _Tables(data)
                result = change(tables)
                if len(tables.keys) > 1000:
                    tables.prune(time.time())
                f.seek(0)
                f.truncate()
                f.write(json.dumps(tables.data, separators=(",", ":")))
                f.flush()
                return result
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        result: tuple[float, Snapshot, list[Any] | None] = await self._apply(
            lambda t: t.admit(key, needs, asks, now, route)
        )
        return result

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        await self._apply(lambda t: t.settle(settlement, now))

    async def cool(self, key: str, until: float) -> None:
        await self._apply(lambda t: window.pause(t.keys.setdefault(key, {}), until, "c"))

    async def cooling(self, keys: list[str]) -> list[float]:
        found: list[float] = await self._apply(
            lambda t: [t.keys.get(k, {}).get("c", 0.0) for k in keys]
        )
        return found

    async def spent(self, name: str) -> float:
        found: float = await self._apply(lambda t: t.spent.get(name, 0.0))
        return found
