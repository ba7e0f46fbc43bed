"""The OpenAI Responses dialect with Codex CLI's requests (issue 36): its first request
reads as it means it (instructions and developer messages as the system prompt, its
freeform and local-shell tools as functions another vendor can call), its second turn
reads the first answer back with the state carrier in `Inbound.carriers`, and a field that
cannot be read is named."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_dialect_responses import _PNG, DIALECT, _block, _events, _faux

from stream_core import (
    AssistantMessage,
    ImageContent,
    ServerTool,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
)
from stream_core.provider import CARRIER_PREFIX, RequestFieldError

# --- Codex CLI's requests ------------------------------------------------------------------

SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Runs a shell command and returns its output.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "workdir": {"type": "string"},
            "timeout_ms": {"type": "number"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
}
CODEX_FIRST = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex, based on GPT-5.",
    "input": [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions>full</permissions>"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>/w</environment_context>"}
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in this folder?"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{_PNG}"},
            ],
        },
    ],
    "tools": [SHELL, APPLY_PATCH, {"type": "local_shell"}, {"type": "web_search"}],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "high", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199f1c2-5f1e-7a52-a1b3-0c2f6a7d9e10",
    "text": {"verbosity": "low"},
}


def test_codex_first_request_reads_as_it_means_it() -> None:
    inbound = DIALECT.parse_request(CODEX_FIRST, {"openai-beta": "responses=experimental"})
    ctx, opts = inbound.context, inbound.options
    assert inbound.model == "gpt-5-codex" and inbound.stream
    assert ctx.system_prompt == "You are Codex, based on GPT-5.\n\n<permissions>full</permissions>"
    assert [m.role for m in ctx.messages] == ["user", "user"]
    last = ctx.messages[1].content
    assert isinstance(last, list) and isinstance(last[1], ImageContent)
    shell, patch, local, search = ctx.tools or []
    assert isinstance(shell, Tool) and shell.parameters == SHELL["parameters"]
    assert isinstance(patch, Tool) and patch.parameters["required"] == ["input"]
    assert "lark grammar" in patch.parameters["properties"]["input"]["description"]
    assert isinstance(local, Tool) and local.name == "local_shell"
    assert isinstance(search, ServerTool) and search.kind == "web_search"
    assert (opts.reasoning, opts.tool_choice, opts.parallel_tool_calls) == ("high", "auto", False)
    assert opts.session_id == CODEX_FIRST["prompt_cache_key"]
    assert inbound.unmodeled == {
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "text.verbosity": "low",
    }
    assert inbound.headers == {"openai-beta": "responses=experimental"}


def _codex_items(body: bytes) -> list[dict[str, Any]]:
    """The output items Codex keeps from a stream (`output_item.done`), as it sends them
    back: without their ids (it never serializes them)."""
    items = []
    for chunk in body.split(b"\n\n"):
        for line in chunk.split(b"\n"):
            if line.startswith(b"data: "):
                data = json.loads(line[6:])
                if data["type"] == "response.output_item.done":
                    items.append({k: v for k, v in data["item"].items() if k != "id"})
    return items


def test_codex_second_turn_reads_the_first_answer_back_with_its_carrier() -> None:
    answer = _faux(
        [
            ThinkingContent(thinking="I should list it.", signature="sig-upstream"),
            ToolCall(id="toolu_7", name="shell", arguments={"command": ["ls"]}),
        ],
        stop_reason="tool_use",
    )
    items = _codex_items(_events(answer, carrier=lambda m: CARRIER_PREFIX + "state"))
    assert [i["type"] for i in items] == ["reasoning", "function_call", "reasoning"]
    assert items[-1] == {"type": "reasoning", "summary": [], "encrypted_content": "scgw1.state"}
    output = {"type": "function_call_output", "call_id": "toolu_7", "output": "a.txt\nb.txt"}
    body = {**CODEX_FIRST, "input": [*CODEX_FIRST["input"], *items, output]}
    inbound = DIALECT.parse_request(body, {})
    messages = inbound.context.messages
    assert [m.role for m in messages] == ["user", "user", "assistant", "tool_result"]
    assert inbound.carriers == {2: "scgw1.state"}
    turn = messages[2]
    assert isinstance(turn, AssistantMessage)
    assert [b.type for b in turn.content] == ["thinking", "tool_call"]
    assert turn.content[0].thinking == "I should list it."  # type: ignore[union-attr]
    result = messages[3]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_name, result.text(), result.is_error) == ("shell", "a.txt\nb.txt", False)


def test_the_carrier_restores_the_upstream_answer() -> None:
    """With the gateway's state module: the answer packed at the end of the stream comes
    back from the client's history as the upstream wrote it (its signature included)."""
    from stream_core.gateway import _state

    secret = b"s" * 32
    answer = _faux(
        [
            ThinkingContent(thinking="Checking.", signature="EqQBCkgIARABGAIiQL"),
            TextContent(text="Let me look."),
            ToolCall(id="toolu_9", name="shell", arguments={"command": ["pwd"]}),
        ],
        stop_reason="tool_use",
    )
    items = _codex_items(_events(answer, carrier=lambda m: _state.pack(m, secret)))
    output = {"type": "function_call_output", "call_id": "toolu_9", "output": "/w"}
    inbound = DIALECT.parse_request({"model": "m", "input": ["hi", *items, output][1:]}, {})
    restored = _state.restore(inbound.context.messages, inbound.carriers, secret)
    assert restored[0].content[0].signature == "EqQBCkgIARABGAIiQL"  # type: ignore[union-attr]
    assert [_block(b)[:3] for b in restored[0].content[1:]] == [
        _block(b)[:3] for b in answer.content[1:]
    ]


