"""A worker process for the run-level tests: `log` writes results for ids 0..N-1 to a
`ResultLog` (skipping those done, as a rerun does), `progress` adds results to a shared
`Progress`. Messages are built from the id alone, so a test knows every one."""

from __future__ import annotations

import sys
import time

import anyio

from stream_core import (
    AssistantMessage,
    Cost,
    ErrorKind,
    StreamError,
    TextContent,
    ToolCall,
    Usage,
    configure_limits,
)
from stream_core.runs import Progress, ResultLog

KINDS: tuple[ErrorKind, ErrorKind] = ("rate_limit", "timeout")


def message(i: int, big: int = 0) -> AssistantMessage:
    """Result `i`: every 7th failed (rate_limit; timeout every other one), every 5th
    unpriced, the rest costing 1/8 + i/64 USD (exact binary fractions: sums are exact)."""
    failed = i % 7 == 3
    cost = None if i % 5 == 4 else Cost(input=0.0, output=0.0, total=0.125 + i / 64)
    return AssistantMessage(
        api="faux",
        provider="prov-a" if i % 3 else "prov-b",
        model=f"model-{i % 2}",
        content=[
            TextContent(text=f"answer {i} \u2028 é 🙂 " + "x" * big),
            ToolCall(id=f"c{i}", name="look", arguments={"id": str(i), "q": '{"id":'}),
        ],
        usage=Usage(input=10 + i, output=5, cache_read=i % 4, cost=cost),
        stop_reason="error" if failed else "tool_use",
        error=StreamError(kind=KINDS[i % 14 == 10], message="429") if failed else None,
        timestamp=1_800_000_000_000 + i,
    )


def write_log(path: str, n: int, run: str, pause: float, big: int) -> None:
    log = ResultLog(path)  # kill -9 needs no fsync: each write() is in the kernel
    for i in log.pending(str(k) for k in range(n)):
        log.write(i, message(int(i), big), run=run)
        if pause:
            time.sleep(pause)
    log.close()


def write_ids(path: str, worker: str, n: int, big: int) -> None:
    with ResultLog(path) as log:
        for k in range(n):
            log.write(f"{worker}-{k}", message(k, big * (k % 3)), worker=worker)


async def add_progress(store: str, name: str, worker: int, n: int) -> None:
    configure_limits(store=store, timeout=5.0)
    progress = Progress(name, total=4 * n)
    for k in range(n):
        await progress.add(message(worker * n + k))


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "log":
        write_log(args[0], int(args[1]), args[2], float(args[3]), int(args[4]))
    elif mode == "ids":
        write_ids(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "progress":
        anyio.run(add_progress, args[0], args[1], int(args[2]), int(args[3]))
    print("ok", flush=True)
