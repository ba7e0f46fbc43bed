"""Chat Completions servers, Mistral and Ollama keep what the vendor sends beyond text and
calls (issue 35): Perplexity's sources and OpenAI / OpenRouter `url_citation` annotations
as citations on the text, generated images as files, Groq's server-run search as server
tool blocks, any other delta field as VendorContent; PDFs go out as each API documents
them; what an API cannot take raises at `stream()`, naming it."""

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
    Citation,
    CitationAdded,
    Context,
    FileContent,
    Model,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.contract_tests.kit import Fixture, replay, whole

FIXTURES = Path(__file__).parent.parent / "contract_tests" / "fixtures"
OPENAI = stream_core.get_model("openai", "gpt-4o")
MISTRAL = stream_core.get_model("mistral", "mistral-large-latest")
OLLAMA = stream_core.get_model("ollama", "llama3.2")
OPTIONS = {"api_key": "sk-test-0123456789abcdef", "max_retries": 0}
PDF = base64.b64encode(b"%PDF-1.7 not really a pdf").decode()
ASK = Context(messages=[UserMessage(content="What is new?")])


def sse(*chunks: dict[str, Any]) -> bytes:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    out = b""
    for delta in chunks:
        if "choices" in delta or "usage" in delta:
            payload = {**base, **delta}
        else:
            payload = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        out += b"data: " + json.dumps(payload).encode() + b"\n\n"
    end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return out + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


OK = sse({"role": "assistant", "content": "ok"})


def run(
    context: Context, content: bytes = OK, *, model: Model = OPENAI
) -> tuple[list[dict[str, Any]], AssistantMessage, list[Any]]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)
    events: list[Any] = []

    async def main() -> AssistantMessage:
        s = stream_core.stream(model, context, StreamOptions(**OPTIONS))
        async for event in s:
            events.append(event)
        return await s.result()

    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().mock(return_value=response)
        message = anyio.run(main)
    return [json.loads(c.request.content) for c in route.calls], message, events


def recording(api: str, name: str) -> tuple[AssistantMessage, dict[str, Any]]:
    body = (FIXTURES / api / f"{name}.body").read_bytes()
    meta = json.loads((FIXTURES / api / f"{name}.json").read_text())
    run_ = replay(Fixture(api, name, body, meta), whole(body))
    return run_.message, meta


# --- citations in ---------------------------------------------------------------------------


def chat_recordings_with_citations() -> list[str]:
    names = []
    for path in sorted((FIXTURES / "openai-completions").glob("*.json")):
        if "citations" in json.loads(path.read_text()).get("expect", {}):
            names.append(path.stem)
    return names


@pytest.mark.parametrize("name", chat_recordings_with_citations())
def test_every_marked_source_is_a_citation_on_the_text_holding_its_marker(name: str) -> None:
    message, meta = recording("openai-completions", name)
    assert message.error is None
    texts = [b for b in message.content if isinstance(b, TextContent)]
    for want in meta["expect"]["citations"]:
        marker, url = want["marker"], want["url"]
        holding = [t for t in texts if marker in t.text]
        cited = [c for t in texts for c in t.citations or () if c.url == url]
        assert cited, f"{url} is not cited"
        for t in holding:
            spans = [(c.start, c.end) for c in t.citations or () if c.url == url]
            at = t.text.index(marker)
            assert (at, at + len(marker)) in spans, (marker, spans)
            assert all(
                c.raw == {"marker": marker, "url": url} for c in t.citations or () if c.url == url
            )
        if not holding:  # a source the answer never marked is kept on the text, unspanned
            assert all(c.start is None and c.end is None for c in cited)


def test_perplexity_sources_repeated_on_every_chunk_are_cited_once() -> None:
    message, _ = recording("openai-completions", "vercel-ai__perplexity-text")
    (text,) = message.content
    assert isinstance(text, TextContent) and text.text == "**EcoVista Day**[1][5]"
    urls = [c.url for c in text.citations or ()]
    assert len(urls) == len(set(urls)) == 5
    assert [c.start for c in text.citations or () if c.start is not None] == [16, 19]


