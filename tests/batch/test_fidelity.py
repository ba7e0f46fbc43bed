"""A batch result is the message a stream of the same answer gives (fidelity_run.py):
for every API with a batch codec, text, thinking (where the API has it), a tool call, a
structured answer and a length cut, streamed and batched from one fake vendor's script,
are identical but for timing and a cost at the vendor's batch price."""

from __future__ import annotations

import pytest
from batch_apis import API, APIS, environment
from fidelity_run import fidelity


@pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])
def test_a_batch_result_is_the_streamed_message_at_the_batch_price(
    api: API, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = api.missing()
    if why is not None:
        pytest.skip(why)
    found, unset = environment(api)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    compared = fidelity(api)
    assert {c.case for c in compared} >= {"text", "tool_call", "structured", "length"}
    bad = {c.case: c.diffs for c in compared if not c.identical}
    assert bad == {}
    for c in compared:
        assert c.stream_cost > 0
        assert c.batch_cost == pytest.approx(c.stream_cost * 0.5, rel=1e-9)
    stops = {c.case: c.stop for c in compared}
    assert stops["tool_call"] == "tool_use" and stops["length"] == "length"
    structured = next(c for c in compared if c.case == "structured")
    assert structured.output == {"answer": "yes", "score": 3}


def test_the_comparison_sees_a_changed_block_and_a_cost_off_the_batch_price() -> None:
    from fidelity_run import compare

    from stream_core import AssistantMessage, Cost, TextContent, Usage

    def message(text: str, cost: float) -> AssistantMessage:
        usage = Usage(input=10, output=2, cost=Cost(input=cost, total=cost))
        return AssistantMessage(
            api="anthropic-messages", provider="anthropic", model="m",
            content=[TextContent(text=text)], usage=usage, ttft_ms=5.0,
        )  # fmt: skip

    assert compare("a", "c", message("yes", 2.0), message("yes", 1.0)).identical
    changed = compare("a", "c", message("yes", 2.0), message("no", 1.0))
    assert not changed.identical and "content[0].text" in changed.diffs[0]
    priced = compare("a", "c", message("yes", 2.0), message("yes", 2.0))
    assert not priced.identical and "usage.cost.total" in " ".join(priced.diffs)
