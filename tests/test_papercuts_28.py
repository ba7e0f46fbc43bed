"""The papercuts a harness author and a plugin author hit (issue 28, point 5), each from
the user's side: a tool result's text, the audit's fields named, usage totals, a priced
faux model, `Tool.from_model` given a dict, another vendor's bytes, a kind by its own
name, and a flat error body."""

from __future__ import annotations

import anyio
import httpx
import pytest
import respx

from stream_core import (
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    Tool,
    ToolPairAudit,
    ToolResultMessage,
    Usage,
    UserMessage,
    complete,
    total_usage,
)
from stream_core.provider import error_from_vendor, vendor_error_fields
from stream_core.testing import faux_model, faux_text

CTX = Context(messages=[UserMessage(content="hi")])


def test_a_tool_result_has_its_text() -> None:
    assert ToolResultMessage(tool_call_id="t", tool_name="x", content="42").text() == "42"


def test_the_audit_names_its_fields() -> None:
    doc = ToolPairAudit.__doc__ or ""
    for name in ("unpaired_calls", "orphan_results", "name_mismatches", "ok"):
        assert f"`{name}`" in doc


def test_usage_adds_up_its_total() -> None:
    assert Usage(input=10, output=5).total_tokens == 15
    assert Usage(input=10, output=5, cache_read=2, cache_write=1).total_tokens == 18
    assert Usage().total_tokens == 0


def test_a_faux_model_with_prices_keeps_the_session_cost_known() -> None:
    priced = faux_model(
        [faux_text("summary", usage=Usage(input=1000, output=100))],
        prices=ModelPrices(input=1.0, output=2.0),
    )
    message = anyio.run(complete, priced, CTX)
    assert message.usage.cost is not None
    assert message.usage.cost.total == pytest.approx(0.001 + 0.0002)
    assert total_usage([message]).cost is not None


def test_tool_from_model_given_a_dict_says_what_it_takes() -> None:
    with pytest.raises(TypeError, match=r"Tool.from_model takes a pydantic model class.*dict"):
        Tool.from_model({"type": "object"})  # type: ignore[arg-type]


def test_another_vendors_bytes_say_so() -> None:
    model = Model(
        id="claude-x", api="anthropic-messages", provider="anthropic", base_url="https://a.test"
    )
    body = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'
    with respx.mock:
        respx.post("https://a.test/v1/messages").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        message = anyio.run(complete, model, CTX, StreamOptions(api_key="k", max_retries=0))
    assert message.error is not None and message.error.kind == "protocol"
    assert "OpenAI-style stream" in message.error.message


def test_a_kind_by_its_own_name_is_that_kind() -> None:
    assert error_from_vendor("overloaded", "busy").kind == "overloaded"
    assert error_from_vendor("overloaded_error", "busy").kind == "overloaded"
    assert error_from_vendor("something_else", "x").kind == "server"


def test_a_flat_error_body_is_read() -> None:
    assert vendor_error_fields({"error": "Model is overloaded", "error_type": "overloaded"}) == (
        "overloaded",
        "Model is overloaded",
    )
    assert vendor_error_fields({"error": "boom"}) == (None, "boom")