def test_search_results_give_the_titles_and_num_search_queries_the_count() -> None:
    results = [
        {"title": "Report", "url": "https://a.example/r", "date": "2026-01-02"},
        {"title": "Other", "url": "https://b.example/o", "date": None},
    ]
    top = {"citations": [r["url"] for r in results], "search_results": results}
    body = sse(
        {"choices": [{"index": 0, "delta": {"content": "Growth was 3%[1]."}}], **top},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6, "num_search_queries": 2},
            "related_questions": ["Why?"],
            **top,
        },
    )
    _, message, events = run(ASK, body)
    text = message.content[0]
    assert isinstance(text, TextContent)
    first, second = text.citations or ()
    assert (first.url, first.title, first.start, first.end) == (
        "https://a.example/r",
        "Report",
        13,
        16,
    )
    assert first.raw == results[0]
    assert (second.title, second.start) == ("Other", None)
    assert message.usage.server_tools == {"web_search": 2}
    assert VendorContent(api="openai-completions", data={"related_questions": ["Why?"]}) in (
        message.content
    )
    assert sum(isinstance(getattr(e, "delta", None), CitationAdded) for e in events) == 2


ANNOTATION = {
    "type": "url_citation",
    "url_citation": {
        "url": "https://meteo.example/paris",
        "title": "Paris forecast",
        "start_index": 17,
        "end_index": 31,
    },
}


def test_url_citation_annotations_are_citations_with_their_span() -> None:
    body = sse(
        {"role": "assistant", "content": "It is sunny. See "},
        {"content": "Paris forecast."},
        {"annotations": [ANNOTATION]},
    )
    _, message, events = run(ASK, body)
    (text,) = message.content
    assert isinstance(text, TextContent)
    assert text.citations == [
        Citation(
            url="https://meteo.example/paris",
            title="Paris forecast",
            start=17,
            end=31,
            raw=ANNOTATION,
        )
    ]
    assert text.text[17:31] == "Paris forecast"
    added = [e.delta for e in events if isinstance(getattr(e, "delta", None), CitationAdded)]
    assert [a.content_index for a in added] == [0]


def test_openrouter_annotations_before_the_text_and_a_whole_answer() -> None:
    message, _ = recording(
        "openai-completions", "pydantic-ai__test_openrouter_web_search_annotations_stream.0"
    )
    (text,) = message.content
    assert isinstance(text, TextContent) and text.text.startswith("The URL")
    assert len(text.citations or ()) == 5
    assert all(c.start is None for c in text.citations or ())  # OpenRouter sends 0, 0

    answer = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "gpt-4o-search-preview",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "It is sunny. See Paris forecast.",
                    "annotations": [ANNOTATION],
                    "audio": None,
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    response = httpx.Response(200, json=answer)

    async def main() -> AssistantMessage:
        return await stream_core.stream(OPENAI, ASK, StreamOptions(**OPTIONS)).result()

    with respx.mock(assert_all_mocked=True) as mock:
        mock.route().mock(return_value=response)
        whole_message = anyio.run(main)
    (text,) = whole_message.content
    assert isinstance(text, TextContent) and (text.citations or [])[0].start == 17


# --- other things a delta carries ---------------------------------------------------------------


def test_generated_images_and_unknown_fields_are_kept() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    body = sse(
        {"role": "assistant", "content": "Here it is."},
        {"images": [image]},
        {"audio": {"id": "audio_1", "transcript": "Here"}},
        {"audio": {"transcript": " it is."}},
    )
    _, message, _ = run(ASK, body)
    text, file, vendor = message.content
    assert isinstance(text, TextContent) and text.text == "Here it is."
    assert file == FileContent(data=png, mime_type="image/png")
    assert vendor == VendorContent(
        api="openai-completions", data={"audio": {"id": "audio_1", "transcript": " it is."}}
    )


