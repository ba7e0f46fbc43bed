"""Bedrock Converse keeps what the vendor sends beyond text and calls (issue 35): documents
out, citations in, Nova's server tools both ways, generated images, any unknown block kind
as VendorContent that goes back unchanged; server tools it lacks raise at `stream()`."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    FileContent,
    Model,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.contract_tests.kit import event_stream_frame

API = "bedrock-converse-stream"
CLAUDE = stream_core.get_model("amazon-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
NOVA = stream_core.get_model("amazon-bedrock", "amazon.nova-2-lite-v1:0")
KEY = {"api_key": "bedrock-api-key-0123456789abcdef"}
PDF = base64.b64encode(b"%PDF-1.7 not really a pdf").decode()
FIXTURES = Path(__file__).parent.parent / "contract_tests" / "fixtures" / API


def frame(event: str, payload: dict[str, Any]) -> bytes:
    return event_stream_frame(event, json.dumps(payload).encode())


def body(*events: tuple[str, dict[str, Any]], stop: str = "end_turn") -> bytes:
    usage = {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}
    return b"".join(
        [
            frame("messageStart", {"role": "assistant"}),
            *(frame(e, p) for e, p in events),
            frame("messageStop", {"stopReason": stop}),
            frame("metadata", {"usage": usage}),
        ]
    )


OK = body(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}))


@pytest.fixture(autouse=True)
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def run(
    context: Context | dict[str, Any], content: bytes = OK, *, model: Model = CLAUDE
) -> tuple[list[dict[str, Any]], AssistantMessage, list[Any]]:
    response = httpx.Response(
        200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=content
    )
    events: list[Any] = []

    async def main() -> AssistantMessage:
        s = stream_core.stream(model, context, StreamOptions(max_retries=0, **KEY))
        async for event in s:
            events.append(event)
        return await s.result()

    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().mock(return_value=response)
        message = anyio.run(main)
    payloads = [json.loads(c.request.content) for c in route.calls]
    return payloads, message, events


def ask(*blocks: Any) -> Context:
    return Context(messages=[UserMessage(content=[TextContent(text="Read these."), *blocks])])


# --- documents out ------------------------------------------------------------------------


def test_a_pdf_goes_out_as_a_document_block_with_citations_asked() -> None:
    files = [
        FileContent(
            data=PDF, mime_type="application/pdf", name="Q3 report (final).pdf", citations=True
        ),
        FileContent(data=PDF, mime_type="application/pdf", name="Q3 report (final).pdf"),
        FileContent(data=PDF, mime_type="text/markdown", name="notes_v2.md"),
        FileContent(
            url="s3://bucket/key/contract.docx",
            mime_type=("application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ),
        FileContent(data=PDF, mime_type="application/pdf", name="../../etc/passwd?!"),
        FileContent(data=PDF, mime_type="text/csv"),
    ]
    (payload,), message, _ = run(ask(*files))
    assert message.stop_reason == "stop"
    text, *docs, cache = payload["messages"][0]["content"]
    assert text == {"text": "Read these."} and "cachePoint" in cache
    assert docs[0] == {
        "document": {
            "format": "pdf",
            "name": "Q3 report (final)",
            "source": {"bytes": PDF},
            "citations": {"enabled": True},
        }
    }
    names = [d["document"]["name"] for d in docs]
    assert names == [
        "Q3 report (final)",
        "Q3 report (final) (2)",
        "notes v2",
        "document",
        "etc passwd",
        "document (2)",
    ]
    assert [d["document"]["format"] for d in docs] == ["pdf", "pdf", "md", "docx", "pdf", "csv"]
    assert docs[3]["document"]["source"] == {"s3Location": {"uri": "s3://bucket/key/contract.docx"}}
    assert "citations" not in docs[1]["document"]


def test_a_file_in_a_tool_result_is_a_document_in_the_result() -> None:
    context = Context(
        messages=[
            UserMessage(content="Fetch it."),
            AssistantMessage(
                content=[ToolCall(id="t1", name="fetch", arguments={})],
                api=API,
                provider="amazon-bedrock",
                model=CLAUDE.id,
            ),
            ToolResultMessage(
                tool_call_id="t1",
                tool_name="fetch",
                content=[FileContent(data=PDF, mime_type="application/pdf", name="a.pdf")],
            ),
        ],
        tools=[Tool(name="fetch", description="Fetch.", parameters={"type": "object"})],
    )
    (payload,), _, _ = run(context)
    result = payload["messages"][2]["content"][0]["toolResult"]
    assert result["content"] == [
        {"document": {"format": "pdf", "name": "a", "source": {"bytes": PDF}}}
    ]


@pytest.mark.parametrize(
    ("file", "words"),
    [
        (FileContent(url="https://example.com/a.pdf", mime_type="application/pdf"), "s3://"),
        (FileContent(file_id="file-123", mime_type="application/pdf"), "file id"),
        (FileContent(data=PDF, mime_type="application/zip"), "application/zip"),
    ],
)
def test_files_converse_cannot_take_raise_at_stream_naming_the_api(
    file: FileContent, words: str
) -> None:
    with pytest.raises(ValueError, match=API) as raised:
        stream_core.stream(CLAUDE, ask(file), StreamOptions(**KEY))
    assert words in str(raised.value)


# --- citations in, and back -----------------------------------------------------------------

CITATION = {
    "title": "Q3 report",
    "sourceContent": [{"text": "Revenue rose 12%."}],
    "location": {"documentPage": {"documentIndex": 0, "start": 2, "end": 3}},
}
WEB_CITATION = {
    "title": "Example news",
    "location": {"web": {"url": "https://example.com/news", "domain": "example.com"}},
}
CITED = body(
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Revenue rose "}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "12%."}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": CITATION}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"citation": WEB_CITATION}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Markets agree."}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
)


def test_citation_deltas_become_citations_on_their_text_and_go_back() -> None:
    context = ask(FileContent(data=PDF, mime_type="application/pdf", name="q3", citations=True))
    _, message, events = run(context, CITED)
    first, second = message.content
    assert isinstance(first, TextContent) and first.text == "Revenue rose 12%."
    assert first.citations is not None
    (c,) = first.citations
    assert (c.title, c.document_index, c.cited_text, c.raw) == (
        "Q3 report",
        0,
        "Revenue rose 12%.",
        CITATION,
    )
    assert c.start is None and c.end is None  # the whole block
    assert isinstance(second, TextContent) and second.citations is not None
    assert second.citations[0].url == "https://example.com/news"
    kinds = [getattr(e, "delta", None) and e.delta.type for e in events]
    assert kinds.count("citation") == 2
    # Round trip: the same API gets `citationsContent` with the records verbatim.
    context.messages.append(message)
    context.messages.append(UserMessage(content="And Q4?"))
    (payload,), _, _ = run(context)
    sent = payload["messages"][1]["content"]
    assert sent[0] == {
        "citationsContent": {
            "content": [{"text": "Revenue rose 12%."}],
            "citations": [CITATION],
        }
    }
    assert sent[1]["citationsContent"]["citations"] == [WEB_CITATION]


def test_a_citation_of_the_wrong_shape_ends_protocol_not_an_exception() -> None:
    bad = body(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": [1]}}))
    _, message, _ = run(ask(), bad)
    assert message.stop_reason == "error" and message.error is not None
    assert message.error.kind == "protocol"
    bad = body(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": {"title": 3}}}))
    _, message, _ = run(ask(), bad)
    assert message.error is not None and message.error.kind == "protocol"


# --- unknown kinds: VendorContent, back unchanged ----------------------------------------------

UNKNOWN = body(
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Here."}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"hologram": {"frames": ["a"]}}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"hologram": {"frames": ["b"]}}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockStart", {"contentBlockIndex": 1, "start": {"audio": {"format": "mp3"}}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"audio": {"bytes": "QUJD"}}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"audio": {"bytes": "REVG"}}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
)


def test_unknown_blocks_and_deltas_are_vendor_content_sent_back_unchanged() -> None:
    context = ask()
    _, message, events = run(context, UNKNOWN)
    text, hologram, audio = message.content
    assert isinstance(text, TextContent) and text.text == "Here."
    assert hologram == VendorContent(api=API, data={"hologram": {"frames": ["a", "b"]}})
    assert audio == VendorContent(api=API, data={"audio": {"format": "mp3", "bytes": "QUJDREVG"}})
    starts = [
        e.delta.kind for e in events if getattr(e, "delta", None) and e.delta.type == "block_start"
    ]
    assert starts == ["vendor", "vendor"]
    context.messages += [message, UserMessage(content="More.")]
    (payload,), _, _ = run(context)
    assert payload["messages"][1]["content"] == [
        {"text": "Here."},
        {"hologram": {"frames": ["a", "b"]}},
        {"audio": {"format": "mp3", "bytes": "QUJDREVG"}},
    ]
    # To another API it becomes text.
    other = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().mock(return_value=httpx.Response(500))
        anyio.run(
            stream_core.complete, other, context, StreamOptions(max_retries=0, api_key="k" * 20)
        )
    sent = json.loads(route.calls[0].request.content)["messages"][1]["content"]
    assert all(b["type"] == "text" for b in sent) and "hologram" in sent[1]["text"]


# --- generated images ------------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()


def test_a_generated_image_is_a_file_and_goes_back_as_its_image_block() -> None:
    raw = base64.b64decode(PNG)
    halves = [base64.b64encode(raw[:20]).decode(), base64.b64encode(raw[20:]).decode()]
    image = body(
        ("contentBlockStart", {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}),
        *(
            (
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"image": {"source": {"bytes": h}}}},
            )
            for h in halves
        ),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("contentBlockStart", {"contentBlockIndex": 1, "start": {"image": {"format": "png"}}}),
        (
            "contentBlockDelta",
            {"contentBlockIndex": 1, "delta": {"image": {"error": {"message": "blocked"}}}},
        ),
        ("contentBlockStop", {"contentBlockIndex": 1}),
    )
    context = ask()
    _, message, _ = run(context, image, model=NOVA)
    made, failed = message.content
    assert made == FileContent(data=PNG, mime_type="image/png")
    assert failed == VendorContent(
        api=API, data={"image": {"format": "png", "error": {"message": "blocked"}}}
    )
    context.messages += [message, UserMessage(content="Again.")]
    (payload,), _, _ = run(context, model=NOVA)
    assert payload["messages"][1]["content"][0] == {
        "image": {"format": "png", "source": {"bytes": PNG}}
    }


def test_an_assistant_pdf_cannot_go_to_converse() -> None:
    context = ask()
    context.messages += [
        AssistantMessage(
            content=[FileContent(data=PDF, mime_type="application/pdf")],
            api=API,
            provider="amazon-bedrock",
            model=CLAUDE.id,
        ),
        UserMessage(content="?"),
    ]
    with pytest.raises(ValueError, match=f"{API} takes no FileContent"):
        stream_core.stream(CLAUDE, context, StreamOptions(**KEY))


# --- Nova's server tools --------------------------------------------------------------------


def recording(name: str) -> bytes:
    return (FIXTURES / f"{name}.body").read_bytes()


def test_nova_code_interpreter_blocks_are_typed_and_go_back_verbatim() -> None:
    context = ask()
    content = recording("pydantic-ai__test_bedrock_model_code_execution_tool_stream.0")
    _, message, events = run(context, content, model=NOVA)
    call, result, tool = message.content
    assert isinstance(call, ServerToolCall)
    assert (call.id, call.name, call.kind) == (
        "tooluse_VQNZJRUFMoqZzszVsRd4og",
        "nova_code_interpreter",
        "code_execution",
    )
    assert call.input == {"snippet": "1234 * 5678"}
    assert isinstance(result, ServerToolResult)
    assert (result.call_id, result.kind, result.text, result.exit_code, result.is_error) == (
        call.id,
        "code_execution",
        "7006652",
        0,
        False,
    )
    assert isinstance(tool, ToolCall) and tool.name == "final_result"
    assert message.stop_reason == "tool_use"
    kinds = [
        e.delta.kind for e in events if getattr(e, "delta", None) and e.delta.type == "block_start"
    ]
    assert kinds == ["server_tool_call", "server_tool_result"]
    # Back to Converse: the vendor's blocks verbatim; no toolSpec made up for the server tool.
    context.messages += [
        message,
        ToolResultMessage(tool_call_id=tool.id, tool_name=tool.name, content="done"),
    ]
    (payload,), _, _ = run(context, model=NOVA)
    sent = payload["messages"][1]["content"]
    assert sent[0] == {
        "toolUse": {
            "name": "nova_code_interpreter",
            "toolUseId": "tooluse_VQNZJRUFMoqZzszVsRd4og",
            "type": "server_tool_use",
            "input": {"snippet": "1234 * 5678"},
        }
    }
    assert sent[1] == {
        "toolResult": {
            "status": "success",
            "toolUseId": "tooluse_VQNZJRUFMoqZzszVsRd4og",
            "type": "nova_code_interpreter_result",
            "content": [
                {"json": {"stdOut": "7006652", "stdErr": "", "exitCode": 0, "isError": False}}
            ],
        }
    }
    names = [t["toolSpec"]["name"] for t in payload["toolConfig"]["tools"]]
    assert names == ["final_result"]


def test_server_tool_usage_is_counted_by_kind() -> None:
    usage = {
        "inputTokens": 3,
        "outputTokens": 1,
        "totalTokens": 4,
        "serverToolUsage": {"nova_grounding": 2, "odd": "x"},
    }
    content = b"".join(
        [
            frame("messageStart", {"role": "assistant"}),
            frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}),
            frame("messageStop", {"stopReason": "end_turn"}),
            frame("metadata", {"usage": usage}),
        ]
    )
    _, message, _ = run(ask(), content, model=NOVA)
    assert message.usage.server_tools == {"web_search": 2}


def test_web_search_and_code_execution_are_nova_system_tools() -> None:
    tools = [
        ServerTool(kind="web_search"),
        ServerTool(kind="code_execution"),
        Tool(name="lookup", description="Look up.", parameters={"type": "object"}),
    ]
    (payload,), _, _ = run(Context(messages=[UserMessage(content="hi")], tools=tools), model=NOVA)
    assert payload["toolConfig"]["tools"][1:] == [
        {"systemTool": {"name": "nova_grounding"}},
        {"systemTool": {"name": "nova_code_interpreter"}},
    ]
    native = ServerTool.native(API, {"systemTool": {"name": "nova_future_tool"}})
    (payload,), _, _ = run(
        Context(messages=[UserMessage(content="hi")], tools=[native]), model=NOVA
    )
    assert payload["toolConfig"]["tools"] == [{"systemTool": {"name": "nova_future_tool"}}]


@pytest.mark.parametrize(
    ("tool", "model", "words"),
    [
        (ServerTool(kind="web_fetch"), NOVA, "runs no 'web_fetch'"),
        (ServerTool(kind="image_generation"), NOVA, "runs no 'image_generation'"),
        (ServerTool(kind="web_search"), CLAUDE, "only Nova models"),
        (ServerTool(kind="web_search", max_uses=3), NOVA, "max_uses"),
    ],
)
def test_server_tools_converse_lacks_raise_at_stream_naming_the_api(
    tool: ServerTool, model: Model, words: str
) -> None:
    context = Context(messages=[UserMessage(content="hi")], tools=[tool])
    with pytest.raises(ValueError, match=API) as raised:
        stream_core.stream(model, context, StreamOptions(**KEY))
    assert words in str(raised.value)


def test_the_non_streamed_answer_keeps_citations_and_server_blocks() -> None:
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "toolUse": {
                            "toolUseId": "s1",
                            "name": "nova_grounding",
                            "type": "server_tool_use",
                            "input": {"query": "q"},
                        }
                    },
                    {
                        "citationsContent": {
                            "content": [{"text": "Cited."}],
                            "citations": [WEB_CITATION],
                        }
                    },
                    {"hologram": {"frames": []}},
                ],
            }
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12},
    }
    response = httpx.Response(200, headers={"content-type": "application/json"}, json=answer)

    async def main() -> AssistantMessage:
        return await stream_core.complete(NOVA, ask(), StreamOptions(max_retries=0, **KEY))

    with respx.mock(assert_all_mocked=True) as mock:
        mock.route().mock(return_value=response)
        message = anyio.run(main)
    call, text, vendor = message.content
    assert isinstance(call, ServerToolCall) and call.kind == "web_search"
    assert call.input == {"query": "q"}
    assert isinstance(text, TextContent) and text.text == "Cited."
    assert text.citations is not None and text.citations[0].raw == WEB_CITATION
    assert vendor == VendorContent(api=API, data={"hologram": {"frames": []}})


# --- every recording: no vendor block dropped -------------------------------------------------


def streamed_recordings() -> list[str]:
    """The event-stream recordings made without call options (those replay in the kit)."""
    names = []
    for path in sorted(FIXTURES.glob("*.json")):
        meta = json.loads(path.read_text())
        if "eventstream" in meta["headers"].get("content-type", "") and "call" not in meta:
            names.append(path.stem)
    return names


@pytest.mark.parametrize("name", streamed_recordings())
def test_every_recorded_block_is_kept(name: str) -> None:
    content = recording(name)
    expect = json.loads((FIXTURES / f"{name}.json").read_text())
    indices: set[int] = set()
    for f in stream_core.provider.EventStreamDecoder().decode(content):
        if f.event.startswith("contentBlock") and f.event != "contentBlockStop":
            indices.add(json.loads(f.data)["contentBlockIndex"])
    _, message, _ = run(ask(), content, model=NOVA)
    assert message.stop_reason == expect["expect"]["stop_reason"]
    assert len(message.content) >= len(indices)


# --- vendor_bytes ------------------------------------------------------------------------------


def test_vendor_bytes_says_citations_server_blocks_images_and_vendor_blocks() -> None:
    from stream_core import ApprovalRequest, Citation, Usage
    from stream_core.testing import vendor_bytes
    from stream_core.testing._faux_tools import faux_content

    call = ServerToolCall(
        id="tooluse_1", name="nova_grounding", kind="web_search", input={"query": "q"}
    )
    result = ServerToolResult(
        call_id="tooluse_1", name="nova_grounding", kind="web_search", text="found"
    )
    cited = TextContent(text="Cited.", citations=[Citation(title="T", url="https://e.com/a")])
    image = FileContent(data=PNG, mime_type="image/png")
    vendor = VendorContent(api=API, data={"hologram": {"frames": ["x"]}})
    usage = Usage(server_tools={"web_search": 2})
    turn = faux_content([call, result, cited, image, vendor], usage=usage)
    _, message, _ = run(ask(), vendor_bytes(turn, API).body, model=NOVA)
    got_call, got_result, got_text, got_image, got_vendor = message.content
    assert isinstance(got_call, ServerToolCall) and got_call.input == {"query": "q"}
    assert (got_call.id, got_call.name, got_call.kind) == (call.id, call.name, call.kind)
    assert isinstance(got_result, ServerToolResult) and got_result.text == "found"
    assert isinstance(got_text, TextContent) and got_text.citations is not None
    assert got_text.citations[0].url == "https://e.com/a"
    assert got_image == image and got_vendor == vendor
    assert message.usage.server_tools == {"web_search": 2}
    for unsaid, words in [
        (ApprovalRequest(id="a", name="n"), "ApprovalRequest"),
        (ServerToolCall(id="s", name="web_fetch", kind="web_fetch"), "'web_fetch'"),
        (FileContent(data=PDF, mime_type="application/pdf"), "FileContent"),
        (VendorContent(api="openai-responses", data={"type": "x"}), "openai-responses"),
    ]:
        with pytest.raises(ValueError, match="vendor_bytes") as raised:
            vendor_bytes(faux_content([unsaid]), API)
        assert words in str(raised.value)
    with pytest.raises(ValueError, match="container"):
        vendor_bytes(faux_content([TextContent(text="x")], container={"id": "c"}), API)
