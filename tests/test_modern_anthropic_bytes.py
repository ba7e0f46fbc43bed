"""Issue 35 on the Messages API, testing kit: `vendor_bytes` writes scripted server calls,
results, citations, generated files, redacted thinking, a programmatic call's caller, the
container and the server-tool counts as Anthropic streams them, and the provider reads the
bytes back to the scripted message (plus the vendor records it now holds in `raw`)."""

from __future__ import annotations

from typing import Any

import pytest

from stream_core import (
    AssistantMessage,
    Citation,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    VendorContent,
)
from stream_core.contract_tests.kit import Fixture, check_expect, replay, whole
from stream_core.testing import faux_server_message, vendor_bytes

API = "anthropic-messages"
SAID = {"timestamp", "ttft_ms", "duration_ms", "api", "provider", "model", "raw_stop_reason",
        "response_id", "response_model"}  # fmt: skip


def without_raw(value: Any) -> Any:
    """A message dump without the vendor records (`raw`), which a script leaves out."""
    if isinstance(value, dict):
        return {k: without_raw(v) for k, v in value.items() if k != "raw"}
    if isinstance(value, list):
        return [without_raw(v) for v in value]
    return value


def round_trip(message: AssistantMessage) -> AssistantMessage:
    written = vendor_bytes(message, API)
    run = replay(Fixture(API, "scripted", written.body, written.meta), whole(written.body))
    check_expect(run.message, written.meta["expect"])
    got = without_raw(run.message.model_dump(mode="json", exclude=SAID))
    assert got == without_raw(message.model_dump(mode="json", exclude=SAID))
    return run.message


def test_a_web_search_with_cited_text_comes_back_as_scripted() -> None:
    message = faux_server_message(
        "web_search",
        {"query": "weather in Paris"},
        sources=[("https://meteo.example/paris", "Paris forecast"), "https://news.example/heat"],
        text="Sunny, 24 °C.",
        citations=True,
        usage=Usage(input=10, output=5),
    )
    back = round_trip(message)
    call, result, text = back.content
    assert isinstance(call, ServerToolCall) and call.raw is not None
    assert call.raw["type"] == "server_tool_use"
    assert isinstance(result, ServerToolResult) and result.raw is not None
    assert result.raw["type"] == "web_search_tool_result"
    assert isinstance(text, TextContent) and text.citations
    assert text.citations[0].raw is not None
    assert text.citations[0].raw["type"] == "web_search_result_location"
    assert back.usage.server_tools == {"web_search": 1}


def test_code_execution_files_caller_container_and_vendor_blocks_come_back() -> None:
    said: dict[str, Any] = {"api": "faux", "provider": "faux", "model": "faux"}
    caller = {"type": "code_execution_20250825", "tool_id": "srvtoolu_run"}
    message = AssistantMessage(
        **said,
        content=[
            ThinkingContent(thinking="", signature="opaque==", redacted=True),
            ServerToolCall(
                id="srvtoolu_run",
                name="bash_code_execution",
                kind="code_execution",
                input={"command": "python plot.py"},
            ),
            ServerToolResult(
                call_id="srvtoolu_run",
                name="bash_code_execution",
                kind="code_execution",
                text="saved plot.png\n",
                exit_code=0,
            ),
            FileContent(file_id="file_011plot", call_id="srvtoolu_run"),
            ServerToolResult(
                call_id="srvtoolu_edit",
                name="text_editor_code_execution",
                kind="code_execution",
                is_error=True,
                text="unavailable",
            ),
            TextContent(
                text="Here is the plot.",
                citations=[Citation(url="https://data.example", cited_text="the data")],
            ),
            VendorContent(api=API, data={"type": "container_upload", "file_id": "file_in"}),
            ToolCall(id="toolu_1", name="lookup", arguments={"q": "x"}, caller=caller),
        ],
        usage=Usage(input=3, output=4, server_tools={"web_fetch": 2}),
        container={"id": "container_011", "expires_at": "2030-01-01T00:00:00Z"},
        stop_reason="tool_use",
    )
    back = round_trip(message)
    assert back.container == message.container
    assert back.content[2].raw is not None  # type: ignore[union-attr]
    assert back.content[2].raw["content"]["content"] == [  # type: ignore[union-attr]
        {"type": "bash_code_execution_output", "file_id": "file_011plot"}
    ]


def test_a_generated_file_without_its_result_cannot_be_written() -> None:
    said: dict[str, Any] = {"api": "faux", "provider": "faux", "model": "faux"}
    lone = AssistantMessage(**said, content=[FileContent(file_id="f", call_id="srvtoolu_x")])
    with pytest.raises(ValueError, match="no ServerToolResult for 'srvtoolu_x'"):
        vendor_bytes(lone, API)