def test_groq_executed_tools_are_a_server_call_and_its_result() -> None:
    message, _ = recording(
        "openai-completions", "pydantic-ai__test_groq_model_web_search_tool_stream.0"
    )
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "server_tool_call", "server_tool_result", "text"]
    call, result = message.content[1], message.content[2]
    assert isinstance(call, ServerToolCall) and isinstance(result, ServerToolResult)
    assert (call.name, call.kind) == ("search", "web_search")
    assert call.input == {"query": "What is the weather in San Francisco today?"}
    assert result.call_id == call.id and result.text.startswith("Title: Weather in San Francisco")
    assert result.raw is not None and result.raw["index"] == 0


# --- Mistral references ---------------------------------------------------------------------------


def test_mistral_reference_chunks_are_citations_and_go_back_as_chunks() -> None:
    body = sse(
        {"role": "assistant", "content": [{"type": "text", "text": "Hidankyo won"}]},
        {"content": [{"type": "reference", "reference_ids": [0, 2]}]},
        {"content": [{"type": "text", "text": " in 2024."}]},
        {"content": [{"type": "reference", "reference_ids": [1]}]},
    )
    _, message, _ = run(ASK, body, model=MISTRAL)
    (text,) = message.content
    assert isinstance(text, TextContent) and text.text == "Hidankyo won in 2024."
    spans = [(c.document_index, c.start, c.end) for c in text.citations or ()]
    assert spans == [(0, 0, 12), (2, 0, 12), (1, 12, 21)]

    again = Context(messages=[*ASK.messages, message, UserMessage(content="Thanks")])
    payloads, _, _ = run(again, model=MISTRAL)
    assert payloads[0]["messages"][1]["content"] == [
        {"type": "text", "text": "Hidankyo won"},
        {"type": "reference", "reference_ids": [0, 2]},
        {"type": "text", "text": " in 2024."},
        {"type": "reference", "reference_ids": [1]},
    ]


# --- the request side ----------------------------------------------------------------------


def ask_with(*blocks: Any) -> Context:
    return Context(messages=[UserMessage(content=[TextContent(text="Read this."), *blocks])])


def test_a_pdf_goes_to_chat_completions_as_a_file_part() -> None:
    context = ask_with(
        FileContent(data=PDF, mime_type="application/pdf", name="q3.pdf"),
        FileContent(file_id="file-abc123", mime_type="application/pdf"),
    )
    payloads, _, _ = run(context)
    parts = payloads[0]["messages"][0]["content"]
    assert parts[1:] == [
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "q3.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-abc123"}},
    ]
    with pytest.raises(ValueError, match="openai-completions.*URL"):
        run(ask_with(FileContent(url="https://x.example/a.pdf", mime_type="application/pdf")))
    with pytest.raises(ValueError, match="openai-completions.*image/png"):
        stream_core.stream(
            OPENAI, ask_with(FileContent(data=PDF, mime_type="image/png")), StreamOptions(**OPTIONS)
        )


def test_a_pdf_in_a_tool_result_follows_in_a_user_message() -> None:
    call = AssistantMessage.model_validate(
        {
            "api": "openai-completions",
            "provider": "openai",
            "model": "gpt-4o",
            "content": [{"type": "tool_call", "id": "call_1", "name": "fetch", "arguments": {}}],
            "stop_reason": "tool_use",
        }
    )
    result = ToolResultMessage(
        tool_call_id="call_1",
        tool_name="fetch",
        content=[FileContent(data=PDF, mime_type="application/pdf", name="r.pdf")],
    )
    payloads, _, _ = run(Context(messages=[*ASK.messages, call, result]))
    tool, user = payloads[0]["messages"][2:]
    assert tool["role"] == "tool"
    assert user["role"] == "user" and user["content"][1]["type"] == "file"


