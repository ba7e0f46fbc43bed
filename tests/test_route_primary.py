"""Routes (issue 37): `Route(wait_for_primary=True)` waits for its first deployment while it
is merely at its quota (a limit learned from its headers, a 429 whose pause the call may
wait, a route cooldown of rate limits only) and falls over only on a real failure (a
server error, auth, a pause past the call's `max_retry_delay`); each deployment's answers
are counted (`served_counts()`, and `shared_served()` across processes), a fallback's
answer never as the primary's.

Vendors are loopback servers (`LimitedVendor`, real rate-limit headers) and faux models;
real waits are under a second."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from limited_vendor import LimitedVendor

from stream_core import (
    Context,
    Model,
    Route,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
)
from stream_core._limits import limiter
from stream_core._limits.stores import MemoryStore
from stream_core.testing import faux_error, faux_model

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])
GUARD = 10.0  # seconds: a guard against hangs, not a timing assertion


def _model(v: LimitedVendor, name: str = "m-1") -> Model:
    return Model(
        id=name, api="openai-completions", provider="openai", base_url=v.url, max_tokens=50
    )


def _served_by(message: Any) -> str:
    """The model id of the deployment that served a route call (its last attempt)."""
    assert message.error is None, message.error
    assert message.attempts is not None
    last = message.attempts[-1]
    assert last.kind is None and last.sent
    return str(last.model)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the option ---------------------------------------------------------------------------


def test_wait_for_primary_is_checked() -> None:
    a, b = faux_model(["a"]), faux_model(["b"])
    with pytest.raises(ValueError, match="wait_for_primary"):
        Route([a, b], strategy="weighted", wait_for_primary=True)
    with pytest.raises(TypeError, match="wait_for_primary"):
        Route([a, b], wait_for_primary="yes")  # type: ignore[arg-type]
    for bad in ("", "x" * 191, "a\nb"):
        with pytest.raises(ValueError, match="Route.name"):
            Route([a, b], name=bad)
    route = Route([a, b], wait_for_primary=True, name="eval-1")
    assert route.wait_for_primary and route.name == "eval-1"
    # Without a name, one made of the deployments (no key in it): the same deployments,
    # the same name, in another process too.
    assert Route([a, b]).name == Route([a, b]).name != Route([b, a]).name


# --- a learned limit: waited for, not passed over ----------------------------------------


async def test_a_primary_at_its_learned_limit_is_waited_for() -> None:
    # Two requests a window of 0.5 s, told in OpenAI's headers: the third call waits for
    # the window to reset rather than go to the fallback.
    v1 = LimitedVendor(requests=2, window=0.5).start()
    v2 = LimitedVendor().start()
    try:
        route = Route([_model(v1, "primary"), _model(v2, "fallback")], wait_for_primary=True)
        with anyio.fail_after(GUARD):
            served = [
                _served_by(await complete(route, CONTEXT, StreamOptions(api_key="k")))
                for _ in range(3)
            ]
        assert served == ["primary"] * 3
        assert v2.arrivals == [] and 429 not in v1.statuses
        assert list(route.served_counts().values()) == [3, 0]
        assert route.deployments[0].passed_over == 0
    finally:
        v1.stop()
        v2.stop()


async def test_without_the_option_the_same_primary_is_passed_over() -> None:
    v1 = LimitedVendor(requests=2, window=3600.0).start()
    v2 = LimitedVendor().start()
    try:
        route = Route([_model(v1, "primary"), _model(v2, "fallback")])
        with anyio.fail_after(GUARD):
            served = [
                _served_by(await complete(route, CONTEXT, StreamOptions(api_key="k")))
                for _ in range(3)
            ]
        assert served == ["primary", "primary", "fallback"]
        counts = route.served_counts()
        assert list(counts.values()) == [2, 1]
        assert list(counts) == [d.label for d in route.deployments]
        assert route.fallback_calls == 1
    finally:
        v1.stop()
        v2.stop()


async def test_a_learned_limit_past_the_calls_wait_falls_over() -> None:
    # The window resets in an hour: past max_retry_delay, a real failure for the call.
    v1 = LimitedVendor(requests=1, window=3600.0).start()
    v2 = LimitedVendor().start()
    try:
        route = Route([_model(v1, "primary"), _model(v2, "fallback")], wait_for_primary=True)
        opts = StreamOptions(api_key="k", max_retry_delay=2.0)
        with anyio.fail_after(GUARD):
            first = await complete(route, CONTEXT, opts)
            second = await complete(route, CONTEXT, opts)
        assert _served_by(first) == "primary"
        assert _served_by(second) == "fallback"
        assert second.attempts is not None and second.attempts[0].kind == "rate_limit"
        assert list(route.served_counts().values()) == [1, 1]
        assert len(v1.arrivals) == 1  # the limit was known: nothing more was sent to it
    finally:
        v1.stop()
        v2.stop()


# --- a 429 with a pause the call may wait -------------------------------------------------


async def test_a_429_within_the_calls_wait_is_retried_on_the_primary() -> None:
    first = faux_model([faux_error("rate_limit", status=429, retry_after=0.05), "from primary"])
    second = faux_model(["from fallback"])
    route = Route([first, second], wait_for_primary=True)
    with anyio.fail_after(GUARD):
        message = await complete(route, CONTEXT, StreamOptions(max_retries=2))
    assert message.text() == "from primary"
    assert message.attempts is not None and [a.kind for a in message.attempts] == [None]
    assert list(route.served_counts().values()) == [1, 0]
    assert route.fallback_calls == 0


async def test_without_the_option_a_429_goes_to_the_fallback() -> None:
    first = faux_model([faux_error("rate_limit", status=429, retry_after=0.05), "from primary"])
    second = faux_model(["from fallback"])
    route = Route([first, second])
    with anyio.fail_after(GUARD):
        message = await complete(route, CONTEXT, StreamOptions(max_retries=2))
    assert message.text() == "from fallback"
    assert list(route.served_counts().values()) == [0, 1]


async def test_a_429_past_max_retry_delay_falls_over() -> None:
    first = faux_model([faux_error("rate_limit", status=429, retry_after=120.0)])
    second = faux_model(["from fallback"])
    route = Route([first, second], wait_for_primary=True)
    with anyio.fail_after(GUARD):
        message = await complete(route, CONTEXT, StreamOptions(max_retry_delay=5.0))
    assert message.text() == "from fallback"
    assert message.attempts is not None
    assert [a.kind for a in message.attempts] == ["rate_limit", None]
    counts = route.served_counts()
    assert list(counts.values()) == [0, 1]  # the fallback's answer is the fallback's


async def test_a_route_cooldown_of_rate_limits_is_waited_out_for_the_primary() -> None:
    # The first call may not retry (max_retries=0): its 429 moves it on, and the route
    # cools the primary for the 0.2 s the vendor asked. The next call waits those out
    # for the primary rather than go to the fallback.
    first = faux_model([faux_error("rate_limit", status=429, retry_after=0.2), "primary again"])
    second = faux_model(["fallback 1", "fallback 2"])
    route = Route([first, second], wait_for_primary=True)
    opts = StreamOptions(max_retries=0)
    with anyio.fail_after(GUARD):
        one = await complete(route, CONTEXT, opts)
        assert route.ready_in(route.deployments[0]) > 0
        two = await complete(route, CONTEXT, opts)
    assert one.text() == "fallback 1"
    assert two.text() == "primary again"
    assert two.attempts is not None and len(two.attempts) == 1
    assert list(route.served_counts().values()) == [1, 1]


# --- real failures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status"),
    [("server", 500), ("overloaded", 529), ("auth", 401), ("not_found", 404)],
)
async def test_a_real_failure_falls_over_and_is_not_waited_for(kind: Any, status: int) -> None:
    first = faux_model([faux_error(kind, status=status), "primary, later"])
    second = faux_model(["fallback 1", "fallback 2"])
    clock = Clock()
    route = Route([first, second], wait_for_primary=True, clock=clock)
    opts = StreamOptions(max_retries=0)
    with anyio.fail_after(GUARD):
        one = await complete(route, CONTEXT, opts)
        # Cooling for the failure (5 s, or 600 s for auth and not_found): the next call
        # goes to the fallback at once, though it could wait that long.
        two = await complete(route, CONTEXT, StreamOptions(max_retries=0, max_retry_delay=900))
    assert one.text() == "fallback 1" and two.text() == "fallback 2"
    assert one.attempts is not None and one.attempts[0].kind == kind
    assert two.attempts is not None and [a.model for a in two.attempts] == [second.id]
    primary = route.deployments[0]
    assert primary.fault_until > clock.now
    assert list(route.served_counts().values()) == [0, 2]
    # Once the fault's cooldown is over, the primary serves again.
    clock.now = primary.fault_until + 1
    with anyio.fail_after(GUARD):
        three = await complete(route, CONTEXT, opts)
    assert three.text() == "primary, later"
    assert list(route.served_counts().values()) == [1, 2]


async def test_a_rate_limit_after_a_fault_keeps_the_faults_deadline() -> None:
    clock = Clock()
    route = Route([faux_model([]), faux_model([])], wait_for_primary=True, clock=clock)
    d = route.deployments[0]
    route.cool(d, "server", None)
    fault = d.fault_until
    assert fault == d.cool_until == clock.now + route.cooldown
    route.cool(d, "rate_limit", 60.0)  # a longer pause, of a rate limit
    assert d.cool_until == clock.now + 60.0 and d.fault_until == fault
    clock.now = fault + 0.5  # the fault is over; the pause is not: a saturated primary
    assert route.ready_in(d) > 0 and d.fault_until < clock.now


# --- the counts across processes ----------------------------------------------------------


async def test_counts_are_kept_in_a_shared_store_when_it_counts() -> None:
    configure_limits(store=MemoryStore())  # a store of its own stands for a shared one
    try:
        a, b = faux_model(["a1", "a2", "a3"]), faux_model(["b1"])
        one = Route([a, b], wait_for_primary=True, name="eval")
        two = Route([a, b], wait_for_primary=True, name="eval")  # another process
        with anyio.fail_after(GUARD):
            await complete(one, CONTEXT)
            await complete(two, CONTEXT)
            await complete(two, CONTEXT)
        assert list(one.served_counts().values()) == [1, 0]
        assert list(two.served_counts().values()) == [2, 0]
        shared = await one.shared_served()
        if not hasattr(limiter, "tally"):
            assert shared is None  # this store counts nothing yet: per process only
            return
        # Counted as each call ends, written to the store after (a task of its own when
        # the caller read the stream to its end): there within moments.
        with anyio.fail_after(GUARD):
            while shared is None or list(shared.values()) != [3, 0]:
                await anyio.sleep(0.01)
                shared = await one.shared_served()
        assert await two.shared_served() == shared
        assert list(shared) == [d.label for d in one.deployments]
    finally:
        configure_limits()


async def test_a_fallbacks_answer_is_counted_as_the_fallbacks_in_the_store_too() -> None:
    if not hasattr(limiter, "tally"):
        pytest.skip("this store counts nothing yet")
    configure_limits(store=MemoryStore())
    try:
        first = faux_model([faux_error("server", status=500)])
        route = Route([first, faux_model(["b1"])], wait_for_primary=True, name="fb")
        with anyio.fail_after(GUARD):
            message = await complete(route, CONTEXT, StreamOptions(max_retries=0))
            assert message.text() == "b1"
            shared = await route.shared_served()
            while shared is None or sum(shared.values()) == 0:
                await anyio.sleep(0.01)
                shared = await route.shared_served()
        assert list(shared.values()) == [0, 1]
        assert list(route.served_counts().values()) == [0, 1]
    finally:
        configure_limits()


async def test_without_a_shared_store_there_are_no_shared_counts() -> None:
    route = Route([faux_model(["a"]), faux_model(["b"])])
    await complete(route, CONTEXT)
    assert await route.shared_served() is None
    assert list(route.served_counts().values()) == [1, 0]


def test_the_log_names_no_key(caplog: pytest.LogCaptureFixture) -> None:
    # The route's name is made of labels (providers, ids, hosts): never a key.
    model = Model(
        id="m",
        api="openai-completions",
        provider="openai",
        base_url="https://user:sk-secret@example.com/v1",
    )
    with caplog.at_level(logging.DEBUG, logger="stream_core"):
        route = Route([model], wait_for_primary=True)
    assert "sk-secret" not in route.name + repr(route) + caplog.text
