"""Token estimates for the blocks of issue 35: each counted as what is sent.

Files by their size (a reference at a flat charge), server calls and results by the JSON
that goes back to their vendor (encrypted payloads included) or the text another vendor
gets, whichever is larger; cited text with its sources; server tools by their object.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core._content import Source
from stream_core._history.tokens import (
    FILE_BYTES_PER_TOKEN,
    FILE_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
)


def user(*blocks: Any) -> int:
    return estimate_message_tokens(UserMessage(content=list(blocks))) - MESSAGE_OVERHEAD_TOKENS


def said(*blocks: Any) -> int:
    message = AssistantMessage(api="a", provider="p", model="m", content=list(blocks))
    return estimate_message_tokens(message) - MESSAGE_OVERHEAD_TOKENS


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def pdf(size: int) -> FileContent:
    data = base64.b64encode(b"%PDF" + b"x" * (size - 4)).decode()
    return FileContent(data=data, mime_type="application/pdf", name="r.pdf")


def test_a_file_costs_its_decoded_size_with_a_floor() -> None:
    assert user(pdf(1_000)) == FILE_TOKENS  # small: about one page at least
    big = 400_000
    assert abs(user(pdf(big)) - big // FILE_BYTES_PER_TOKEN) <= 2
    assert user(pdf(2 * big)) > user(pdf(big))


def test_a_file_by_reference_is_a_flat_charge_and_an_image_file_as_an_image() -> None:
    assert user(FileContent(file_id="file_1", mime_type="application/pdf")) == FILE_TOKENS
    assert user(FileContent(url="https://a.test/x.pdf")) == FILE_TOKENS
    image = FileContent(data=base64.b64encode(b"\x89PNG" * 10_000).decode(), mime_type="image/png")
    assert user(image) == IMAGE_TOKENS


def test_a_file_in_a_tool_result_counts_like_one_in_a_user_message() -> None:
    result = ToolResultMessage(tool_call_id="c", tool_name="read", content=[pdf(100_000)])
    assert estimate_message_tokens(result) - MESSAGE_OVERHEAD_TOKENS == user(pdf(100_000))


def test_a_generated_file_counts_as_the_note_sent_in_its_place() -> None:
    made = FileContent(
        data=base64.b64encode(b"\x89PNG" * 100_000).decode(),
        mime_type="image/png",
        name="plot.png",
        call_id="srvtoolu_1",
    )
    assert said(made) == estimate_tokens(made.as_text())
    assert said(made) < 50


def test_a_server_result_counts_its_raw_payload_when_larger_than_its_reading() -> None:
    encrypted = "E" * 40_000
    raw = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {"type": "web_search_result", "url": "https://a.test", "encrypted_content": encrypted}
        ],
    }
    sources = [Source(url="https://a.test", title="A page")]
    with_raw = ServerToolResult(call_id="srvtoolu_1", name="web_search", sources=sources, raw=raw)
    reading = ServerToolResult(call_id="srvtoolu_1", name="web_search", sources=sources)
    assert said(with_raw) >= len(encrypted) // 4
    assert said(reading) == estimate_tokens(reading.as_text())
    assert "https://a.test" in reading.as_text() and said(reading) > 0


def test_a_long_server_result_text_is_counted_whole() -> None:
    text = "line of output\n" * 2_000
    result = ServerToolResult(call_id="s", name="code_execution", text=text, exit_code=0)
    assert said(result) >= estimate_tokens(text)


def test_a_server_call_counts_its_whole_input_or_its_raw() -> None:
    query = "q" * 20_000
    call = ServerToolCall(id="s", name="web_search", input={"query": query})
    assert said(call) >= estimate_tokens(query)
    raw = {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {"query": query}}
    assert said(call.model_copy(update={"raw": raw})) >= estimate_tokens(compact(raw))


def test_cited_text_counts_its_sources() -> None:
    plain = TextContent(text="Paris is sunny today.")
    cited = plain.model_copy(
        update={"citations": [Citation(url="https://weather.test/paris", title="Forecast")]}
    )
    assert said(cited) > said(plain)
    assert said(cited) == estimate_tokens(
        "Paris is sunny today. [sources: Forecast <https://weather.test/paris>]"
    )


def test_approvals_vendor_blocks_and_built_in_calls_are_counted() -> None:
    request = ApprovalRequest(id="r", name="create_issue", server="github", arguments={"t": "x"})
    assert said(request) == estimate_tokens(request.as_text())
    answer = ApprovalResponse(request_id="r", approve=True)
    assert user(answer) == estimate_tokens(answer.as_text())
    vendor = VendorContent(api="a", data={"type": "future", "payload": "z" * 4_000})
    assert said(vendor) >= 1_000
    shell = ToolCall(
        id="c",
        name="shell",
        arguments={},
        builtin="local_shell_call",
        raw={"type": "local_shell_call", "action": {"command": ["ls"] * 500}},
    )
    assert said(shell) >= estimate_tokens(compact(shell.raw))


def test_server_tools_count_in_the_context() -> None:
    bare = Context(messages=[UserMessage(content="hi")])
    search = ServerTool(kind="web_search", allowed_domains=["a.test", "b.test"], max_uses=3)
    native = ServerTool.native("openai-responses", {"type": "mcp", "server_url": "x" * 400})
    with_search = bare.model_copy(update={"tools": [search]})
    with_both = bare.model_copy(update={"tools": [search, native]})
    assert estimate_context_tokens(bare) < estimate_context_tokens(with_search)
    assert estimate_context_tokens(with_both) - estimate_context_tokens(with_search) >= 100
