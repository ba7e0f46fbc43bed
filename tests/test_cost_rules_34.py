"""Prices and re-pointed models (issue 34): a model re-pointed at another endpoint is
checked as a constructed one is, a price-less or unpriceable model is never admitted under
a budget, and a time-of-day price applies only on the vendor that has one (DeepSeek's
off-peak discount is not Azure's). Costs are computed at pinned moments, never the hour
the test runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    Usage,
    UserMessage,
    complete,
    configure_limits,
    get_model,
)
from stream_core.provider import compute_cost
from stream_core.testing import FakeVendor, fake_vendor, faux_text

CONTEXT = Context(messages=[UserMessage(content="hello there")])
PEAK = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
OFF_PEAK = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)
THOUSANDS = Usage(input=1000, output=1000)


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    turns = [faux_text("ok", usage=Usage(input=5, output=5))] * 4
    with fake_vendor(scenarios={"*": turns}) as server:
        yield server


# --- re-pointing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"prices": None},
        {"prices": {"input": -1.0, "output": 2.0}},
        {"prices": {"input": float("nan"), "output": 2.0}},
        {"base_url": "ftp://gateway.example"},
        {"headers": {"x-api-key": "two\nlines"}},
        {"max_tokens": None},
        {"api_url": "https://typo.example"},
    ],
    ids=["no-prices", "negative", "nan", "scheme", "header", "max-tokens", "unknown-field"],
)
def test_re_pointing_a_model_is_checked_as_a_constructor(change: dict[str, object]) -> None:
    model = get_model("openai", "gpt-4o")
    with pytest.raises(ValidationError):
        model.replace(**change)
    name, value = next(iter(change.items()))
    with pytest.raises(ValidationError):
        setattr(model, name, value)


@pytest.mark.anyio
async def test_a_re_pointed_model_is_served_and_priced(vendor: FakeVendor) -> None:
    model = get_model("openai", "gpt-4o").replace(
        base_url=vendor.url + "/v1", id="team-gpt", prices={"input": 1.0, "output": 2.0}
    )
    assert isinstance(model.prices, ModelPrices) and model.id == "team-gpt"
    configure_limits(budget_usd=1.0)
    message = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    assert message.error is None and message.text() == "ok"
    assert message.usage.cost is not None
    assert message.usage.cost.total == pytest.approx((5 * 1.0 + 5 * 2.0) / 1e6)
    assert vendor.requests[-1].model == "team-gpt"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "prices",
    [None, ModelPrices.model_construct(input=-5.0, output=-5.0)],
    ids=["none", "negative"],
)
async def test_a_model_without_real_prices_is_never_admitted_under_a_budget(
    vendor: FakeVendor, prices: ModelPrices | None
) -> None:
    good = Model(
        id="team-model", api="openai-completions", provider="team", base_url=vendor.url + "/v1"
    )
    # Past every check, as pydantic's `model_copy(update=...)` leaves it.
    model = good.model_copy(update={"prices": prices})
    assert compute_cost(model, THOUSANDS) is None
    configure_limits(budget_usd=1.0)
    message = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    assert message.error is not None and message.error.kind == "budget"
    assert "has no prices" in message.error.message
    assert vendor.requests == []  # nothing was sent


# --- time-of-day prices ----------------------------------------------------------------------


def test_deepseek_s_off_peak_price_applies_on_deepseek_s_api_only() -> None:
    own = get_model("deepseek", "deepseek-reasoner")
    peak = compute_cost(own, THOUSANDS, at=PEAK)
    off = compute_cost(own, THOUSANDS, at=OFF_PEAK)
    assert peak is not None and off is not None and off.total < peak.total
    for model_id in ("deepseek-r1", "deepseek-r1-0528"):
        azure = get_model("azure-openai", model_id)
        p = azure.prices
        assert p.input is not None and p.output is not None
        flat = (p.input + p.output) / 1000
        for at in (PEAK, OFF_PEAK):
            cost = compute_cost(azure, THOUSANDS, at=at)
            assert cost is not None and cost.total == pytest.approx(flat), (model_id, at)
