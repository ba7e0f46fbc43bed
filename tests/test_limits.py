"""The limiter, from the user's side (issue 26): on by default, it learns a key's limits
from the vendor's headers and keeps every later window under them; a 429 pauses the key
for every caller; a vendor with no headers gets adaptive concurrency; waiting counts
against the call's limits; budgets end a call that cannot fit before anything is sent.
Against a loopback vendor that enforces fixed windows (tests/limited_vendor.py)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterator

import anyio
import pytest
from limited_vendor import LimitedVendor

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    UserMessage,
    budget_spent,
    complete,
    complete_sync,
    configure_limits,
    stream,
)

pytestmark = pytest.mark.anyio

CONTEXT = Context(messages=[UserMessage(content="hello there")])


@pytest.fixture
def vendor_factory() -> Iterator[list[LimitedVendor]]:
    made: list[LimitedVendor] = []
    yield made
    for v in made:
        v.stop()


def _vendor(made: list[LimitedVendor], **kwargs: object) -> LimitedVendor:
    v = LimitedVendor(**kwargs).start()  # type: ignore[arg-type]
    made.append(v)
    return v


def _model(v: LimitedVendor, **kwargs: object) -> Model:
    if v.fmt == "anthropic":
        api, provider = "anthropic-messages", "anthropic"
    else:
        api, provider = "openai-completions", "openai"
    fields: dict[str, object] = {"max_tokens": 50, **kwargs}
    return Model(id="m-1", api=api, provider=provider, base_url=v.url, **fields)  # type: ignore[arg-type]


async def _many(model: Model, count: int, **options: object) -> list:
    found: list = [None] * count

    async def one(i: int) -> None:
        found[i] = await complete(model, CONTEXT, StreamOptions(api_key="k", **options))  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return found


def _later_windows(v: LimitedVendor) -> list[dict[str, int]]:
    """Every window after the one the first 429 fell in (the limiter starts open)."""
    first_429 = min((k for k, w in v.windows.items() if w["429"]), default=None)
    return [w for k, w in sorted(v.windows.items()) if first_429 is None or k > first_429]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
async def test_after_the_first_window_no_call_meets_a_429(
    vendor_factory: list[LimitedVendor], fmt: str
) -> None:
    # Anthropic's resets are whole seconds: a one-second window keeps them exact.
    v = _vendor(vendor_factory, requests=4, window=1.0 if fmt == "anthropic" else 0.4, fmt=fmt)
    model = _model(v)
    first = await _many(model, 10)
    assert all(m.stop_reason == "stop" for m in first), [m.error for m in first if m.error]
    before = sum(w["429"] for w in v.windows.values())
    second = await _many(model, 10)
    assert all(m.stop_reason == "stop" for m in second)
    assert sum(w["429"] for w in v.windows.values()) == before  # learned: no new 429
    assert v.over() == []
    assert all(w["requests"] <= 4 for w in v.windows.values())
    # The message carries the last limit state a harness shows ("resets in 0.3 s").
    limits = {limit.name: limit for limit in second[-1].limits}
    assert limits["requests"].limit == 4
    assert limits["requests"].resets_in() is not None


async def test_token_reservations_settle_to_what_calls_used(
    vendor_factory: list[LimitedVendor],
) -> None:
    # Each call reserves its estimate + max_tokens (57) but uses 27: settling gives the
    # difference back, so a window takes ~20 calls, not the 10 its reservations allow.
    v = _vendor(vendor_factory, requests=1000, tokens=600, window=0.5)
    model = _model(v)
    await _many(model, 3)  # learns the limits
    found = await _many(model, 45)
    assert all(m.stop_reason == "stop" for m in found)
    later = _later_windows(v)
    assert later and all(w["429"] == 0 for w in later)
    assert v.over() == []
    assert max(w["requests"] for w in later) > 600 // 57


async def test_a_429_pauses_the_key_for_every_caller(vendor_factory: list[LimitedVendor]) -> None:
    v = _vendor(vendor_factory, requests=1, window=0.6, headers=False)
    model = _model(v)
    await complete(model, CONTEXT, StreamOptions(api_key="k"))  # uses the window's one request
    first = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert first.error is not None and first.error.kind == "rate_limit"
    arrivals = len(v.arrivals)
    # Another caller of the same key waits out the pause instead of meeting the 429.
    later = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retries=0))
    assert later.stop_reason == "stop", later.error
    assert len(v.arrivals) == arrivals + 1
    # A different key is another quota: never paused by this one.
    other = await complete(model, CONTEXT, StreamOptions(api_key="other", max_retries=0))
    assert other.error is None or other.error.kind == "rate_limit"


async def test_a_vendor_without_headers_gets_adaptive_concurrency(
    vendor_factory: list[LimitedVendor],
) -> None:
    async def run(enabled: bool) -> int:
        configure_limits(enabled=enabled)
        v = _vendor(vendor_factory, concurrency=3, headers=False, delay=0.05, retry_after=False)
        found = await _many(_model(v), 40, retry_backoff=0.01, max_retries=8)
        assert all(m.stop_reason == "stop" for m in found), [m.error for m in found if m.error]
        return sum(w["429"] for w in v.windows.values())

    without = await run(False)
    with_limiter = await run(True)
    assert with_limiter < without / 2, (with_limiter, without)


async def test_streams_dropped_unread_give_their_slots_back(
    vendor_factory: list[LimitedVendor],
) -> None:
    """A stream left mid-body and never closed (an `async for` broken outside `async
    with`) must not keep its concurrency slot: once a 429 has bounded a key, a few such
    streams would otherwise leave every later call waiting forever."""
    v = _vendor(vendor_factory, concurrency=1, headers=False, delay=0.2, retry_after=False)
    model = _model(v)
    first = await _many(model, 2, retry_backoff=0.01, max_retries=8)  # one meets a 429
    assert all(m.stop_reason == "stop" for m in first)
    assert 429 in v.statuses
    with anyio.fail_after(20):  # a guard against the hang this test is about
        for _ in range(4):
            s = stream(model, CONTEXT, StreamOptions(api_key="k"))
            async for event in s:
                if event.type == "message_update":
                    break  # left unread, never closed
            del s
            gc.collect()
            await anyio.sleep(0)  # the dropped bodies are closed on the loop
        m = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    assert m.stop_reason == "stop", m.error


async def test_waiting_for_the_limit_counts_against_the_call_limits(
    vendor_factory: list[LimitedVendor],
) -> None:
    v = _vendor(vendor_factory, requests=1, window=3600.0)  # never rolls mid-test
    model = _model(v)
    assert (await complete(model, CONTEXT, StreamOptions(api_key="k"))).error is None
    arrivals = len(v.arrivals)
    started = time.monotonic()
    timed = await complete(
        model, CONTEXT, StreamOptions(api_key="k", total_timeout=5, max_retry_delay=10_000)
    )
    assert timed.error is not None and timed.error.kind == "timeout"
    assert "nothing was sent" in timed.error.message
    capped = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=2))
    assert capped.error is not None and capped.error.kind == "rate_limit"
    assert capped.error.retry_after is not None and capped.error.retry_after > 2
    assert time.monotonic() - started < 5  # neither waited: both knew at once
    assert len(v.arrivals) == arrivals


async def test_cancel_ends_a_wait_for_the_limit(vendor_factory: list[LimitedVendor]) -> None:
    v = _vendor(vendor_factory, requests=1, window=3600.0)
    model = _model(v)
    await complete(model, CONTEXT, StreamOptions(api_key="k"))
    cancel = anyio.Event()

    async def press() -> None:
        await anyio.sleep(0.1)
        cancel.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(press)
        with anyio.fail_after(5):
            options = StreamOptions(api_key="k", cancel=cancel, max_retry_delay=10_000)
            m = await complete(model, CONTEXT, options)
    assert m.error is not None and m.error.kind == "aborted"


def test_sync_calls_share_the_limiter(vendor_factory: list[LimitedVendor]) -> None:
    v = _vendor(vendor_factory, requests=2, window=0.3)
    model = _model(v)
    found = [complete_sync(model, CONTEXT, StreamOptions(api_key="k")) for _ in range(7)]
    assert all(m.stop_reason == "stop" for m in found)
    assert all(w["requests"] <= 2 for w in v.windows.values())
    assert sum(w["429"] for w in v.windows.values()) <= 1  # only before it learned


# --- budgets ---------------------------------------------------------------------------

PRICES = ModelPrices(input=1_000.0, output=2_000.0)  # USD per million tokens


async def test_a_budget_ends_the_call_that_cannot_fit_before_sending(
    vendor_factory: list[LimitedVendor],
) -> None:
    v = _vendor(vendor_factory, requests=1000)
    model = _model(v, prices=PRICES, max_tokens=20)
    # Worst case: ~7 input tokens at 1,000 USD/M and 20 output at 2,000 USD/M = 0.047.
    configure_limits(budget_usd=0.1)
    found = [await complete(model, CONTEXT, StreamOptions(api_key="k")) for _ in range(4)]
    kinds = [m.error.kind if m.error else None for m in found]
    assert kinds[:2] == [None, None]
    # Settled to the exact cost: what is left is the budget less what the calls cost.
    spent = await budget_spent()
    assert spent == pytest.approx(sum(m.usage.cost.total for m in found if m.error is None))
    assert spent <= 0.1
    refused = next(m for m in found if m.error is not None)
    assert refused.error.kind == "budget"
    assert "budget 'budget_usd'" in refused.error.message
    assert "USD left" in refused.error.message and "nothing was sent" in refused.error.message
    assert len(v.arrivals) == sum(k is None for k in kinds)


async def test_concurrent_calls_cannot_overspend_a_budget_by_racing(
    vendor_factory: list[LimitedVendor],
) -> None:
    v = _vendor(vendor_factory, requests=1000, delay=0.05)
    model = _model(v, prices=PRICES, max_tokens=20)
    configure_limits(budgets={"eval": 0.2})
    found = await _many(model, 30, budget="eval")
    served = [m for m in found if m.error is None]
    assert served and len(served) < 30
    assert all(m.error.kind == "budget" for m in found if m.error is not None)
    assert sum(m.usage.cost.total for m in served) <= 0.2
    assert await budget_spent("eval") == pytest.approx(sum(m.usage.cost.total for m in served))


async def test_per_call_cost_cap_and_unknown_names(vendor_factory: list[LimitedVendor]) -> None:
    v = _vendor(vendor_factory, requests=1000)
    priced = _model(v, prices=PRICES, max_tokens=20)
    m = await complete(priced, CONTEXT, StreamOptions(api_key="k", max_cost_usd=0.01))
    assert m.error is not None and m.error.kind == "budget"
    assert "max_cost_usd allows 0.010000 USD" in m.error.message
    assert v.arrivals == []
    with pytest.raises(ValueError, match="StreamOptions.budget: no budget named 'nope'"):
        stream(priced, CONTEXT, StreamOptions(api_key="k", budget="nope"))
    with pytest.raises(ValueError, match="StreamOptions.max_cost_usd"):
        stream(priced, CONTEXT, StreamOptions(api_key="k", max_cost_usd=-1))
    configure_limits(budget_usd=5)
    unpriced = await complete(_model(v), CONTEXT, StreamOptions(api_key="k"))
    assert unpriced.error is not None and unpriced.error.kind == "budget"
    assert "has no prices" in unpriced.error.message


def test_configure_limits_names_the_bad_argument(tmp_path: object) -> None:
    with pytest.raises(TypeError, match="budget_usd must be a number"):
        configure_limits(budget_usd="10")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget_usd must be a finite number"):
        configure_limits(budget_usd=-1)
    with pytest.raises(ValueError, match=r"store: ftp:// is not a store"):
        configure_limits(store="ftp://x")
    with pytest.raises(ValueError, match="budgets: 'budget_usd' is not a budget name"):
        configure_limits(budgets={"budget_usd": 1})


async def test_a_store_that_is_down_never_fails_a_call(
    vendor_factory: list[LimitedVendor], caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    configure_limits(store=f"redis://:secret-pw@127.0.0.1:{port}/0")
    v = _vendor(vendor_factory, requests=3, window=0.4)
    with caplog.at_level(logging.WARNING, logger="stream_core"):
        found = await _many(_model(v), 12)
    assert all(m.stop_reason == "stop" for m in found)
    warnings = [r.getMessage() for r in caplog.records if "limit store" in r.getMessage()]
    assert len(warnings) == 1, warnings  # said once
    assert "limiting in this process" in warnings[0]
    assert "secret-pw" not in warnings[0]
    assert v.over() == [] or len(v.over()) == 1  # the process's own limiter still learned
