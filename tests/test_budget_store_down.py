"""A budget kept in a shared store is never spent where the store cannot count it (issue
34, point 6): while the store cannot be reached, a call drawing on the budget waits for it
within its limits and then ends `budget`, unsent; calls with no budget go on, limited in
their own process. Before, each process spent the whole budget again on its own count."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
)
from stream_core.testing import FakeVendor, fake_vendor, faux_text

pytestmark = pytest.mark.anyio

CONTEXT = Context(messages=[UserMessage(content="hello")])


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    with fake_vendor(scenarios={"m-1": [faux_text("hi")] * 20}) as server:
        yield server


@pytest.fixture(autouse=True)
def _limits_back() -> Iterator[None]:
    yield
    configure_limits()


def _model(server: FakeVendor) -> Model:
    return Model(
        id="m-1",
        api="openai-completions",
        provider="openai",
        base_url=server.url + "/v1",
        prices=ModelPrices(input=1.0, output=1.0),
        context_window=10_000,
        max_tokens=100,
    )


def _dead_redis() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    return f"redis://127.0.0.1:{port}/0"


async def test_a_budget_whose_store_is_down_is_not_spent(vendor: FakeVendor) -> None:
    pytest.importorskip("redis")
    configure_limits(store=_dead_redis(), budget_usd=1.0, timeout=0.1)
    model = _model(vendor)
    options = StreamOptions(api_key="k", max_retry_delay=0.5)
    found = [await complete(model, CONTEXT, options) for _ in range(3)]
    assert [m.error.kind if m.error else "ok" for m in found] == ["budget"] * 3
    assert all("cannot be reached" in m.error.message for m in found if m.error)
    assert len(vendor.requests) == 0  # nothing was sent


async def test_calls_without_a_budget_go_on_while_the_store_is_down(vendor: FakeVendor) -> None:
    pytest.importorskip("redis")
    configure_limits(store=_dead_redis(), timeout=0.1)
    model = _model(vendor)
    found = [await complete(model, CONTEXT, StreamOptions(api_key="k")) for _ in range(3)]
    assert all(m.error is None for m in found)
    assert len(vendor.requests) == 3


async def test_a_file_store_spoiled_mid_run_spends_no_more(
    vendor: FakeVendor, tmp_path: Path
) -> None:
    path = tmp_path / "limits.json"
    configure_limits(store=path, budget_usd=1.0)
    model = _model(vendor)
    options = StreamOptions(api_key="k", max_retry_delay=0.2)
    first = await complete(model, CONTEXT, options)
    assert first.error is None
    path.write_text('{"keys": {}, "budg')  # cut by something outside the library
    after = await complete(model, CONTEXT, options)
    assert after.error is not None and after.error.kind == "budget"
    assert len(vendor.requests) == 1


async def test_a_budgets_spend_is_not_reported_as_0_while_its_store_is_down() -> None:
    pytest.importorskip("redis")
    from stream_core import budget_spent

    url = _dead_redis().replace("redis://", "redis://:store-pw@")
    configure_limits(store=url, budget_usd=1.0, timeout=0.1)
    with pytest.raises(ConnectionError, match="cannot be reached") as caught:
        await budget_spent()
    assert "store-pw" not in str(caught.value)