def test_a_pdf_goes_to_mistral_as_a_document_url() -> None:
    context = ask_with(
        FileContent(data=PDF, mime_type="application/pdf", name="q3.pdf"),
        FileContent(url="https://arxiv.org/pdf/1805.04770", mime_type="application/pdf"),
        FileContent(file_id="0f2b-uploaded", mime_type="application/pdf"),
    )
    payloads, _, _ = run(context, model=MISTRAL)
    assert payloads[0]["messages"][0]["content"][1:] == [
        {
            "type": "document_url",
            "document_url": f"data:application/pdf;base64,{PDF}",
            "document_name": "q3.pdf",
        },
        {"type": "document_url", "document_url": "https://arxiv.org/pdf/1805.04770"},
        {"type": "file", "file_id": "0f2b-uploaded"},
    ]


def test_ollama_takes_no_file_and_says_so() -> None:
    with pytest.raises(ValueError, match="ollama-chat"):
        stream_core.stream(
            OLLAMA,
            ask_with(FileContent(data=PDF, mime_type="application/pdf")),
            StreamOptions(**OPTIONS),
        )


@pytest.mark.parametrize("model", [OPENAI, MISTRAL, OLLAMA], ids=lambda m: m.api)
def test_no_portable_server_tool_is_taken(model: Model) -> None:
    context = Context(messages=ASK.messages, tools=[ServerTool(kind="web_search")])
    with pytest.raises(ValueError, match=f"{model.api} runs no 'web_search'"):
        stream_core.stream(model, context, StreamOptions(**OPTIONS))


def test_a_native_server_tool_goes_as_it_is() -> None:
    tool = {"type": "openrouter:web_search", "max_results": 3}
    context = Context(messages=ASK.messages, tools=[ServerTool.native("openai-completions", tool)])
    payloads, _, _ = run(context)
    assert payloads[0]["tools"] == [tool]


def test_cited_text_goes_plain_to_its_own_api_and_with_sources_elsewhere() -> None:
    _, answer, _ = run(
        ASK,
        sse(
            {"role": "assistant", "content": "It is sunny. See "},
            {"content": "Paris forecast."},
            {"annotations": [ANNOTATION]},
        ),
    )
    again = Context(messages=[*ASK.messages, answer, UserMessage(content="And tomorrow?")])
    payloads, _, _ = run(again)
    assert payloads[0]["messages"][1]["content"] == "It is sunny. See Paris forecast."
    payloads, _, _ = run(again, model=MISTRAL)
    sent = payloads[0]["messages"][1]["content"]
    assert sent.startswith("It is sunny.") and "https://meteo.example/paris" in sent


# --- vendor_bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "citation"),
    [
        ("openai-completions", Citation(url="https://meteo.example/paris", start=0, end=5)),
        ("mistral-conversations", Citation(document_index=3)),
    ],
)
def test_vendor_bytes_says_citations_the_provider_reads_back(api: str, citation: Citation) -> None:
    from stream_core.contract_tests.kit import check_expect
    from stream_core.testing import faux_content, vendor_bytes

    turn = faux_content(
        [
            TextContent(text="Sunny."),
            VendorContent(api=api, data={"type": "mystery", "x": 1}),
            TextContent(text="Paris is sunny.", citations=[citation]),
        ]
    )
    synth = vendor_bytes(turn, api)
    run_ = replay(Fixture(api, "scripted", synth.body, synth.meta), whole(synth.body))
    assert run_.message.error is None
    check_expect(run_.message, synth.meta["expect"])
    (cited,) = run_.message.content[2].citations  # type: ignore[union-attr]
    assert (cited.url, cited.document_index) == (citation.url, citation.document_index)


@pytest.mark.parametrize("api", ["ollama-chat", "ollama-generate"])
def test_vendor_bytes_for_ollama_refuses_citations(api: str) -> None:
    from stream_core.testing import faux_content, vendor_bytes

    turn = faux_content([TextContent(text="x", citations=[Citation(url="https://a.example")])])
    with pytest.raises(ValueError, match=api):
        vendor_bytes(turn, api)
