"""The clients closed as their event loop ends (`close_at_loop_end`) are closed after
the loop's other detached tasks, which may be using them, have ended; and the closers do
not wait on each other. (The socket a late task opened is tested from the user's side in
`test_limits_inspect.py`.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

from stream_core import _transport
from stream_core._transport import _spawn_detached, close_at_loop_end


def test_the_closers_wait_for_the_other_tasks_not_for_each_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_transport, "_SETTLE", 600.0)  # closers waiting on each other: hung
    order: list[str] = []

    async def slow() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)
                order.append("task ended")

    async def main() -> None:
        for name in ("first", "second"):

            async def close(name: str = name) -> Any:
                order.append(f"{name} closed")

            close_at_loop_end(close)
        _spawn_detached(slow)
        await asyncio.sleep(0)

    run = threading.Thread(target=anyio.run, args=(main,), daemon=True)
    run.start()
    run.join(60)
    assert not run.is_alive(), "the loop's closers waited on each other"
    assert order[0] == "task ended"
    assert sorted(order[1:]) == ["first closed", "second closed"]
