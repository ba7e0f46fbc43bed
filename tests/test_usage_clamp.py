"""Usage a vendor reports beyond what the request could produce (issue 34, point 4): one
answer claiming `completion_tokens: 10**20` with `max_tokens=100` must not charge 2e14 USD
to a shared budget. The settled usage is clamped (output to the request's output limit,
input to the context window, or to ten windows when the request asks for vendor-run
tools that sample in rounds) and the vendor's own counts are kept on
`usage.clamped`. Against a loopback fake vendor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    Usage,
    UserMessage,
    budget_spent,
    complete,
    configure_limits,
)
from stream_core.testing import FakeVendor, fake_vendor, faux_text

pytestmark = pytest.mark.anyio

CONTEXT = Context(messages=[UserMessage(content="hello there")])
PRICES = ModelPrices(input=1.0, output=2.0)  # USD per million tokens


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    turns = [
        faux_text("hi", usage=Usage(input=7, output=10**20)),
        faux_text("hi", usage=Usage(input=10**20, output=3)),
        faux_text("hi", usage=Usage(input=7, output=3)),
    ]
    with fake_vendor(scenarios={"m-1": turns}) as server:
        yield server


def _model(server: FakeVendor) -> Model:
    return Model(
        id="m-1",
        api="openai-completions",
        provider="openai",
        base_url=server.url + "/v1",
        prices=PRICES,
        context_window=1_000,
        max_tokens=500,
    )


async def test_a_usage_beyond_the_request_is_clamped_and_the_budget_survives(
    vendor: FakeVendor,
) -> None:
    configure_limits(budget_usd=1.0)
    model = _model(vendor)
    options = StreamOptions(api_key="k", max_tokens=100)
    first = await complete(model, CONTEXT, options)
    assert first.error is None
    # Output clamped to max_tokens=100: 100 tokens at 2 USD/M, never 2e14 USD.
    assert first.usage.output == 100 and first.usage.input == 7
    assert first.usage.cost is not None and first.usage.cost.total < 0.001
    assert first.usage.clamped == {"output": 10**20}
    second = await complete(model, CONTEXT, options)
    assert second.error is None  # the budget was not spent by the first answer
    # Input clamped to the context window (the request's body is far smaller).
    assert second.usage.input == 1_000 and second.usage.output == 3
    assert second.usage.clamped == {"input": 10**20}
    third = await complete(model, CONTEXT, options)
    assert third.error is None and third.usage.clamped is None
    spent = await budget_spent()
    assert spent < 0.02
    assert spent == pytest.approx(sum(m.usage.cost.total for m in (first, second, third)))  # type: ignore[union-attr]
    # Serialized, a clamp is part of the usage; an honest usage has no such field.
    assert first.model_dump()["usage"]["clamped"] == {"output": 10**20}
    assert "clamped" not in third.model_dump()["usage"]


async def test_without_max_tokens_output_is_bounded_by_the_model_limit(
    vendor: FakeVendor,
) -> None:
    model = _model(vendor)
    message = await complete(model, CONTEXT, StreamOptions(api_key="k"))
    assert message.usage.output == 500 and message.usage.clamped == {"output": 10**20}


async def test_a_request_with_vendor_run_tools_may_report_ten_windows_of_input(
    vendor: FakeVendor,
) -> None:
    """A web search loop re-reads the prompt each round and the vendor sums the rounds
    (a real Anthropic answer reports 404,500 input tokens): allowed up to ten windows,
    only when the request asked for such a tool."""
    model = _model(vendor)

    def web_search(payload: dict[str, object], _model: Model) -> dict[str, object]:
        return {**payload, "tools": [{"type": "web_search_preview"}]}

    await complete(model, CONTEXT, StreamOptions(api_key="k"))  # the first turn
    message = await complete(model, CONTEXT, StreamOptions(api_key="k", on_payload=web_search))
    assert message.usage.input == 10 * 1_000 and message.usage.clamped == {"input": 10**20}
