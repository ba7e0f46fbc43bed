"""A stream opened before `fork()` and iterated in the child ends at once with a clear error
(issue point: it still hung, killed after 12 s), whichever way it was opened and iterated:
started or not, async or sync. Real loopback servers; the child reports by exit code."""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Callable

import anyio
import pytest
from threaded_loopback import GUARD, head_then_hold, loopback, whole_answer

import stream_core
from stream_core import Context, MessageEnd, MessageUpdate, StreamOptions, UserMessage

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only"),
    pytest.mark.slow,
]
CONTEXT = Context(messages=[UserMessage(content="hi")])
OPTIONS = StreamOptions(api_key="sk-test-0123456789", max_retries=0)


def _fork(child: Callable[[], int]) -> int:
    """Run `child` in a forked child; its exit code (-1: killed, it hung past the guard)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multi-threaded process, fork()" on 3.12+
        pid = os.fork()
    if pid == 0:
        code = 3
        try:
            code = child()
        finally:
            os._exit(code)
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1


def _ended_by_fork(events: list[object], error: object) -> int:
    ends = [e for e in events if isinstance(e, MessageEnd)]
    message = getattr(error, "message", "")
    return 0 if len(ends) == 1 and "fork()" in message else 1


def test_a_sync_stream_started_before_fork_ends_in_the_child() -> None:
    with loopback(head_then_hold) as server:
        with stream_core.stream_sync(server.model(), CONTEXT, OPTIONS) as s:
            while not isinstance(next(s), MessageUpdate):
                pass  # `next`, not a `for` loop: leaving one early closes the stream

            def child() -> int:
                events = list(s)
                return _ended_by_fork(events, s.message.error)

            assert _fork(child) == 0, "the child hung, or did not say fork()"


def test_a_sync_stream_opened_before_fork_ends_in_the_child() -> None:
    with loopback(whole_answer) as server:
        # The loop thread runs (another call), and the stream is opened, not started.
        assert stream_core.complete_sync(server.model(), CONTEXT, OPTIONS).error is None
        s = stream_core.stream_sync(server.model(), CONTEXT, OPTIONS)

        def child() -> int:
            events = list(s)
            return _ended_by_fork(events, s.message.error)

        assert _fork(child) == 0, "the child hung, or did not say fork()"
        assert s.result().error is None  # the parent's stream is its own


def test_a_sync_call_in_the_child_still_works() -> None:
    with loopback(whole_answer) as server:
        assert stream_core.complete_sync(server.model(), CONTEXT, OPTIONS).error is None

        def child() -> int:
            m = stream_core.complete_sync(server.model(), CONTEXT, OPTIONS)
            return 0 if m.error is None and m.text() else 1

        assert _fork(child) == 0


@pytest.mark.anyio
async def test_an_async_stream_opened_before_fork_ends_in_the_child() -> None:
    with loopback(whole_answer) as server:
        s = stream_core.stream(server.model(), CONTEXT, OPTIONS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pid = os.fork()
        if pid == 0:  # the child: iterates the stream its parent opened
            code = 3
            try:
                events = [e async for e in s]
                code = _ended_by_fork(events, s.message.error)
            finally:
                os._exit(code)
        deadline = time.monotonic() + GUARD
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            await anyio.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child hung on a stream opened before fork()")
        assert os.waitstatus_to_exitcode(status) == 0
        assert (await s.result()).error is None  # the parent's stream is its own
