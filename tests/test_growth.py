"""Cost grows linearly with the input whatever the chunking (CONTRACT 5).

Not a timing assertion: no absolute bound, only how the cost grows. Doubling the input
must roughly double the time (best of a few runs, ratio well under 3); code that re-copies
its buffer per chunk quadruples it (the NDJSON decoder once took 0.59 s for a 1 MB line in
256-byte chunks and 2.35 s for 2 MB).
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from stream_core import AssistantMessage, Model
from stream_core.provider import Assembler, NDJSONBytesDecoder, SSEBytesDecoder

CHUNK = 256
SIZE = 128 * 1024
Work = Callable[[int], Callable[[], None]]
"""Given a size, prepares the input and returns the step to time (input building is not
timed)."""


def _best_time(work: Work, size: int, repeat: int = 5) -> float:
    """CPU time of this process (other processes on a busy machine do not count), best of
    `repeat`, with the garbage collector off as `timeit` does: its passes over a growing
    heap would measure the test's own allocations, not the code under test."""
    best = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            step = work(size)
            start = time.process_time()
            step()
            best = min(best, time.process_time() - start)
    finally:
        if enabled:
            gc.enable()
    return best


def growth_ratio(work: Work, size: int = SIZE) -> float:
    """Time at 2 x `size` over time at `size`: about 2 when linear, 4 when quadratic. A
    ratio of 3 or more is measured again, twice at most: a busy machine can stall one
    measurement, while quadratic work gives 4 every time."""
    work(size // 8)()  # warm up
    ratio = float("inf")
    for _ in range(3):
        ratio = min(ratio, _best_time(work, 2 * size) / max(_best_time(work, size), 1e-9))
        if ratio < 3:
            break
    return ratio


def _chunks(body: bytes) -> list[bytes]:
    return [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]


def _ndjson_line(size: int) -> Callable[[], None]:
    chunks = _chunks(b'{"text": "' + b"x" * size + b'"}\n')

    def step() -> None:
        decoder = NDJSONBytesDecoder()
        frames = [f for c in chunks for f in decoder.decode(c)]
        assert len(frames) == 1 and len(frames[0].data) == size + 12

    return step


def _sse_line(size: int) -> Callable[[], None]:
    chunks = _chunks(b'data: {"text": "' + b"x" * size + b'"}\n\n')

    def step() -> None:
        decoder = SSEBytesDecoder()
        events = [e for c in chunks for e in decoder.decode(c)]
        assert len(events) == 1 and len(events[0].data) == size + 12

    return step


def _assembler() -> tuple[Assembler, deque[Any]]:
    model = Model(id="m", api="a", provider="p", base_url="http://x")
    out: deque[Any] = deque()
    return Assembler(AssistantMessage(api="a", provider="p", model="m"), model, {}, out), out


def _tool_arguments(size: int) -> Callable[[], None]:
    fragments = ["x" * 16] * (size // 16)

    def step() -> None:
        asm, out = _assembler()
        asm.tool_call(0, '{"text": "', id="call_1", name="f")
        for fragment in fragments:
            asm.tool_call(0, fragment)
            out.clear()  # the stream hands each event on as it comes
        asm.tool_call(0, '"}')
        asm.end(0)
        (call,) = asm.message.content
        assert len(call.arguments["text"]) == len(fragments) * 16  # type: ignore[union-attr]

    return step


def _text_deltas(size: int) -> Callable[[], None]:
    fragments = ["x" * 16] * (size // 16)

    def step() -> None:
        asm, out = _assembler()
        for fragment in fragments:
            asm.text(0, fragment)
            out.clear()
        asm.end(0)
        assert len(asm.message.text()) == len(fragments) * 16

    return step


@pytest.mark.parametrize(
    "work",
    [_ndjson_line, _sse_line, _tool_arguments, _text_deltas],
    ids=["ndjson-line", "sse-line", "tool-arguments", "text-deltas"],
)
def test_cost_doubles_when_the_input_doubles(work: Work) -> None:
    ratio = growth_ratio(work)
    assert ratio < 3, f"doubling the input multiplied the time by {ratio:.2f} (quadratic?)"
