"""How long the event loop went without a turn while some work ran beside it."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def with_heartbeat(work: Awaitable[T], *, guard: float) -> tuple[T, list[float]]:
    """Run `work` beside a task that wakes every 10 ms; returns its result and the gaps
    between the task's turns (a gap is how long the loop was held). `guard` bounds the
    whole against a hang; it is not a timing assertion."""
    gaps: list[float] = []
    done = anyio.Event()

    async def heartbeat() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        with anyio.fail_after(guard):
            result = await work
        done.set()
    return result, gaps
