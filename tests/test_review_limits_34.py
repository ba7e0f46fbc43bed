"""Review of the limiter's bounds (issue 34), from the user's side: what the first round
left open. A call waiting on a used-up token limit waits at most `max_retry_delay` in all
(it polled until the window's reset, up to `max_pause`); a budget value another writer
left in Redis in a form Redis's own float parser refuses, or a reservations key of the
wrong type, no longer fails every budgeted call as "store cannot be reached"; a worker
whose clock is wrong reads Anthropic's absolute resets by the vendor's `Date`."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis_server import session_url
from test_limit_bounds import ScriptedVendor

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    UserMessage,
    budget_spent,
    complete,
    configure_limits,
)

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hello there")])


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture
def vendors() -> Iterator[list[ScriptedVendor]]:
    made: list[ScriptedVendor] = []
    yield made
    for v in made:
        v.stop()


def _vendor(made: list[ScriptedVendor], script: list[tuple[Any, ...]]) -> ScriptedVendor:
    v = ScriptedVendor(script).start()
    made.append(v)
    return v


def _prefix() -> str:
    return f"r{uuid.uuid4().hex[:12]}"


# --- waits on a token limit count against max_retry_delay ---------------------------------

USED_UP_TOKENS = {
    "x-ratelimit-limit-tokens": "1000",
    "x-ratelimit-remaining-tokens": "0",
    "x-ratelimit-reset-tokens": "8700h",  # believed for max_pause: 300 s
}


@pytest.mark.slow
@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_wait_on_a_used_up_token_limit_ends_at_max_retry_delay(
    vendors: list[ScriptedVendor], store: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("redis_url") if store == "redis" else None
    configure_limits(store=url, prefix=_prefix())
    model = _vendor(vendors, [("ok", USED_UP_TOKENS), ("ok", {})]).model()
    assert (await complete(model, CONTEXT, StreamOptions(api_key="k"))).error is None
    opts = StreamOptions(api_key="k", max_retry_delay=1.0, max_retries=0)
    with anyio.fail_after(20):  # a guard: it polled every 50 ms until the reset (300 s)
        m = await complete(model, CONTEXT, opts)
    assert m.error is not None and m.error.kind == "rate_limit", m.error
    assert "max_retry_delay" in m.error.message and "nothing was sent" in m.error.message


# --- a budget value Redis itself cannot read ----------------------------------------------


def _priced(v: ScriptedVendor) -> Model:
    return v.model().replace(prices=ModelPrices(input=1.0, output=2.0))


@pytest.mark.parametrize("planted", [" 0.5", "0x10", "1e5000"])
async def test_a_budget_spend_redis_cannot_parse_does_not_stop_budgets(
    vendors: list[ScriptedVendor], redis_url: str, planted: str
) -> None:
    import redis

    prefix = _prefix()
    configure_limits(store=redis_url, prefix=prefix, budget_usd=1.0, timeout=2.0)
    client = redis.Redis.from_url(redis_url)
    client.set(f"{prefix}:b:budget_usd", planted)  # another tool's write, or a hostile one
    model = _priced(_vendor(vendors, [("ok", {})]))
    with anyio.fail_after(20):  # a guard: it waited for the store, then ended `budget`
        m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=2))
    client.close()
    # Was: INCRBYFLOAT refused the value, the script failed, and every budgeted call of
    # every worker ended `budget` ("the shared limit store cannot be reached").
    assert m.error is None, m.error
    assert await budget_spent() == pytest.approx(m.usage.cost.total)  # type: ignore[union-attr]


async def test_a_reservations_key_of_another_type_does_not_stop_budgets(
    vendors: list[ScriptedVendor], redis_url: str
) -> None:
    import redis

    prefix = _prefix()
    configure_limits(store=redis_url, prefix=prefix, budget_usd=1.0, timeout=2.0)
    client = redis.Redis.from_url(redis_url)
    client.set(f"{prefix}:r:budget_usd", "not a sorted set")
    model = _priced(_vendor(vendors, [("ok", {})]))
    opts = StreamOptions(api_key="k", max_retry_delay=2)
    with anyio.fail_after(20):  # a guard: each waited for the store, then ended `budget`
        found = [await complete(model, CONTEXT, opts) for _ in range(2)]
    client.close()
    assert [m.error for m in found] == [None, None]  # was: both `budget`, unsent
    spent = sum(m.usage.cost.total if m.usage.cost else 0.0 for m in found)
    assert await budget_spent() == pytest.approx(spent)


# --- a worker whose clock is wrong reads an absolute reset by the vendor's Date ----------

_SLOW_WORKER = """
import asyncio, sys, time
real = time.time
time.time = lambda: real() - 3600.0  # this worker's clock is an hour slow
from stream_core import Context, Model, StreamOptions, UserMessage, complete, configure_limits
configure_limits(store=sys.argv[1], prefix=sys.argv[2])
model = Model(id="m-1", api="openai-completions", provider="openai",
              base_url=sys.argv[3], max_tokens=20)
m = asyncio.run(complete(model, Context(messages=[UserMessage(content="hi")]),
                         StreamOptions(api_key="k")))
print(m.error is None)
"""


@pytest.mark.slow
async def test_a_slow_clock_reading_an_absolute_reset_pauses_no_one_for_long(
    vendors: list[ScriptedVendor], redis_url: str, tmp_path: Path
) -> None:
    store = redis_url
    prefix = _prefix()
    reset = datetime.fromtimestamp(int(time.time()) + 10, UTC).isoformat()
    used_up = {
        "anthropic-ratelimit-requests-limit": "10",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset.replace("+00:00", "Z"),
        "date": formatdate(usegmt=True),
    }
    model = _vendor(vendors, [("ok", used_up), ("ok", {})]).model()
    script = tmp_path / "slow_worker.py"
    script.write_text(_SLOW_WORKER)
    done = subprocess.run(
        [sys.executable, str(script), store, prefix, model.base_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr[-2000:]
    # A worker with the right clock: the window resets in 10 s, whatever the slow one's
    # clock made of it (was 300 s, `max_pause`: it read the reset as an hour away).
    configure_limits(store=store, prefix=prefix)
    m = await complete(model, CONTEXT, StreamOptions(api_key="k", max_retry_delay=0))
    assert m.error is not None and m.error.retry_after is not None, m.error
    assert 0 < m.error.retry_after <= 12, m.error


async def test_a_planted_reservation_does_not_give_the_budget_back(
    vendors: list[ScriptedVendor], redis_url: str
) -> None:
    import redis

    prefix = _prefix()
    configure_limits(store=redis_url, prefix=prefix, budget_usd=1.0, timeout=2.0)
    model = _priced(_vendor(vendors, [("ok", {})]))
    first = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    client = redis.Redis.from_url(redis_url)
    # An expired "reservation" of 1e300 USD: given back, it zeroed the spend.
    client.zadd(f"{prefix}:r:budget_usd", {"planted|1e300": 0})
    second = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    client.close()
    assert first.error is None and second.error is None
    spent = sum(m.usage.cost.total if m.usage.cost else 0.0 for m in (first, second))
    assert await budget_spent() == pytest.approx(spent)  # was: the second call's cost only
