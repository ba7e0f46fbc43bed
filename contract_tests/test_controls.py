"""The portable request controls and structured output, for every provider (CONTRACT 1, 7).

A control the API lists in `WireAPI.controls` must reach the request (the body sent differs
from the same call without it) or raise at `stream()` naming the control; a control it does
not list raises at `stream()` naming the API; so does an `extra` key it does not read. A
structured-output call in the API's own mode changes the request, and in tool mode sends one
more tool. Nothing here is vendor-specific: each API's exact fields are its own unit tests.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

import stream_core.provider
from stream_core import Context, Model, Tool, UserMessage
from stream_core.contract_tests.kit import apis_under_test, contract_model, options, run_provider
from stream_core.provider import CONTROLS

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
VALUES: dict[str, Any] = {
    "tool_choice": {"tool": "get_weather"},
    "parallel_tool_calls": False,
    "stop": ["END"],
    "top_p": 0.5,
    "top_k": 5,
    "seed": 7,
    "presence_penalty": 0.25,
    "frequency_penalty": 0.25,
    "output_schema": SCHEMA,
}
CONTEXT = Context(
    system_prompt="Be brief.",
    messages=[UserMessage(content="Weather in Paris?")],
    tools=[Tool(name="get_weather", description="Weather.", parameters=SCHEMA)],
)
APIS = apis_under_test()


def _context_for(api: str) -> Context:
    """The kit's context; without its tools for an API that takes none (`takes_tools`)."""
    wire = stream_core.provider.get_provider(api).wire
    if wire is not None and not wire.takes_tools:
        return CONTEXT.model_copy(update={"tools": []})
    return CONTEXT


def _wire(api: str) -> Any:
    wire = stream_core.provider.get_provider(api).wire
    if wire is None:
        pytest.skip(f"{api} is a stream function without a WireAPI: it declares no controls")
    return wire


def _sent(api: str, model: Model | None = None, **overrides: Any) -> dict[str, Any]:
    """The JSON body the provider sends for a call with these options (the vendor answers
    400, so nothing is retried)."""
    error = {"error": {"type": "invalid_request_error", "message": "no"}}
    answer = httpx.Response(400, json=error)

    async def main() -> Any:
        return await run_provider(
            api, [answer], context=_context_for(api), opts=options(**overrides), model=model
        )

    run = anyio.run(main)
    assert len(run.requests) == 1, "the provider sent no request"
    body: dict[str, Any] = json.loads(run.requests[0].content)
    return body


@pytest.mark.parametrize("control", CONTROLS)
@pytest.mark.parametrize("api", APIS)
def test_a_control_reaches_the_request_or_raises_at_the_call(api: str, control: str) -> None:
    """If this fails: a control in `WireAPI.controls` is dropped by `build_request`, or one
    the API does not list is silently ignored instead of raising at the call."""
    wire = _wire(api)
    if control not in wire.controls:
        with pytest.raises(ValueError, match=rf"StreamOptions\.{control}: {api}"):
            stream_core.stream(contract_model(api), CONTEXT, options(**{control: VALUES[control]}))
        return
    model = contract_model(api, structured_output="native")
    try:
        with_it = _sent(api, model, **{control: VALUES[control]})
    except ValueError as exc:  # a value this API (or this model) cannot express
        assert f"StreamOptions.{control}" in str(exc) or control in str(exc)
        return
    assert with_it != _sent(api, model), f"{api}: {control} changed nothing in the request"


@pytest.mark.parametrize("api", APIS)
def test_an_unknown_extra_key_raises_at_the_call(api: str) -> None:
    """If this fails: a typo in `extra` would silently do nothing."""
    _wire(api)
    with pytest.raises(ValueError, match=r"StreamOptions\.extra: unknown key 'no_such_knob'"):
        stream_core.stream(contract_model(api), CONTEXT, options(extra={"no_such_knob": 1}))


@pytest.mark.parametrize("api", APIS)
def test_every_declared_extra_key_is_accepted_at_the_call(api: str) -> None:
    """If this fails: `WireAPI.extra` lists a key the call checks still refuse."""
    wire = _wire(api)
    for key in wire.extra:
        try:
            stream_core.stream(contract_model(api), CONTEXT, options(extra={key: "x"}))
        except (TypeError, ValueError) as exc:  # a wrong value may be refused, the key not
            assert "unknown key" not in str(exc), exc


@pytest.mark.parametrize("api", APIS)
def test_tool_mode_sends_one_more_tool_or_raises(api: str) -> None:
    """If this fails: the forced-tool fallback of structured output is not sent."""
    wire = _wire(api)
    if "output_schema" not in wire.controls:
        pytest.skip(f"{api} takes no output_schema")
    model = contract_model(api, structured_output="tool")
    try:
        body = _sent(api, model, output_schema=SCHEMA)
    except ValueError as exc:  # an API that cannot force a tool says so at the call
        assert "tool" in str(exc)
        return
    assert "final_answer" in json.dumps(body), "the answer tool is not in the request"
