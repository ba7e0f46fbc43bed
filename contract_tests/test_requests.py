"""The request side, for every provider, built-in or plugin (issue 28, point 3): every text
of the context reaches the payload (the system prompt, each user text, each tool result,
each tool's name, description and parameters); each control reaches the field its
`WireAPI.controls` entry names first (`stop_sequences`, `generationConfig.topP`,
`options.seed`: dots for nesting); an API declared as taking no tools
(`WireAPI.takes_tools=False`) is checked with a tool-less context and must refuse tools at
`stream()`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import httpx
import pytest

import stream_core.provider
from stream_core import (
    AssistantMessage,
    Context,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import apis_under_test, contract_model, options, run_provider

APIS = apis_under_test()
SYSTEM, USER, RESULT = "sys-marker-7f3a", "user-marker-91c2", "result-marker-5d08"
TOOL_NAME, TOOL_DESC, PARAM = "probe_marker_tool", "desc-marker-2b6e", "param_marker_c4"
PARAMETERS = {"type": "object", "properties": {PARAM: {"type": "string"}}, "required": [PARAM]}

# Distinctive values, so the kit can find each control where its declaration says it goes.
VALUES: dict[str, Any] = {
    "stop": ["stop-marker-e1"],
    "top_p": 0.37,
    "top_k": 37,
    "seed": 3737,
    "presence_penalty": 0.37,
    "frequency_penalty": 0.41,
}
_PATH = re.compile(r"`?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`?")


def _wire(api: str) -> Any:
    wire = stream_core.provider.get_provider(api).wire
    if wire is None:
        pytest.skip(f"{api} is a stream function without a WireAPI: nothing declared to check")
    return wire


def _context(tools: bool) -> Context:
    messages: list[Any] = [UserMessage(content=f"Please look. {USER}")]
    if tools:
        call = ToolCall(id="call_marker", name=TOOL_NAME, arguments={PARAM: "x"})
        messages += [
            AssistantMessage(
                api="other",
                provider="other",
                model="other",
                content=[call],
                stop_reason="tool_use",
            ),  # fmt: skip
            ToolResultMessage(
                tool_call_id="call_marker",
                tool_name=TOOL_NAME,
                content=[TextContent(text=f"Found it. {RESULT}")],
            ),  # fmt: skip
            UserMessage(content="And then?"),
        ]
    return Context(
        system_prompt=f"Be brief. {SYSTEM}",
        messages=messages,
        tools=[Tool(name=TOOL_NAME, description=TOOL_DESC, parameters=PARAMETERS)] if tools else [],
    )


def _sent(api: str, context: Context, opts: StreamOptions) -> dict[str, Any]:
    """The JSON body the provider sends (the vendor answers 400: nothing is retried)."""
    answer = httpx.Response(400, json={"error": {"type": "invalid_request_error", "message": "no"}})

    async def main() -> Any:
        return await run_provider(api, [answer], context=context, opts=opts)

    run = anyio.run(main)
    assert len(run.requests) == 1, "the provider sent no request"
    body: dict[str, Any] = json.loads(run.requests[0].content)
    return body


@pytest.mark.parametrize("api", APIS)
def test_every_text_of_the_context_reaches_the_payload(api: str) -> None:
    """If this fails: `build_request` drops part of the context (the system prompt, a user
    text, a tool result, or a tool's name, description or parameters)."""
    tools = _wire(api).takes_tools
    sent = json.dumps(_sent(api, _context(tools), options()), ensure_ascii=False)
    wanted = {"system prompt": SYSTEM, "user text": USER}
    if tools:
        wanted |= {
            "tool result": RESULT,
            "tool name": TOOL_NAME,
            "tool description": TOOL_DESC,
            "tool parameters": PARAM,
        }
    missing = [f"{what} ({marker!r})" for what, marker in wanted.items() if marker not in sent]
    assert not missing, f"{api}: the payload lacks the context's " + ", ".join(missing)


@pytest.mark.parametrize("api", APIS)
def test_an_api_without_tools_refuses_them_at_the_call(api: str) -> None:
    """If this fails: an API declared `takes_tools=False` sent a request with tools."""
    if _wire(api).takes_tools:
        pytest.skip(f"{api} takes tools")
    with pytest.raises(ValueError, match=rf"context\.tools: {api} takes no tools"):
        stream_core.stream(contract_model(api), _context(True), options())


def _find(payload: Any, path: str) -> tuple[bool, Any]:
    node = payload
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


@pytest.mark.parametrize("control", list(VALUES))
@pytest.mark.parametrize("api", APIS)
def test_a_control_reaches_the_field_it_declares(api: str, control: str) -> None:
    """If this fails: `WireAPI.controls[control]` names one field (its first word, dots for
    nesting) and `build_request` puts the value somewhere else, or nowhere."""
    wire = _wire(api)
    declared = wire.controls.get(control)
    if declared is None:
        pytest.skip(f"{api} does not take {control}")
    match = _PATH.match(declared.strip())
    assert match, (
        f"{api}: WireAPI.controls[{control!r}] = {declared!r} does not start with the field "
        "it goes to (e.g. 'generationConfig.topP'), so the kit cannot check it"
    )
    path = match.group(1)
    value = VALUES[control]
    try:
        sent = _sent(api, _context(wire.takes_tools), options(**{control: value}))
    except ValueError:
        pytest.skip(f"{api} refuses {control} for the kit's model (an endpoint flag)")
    found, got = _find(sent, path)
    assert found, f"{api}: {control} declared as {declared!r}, but the payload has no {path!r}"
    assert got == value or (isinstance(got, list) and value in (got, *got)), (
        f"{api}: {control}={value!r} declared as {path!r}, which holds {got!r}"
    )
