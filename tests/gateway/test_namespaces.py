"""Codex declares some tools in a `namespace` (Responses only). Another vendor gets each
member as one function `<namespace>__<name>`, and a call to it comes back to the client
as the namespace and name it declared."""

from __future__ import annotations

import json

import httpx
import pytest
from ops_upstreams import gateway_in_thread

from stream_core.gateway import GatewayConfig, Upstream, create_app
from stream_core.provider import dialect
from stream_core.testing import fake_vendor, faux_tool_call

SPAWN = {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
         "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}  # fmt: skip
GO = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
SPACE = {"type": "namespace", "name": "multi_agent_v1", "description": "Agents.", "tools": [SPAWN]}
REQUEST = {"model": "m", "stream": True, "input": [GO], "tools": [SPACE]}


def test_a_namespace_is_read_as_flat_functions() -> None:
    inbound = dialect("openai-responses").parse_request(REQUEST, {})
    tools = inbound.context.tools or []
    assert [t.name for t in tools] == ["multi_agent_v1__spawn_agent"]
    assert inbound.tool_names == {"multi_agent_v1__spawn_agent": ("multi_agent_v1", "spawn_agent")}


def test_a_call_to_a_namespaced_tool_comes_back_in_the_clients_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    call = faux_tool_call("multi_agent_v1__spawn_agent", {"task": "x"})
    with fake_vendor(scenarios={"claude-sonnet-4-5": [call]}) as vendor:
        up = Upstream("anthropic/claude-sonnet-4-5", base_url=vendor.url)
        with gateway_in_thread(create_app(GatewayConfig(models={"m": up}))) as base:
            r = httpx.post(base + "/v1/responses", json=REQUEST, timeout=30)
        sent = vendor.requests[0].body
    assert [t["name"] for t in sent["tools"]] == ["multi_agent_v1__spawn_agent"]
    done = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    items = [e["item"] for e in done if e.get("type") == "response.output_item.done"]
    calls = [i for i in items if i["type"] == "function_call"]
    assert [(c["namespace"], c["name"]) for c in calls] == [("multi_agent_v1", "spawn_agent")]
