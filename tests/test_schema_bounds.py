"""Gemini's tool schemas have no `$ref`, so references are inlined; the inlining is bounded
(issue 23, point 7): a recursive model or a fan-out of references gives a small request or
a clear error at the call, never hundreds of megabytes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

import stream_core
from stream_core import Context, StreamOptions, Tool, UserMessage

pytestmark = pytest.mark.anyio

MODEL = stream_core.Model(
    id="gemini-2.5-flash",
    api="google-generative-ai",
    provider="google",
    base_url="https://generativelanguage.googleapis.com/v1beta",
)


class Node(BaseModel):
    """A tree: recursive through `children`."""

    name: str
    children: list[Node] = []
    parent: Node | None = None


async def _sent_tools(tool: Tool) -> tuple[int, Any]:
    context = Context(messages=[UserMessage(content="hi")], tools=[tool])
    with respx.mock() as mock:
        route = mock.route().mock(return_value=httpx.Response(400, json={"error": {}}))
        await stream_core.complete(MODEL, context, StreamOptions(api_key="AIza-test-key-000000"))
    body = route.calls.last.request.content
    return len(body), json.loads(body)["tools"][0]["functionDeclarations"][0]["parameters"]


async def test_seven_self_references_give_a_small_request() -> None:
    # 320 bytes of schema that used to inline to 190 MB (7 references, 16 levels deep).
    node = {
        "type": "object",
        "properties": {f"k{i}": {"$ref": "#/$defs/n"} for i in range(7)},
    }
    tool = Tool(name="t", parameters={"$defs": {"n": node}, "$ref": "#/$defs/n"})
    size, params = await _sent_tools(tool)
    assert size < 100_000
    # Three levels of the recursion are described, then a bare object saying so.
    level = params["properties"]["k0"]["properties"]["k0"]["properties"]["k0"]
    assert level == {"type": "object", "description": "(a n, nested further)"}


async def test_a_recursive_pydantic_model_gives_a_small_request() -> None:
    size, params = await _sent_tools(Tool.from_model(Node, name="tree"))
    assert size < 100_000
    child = params["properties"]["children"]["items"]
    assert child["properties"]["name"] == {"type": "string", "title": "Name"}


async def test_a_fan_out_too_large_to_inline_raises_at_the_call_naming_the_tool() -> None:
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for level in range(1, 12):  # each level refers to the one below 8 times: 8**11 leaves
        defs[f"d{level}"] = {
            "type": "object",
            "properties": {f"p{i}": {"$ref": f"#/$defs/d{level - 1}"} for i in range(8)},
        }
    tool = Tool(name="fan_out", parameters={"$defs": defs, "$ref": "#/$defs/d11"})
    context = Context(messages=[UserMessage(content="hi")], tools=[tool])
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=httpx.Response(200))
        with pytest.raises(ValueError, match=r"context.tools\[0\].parameters \('fan_out'\)"):
            stream_core.stream(MODEL, context, StreamOptions(api_key="AIza-test-key-000000"))
    assert route.call_count == 0


async def test_a_shared_definition_is_still_inlined_whole() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    schema = {
        "$defs": {"Address": address},
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/Address"}, "work": {"$ref": "#/$defs/Address"}},
    }
    _, params = await _sent_tools(Tool(name="t", parameters=schema))
    assert params["properties"]["home"] == params["properties"]["work"] == address