def test_later_turns_of_builtin_and_custom_calls_read_as_the_translator_reads_them() -> None:
    items = [
        {"type": "message", "role": "user", "content": "patch it"},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1", "name": "apply_patch"}
        | {"input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
        {"type": "local_shell_call", "id": "lsh_2", "call_id": "c2", "status": "completed"}
        | {"action": {"type": "exec", "command": ["ls"]}},
        {"type": "local_shell_call_output", "call_id": "c2", "output": "a"},
        {"type": "web_search_call", "id": "ws_3", "status": "completed"}
        | {"action": {"type": "search", "query": "tides"}},
        {"type": "message", "role": "assistant", "id": "msg_4", "phase": "final_answer"}
        | {"content": [{"type": "output_text", "text": "Done.", "annotations": []}]},
    ]
    messages = DIALECT.parse_request({"model": "m", "input": items}, {}).context.messages
    assert [m.role for m in messages] == ["user"] + ["assistant", "tool_result"] * 2 + ["assistant"]
    patch, shell = messages[1].content[0], messages[3].content[0]  # type: ignore[union-attr]
    assert (patch.builtin, patch.name, patch.arguments) == (
        "custom_tool_call",
        "apply_patch",
        {"input": "*** Begin Patch"},
    )
    assert (shell.builtin, shell.arguments["command"]) == ("local_shell_call", ["ls"])
    assert messages[4].tool_name == "local_shell"  # type: ignore[union-attr]
    search, text = messages[5].content  # type: ignore[union-attr]
    assert (search.type, search.kind, search.raw["id"]) == (
        "server_tool_call",
        "web_search",
        "ws_3",
    )
    assert text.text_signature == '{"id":"msg_4","phase":"final_answer"}'


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "m", "input": [{"type": "function_call", "name": "f"}]}, "input[0].call_id"),
        ({"model": "m", "input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"model": "m", "input": "hi", "tools": [{"name": "f"}]}, "tools[0].type"),
        ({"model": "m", "input": "hi", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"model": "m", "input": "hi", "reasoning": {"effort": "ultra"}}, "reasoning.effort"),
        ({"model": "m", "input": "hi", "max_output_tokens": -1}, "max_output_tokens"),
        ({"model": "m", "input": "hi", "tool_choice": {"type": "web_search"}}, "tool_choice"),
        (
            {"model": "m", "input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "input[0].content[0].type",
        ),
    ],
)
def test_a_field_that_cannot_be_read_is_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestFieldError) as raised:
        DIALECT.parse_request(body, {})
    assert raised.value.field == field


def test_unread_fields_are_kept_as_sent() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "previous_response_id": "resp_1",
        "service_tier": "flex",
        "reasoning": {"effort": "xhigh", "summary": "detailed"},
        "text": {"format": {"type": "json_schema", "name": "Tide", "schema": {"type": "object"}}},
    }
    inbound = DIALECT.parse_request(body, {})
    assert inbound.unmodeled == {
        "previous_response_id": "resp_1",
        "service_tier": "flex",
        "reasoning.effort": "xhigh",
        "reasoning.summary": "detailed",
    }
    assert inbound.options.reasoning == "high"
    assert inbound.options.output_schema == {"type": "object", "title": "Tide"}


def test_a_failed_output_in_codexs_older_shape_is_an_error_result() -> None:
    items = [
        {"role": "user", "content": "run it"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1"}
        | {"output": {"content": "exit 1", "success": False}},
    ]
    messages = DIALECT.parse_request({"model": "m", "input": items}, {}).context.messages
    result = messages[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.text(), result.is_error, result.tool_name) == ("exit 1", True, "shell")
