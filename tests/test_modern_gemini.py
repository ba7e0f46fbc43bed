"""Gemini's server tools, grounding, files and every thought signature, from the user's
side: the recordings replayed through the provider against their MODERN `expect` fields,
the next request built from the history, a handoff to Anthropic, and the requests that ask
for built-in tools and send files."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ServerTool,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
    Tool,
    UserMessage,
    VendorContent,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Fixture,
    Run,
    contract_model,
    load_fixtures,
    replay,
    run_provider,
    sse_response,
    text_case,
    whole,
)
from stream_core.testing import faux_content, faux_web_search, vendor_bytes

API = "google-generative-ai"
FIXTURES = {f.name: f for f in load_fixtures(API)}
FILE_SEARCH = "pydantic-ai__test_google_model_file_search_grounding_gemini_3-True.3"
WEB_SEARCH = "pydantic-ai__test_google_model_web_search_tool_stream.0"
CODE = "pydantic-ai__test_code_execution_stream.0"
MODERN = ("server_tools", "grounding", "reasoning_opaque", "server_tool_usage")
OK = b'data: {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}\n\n'


def _replay(name: str) -> Run:
    run = replay(FIXTURES[name], whole(FIXTURES[name].body))
    assert_valid_event_stream(run.events)
    return run


def _blocks(message: AssistantMessage, cls: type[Any]) -> list[Any]:
    return [b for b in message.content if isinstance(b, cls)]


def _next_request(message: AssistantMessage, api: str = API) -> dict[str, Any]:
    """The payload of the request that follows `message` in the history."""
    context = Context(
        messages=[UserMessage(content="Question?"), message, UserMessage(content="And then?")]
    )
    body = OK if api == API else text_case(api).body

    async def main() -> Run:
        return await run_provider(api, [sse_response([body])], context=context)

    run = anyio.run(main)
    return json.loads(run.requests[0].content)  # type: ignore[no-any-return]


# --- every recording's MODERN expect -----------------------------------------------------


MODERN_CASES = [f for f in FIXTURES.values() if any(k in f.expect for k in MODERN)]


def test_the_modern_recordings_are_here() -> None:
    assert FILE_SEARCH in {f.name for f in MODERN_CASES}


@pytest.mark.parametrize("fixture", MODERN_CASES, ids=lambda f: f.name)
def test_modern_expect_fields(fixture: Fixture) -> None:
    run = _replay(fixture.name)
    message, expect = run.message, fixture.expect
    calls = {b.id: b for b in _blocks(message, ServerToolCall)}
    results = {b.call_id: b for b in _blocks(message, ServerToolResult)}
    for tool in expect.get("server_tools", []):
        call = calls[tool["id"]]
        assert call.raw is not None and call.raw[tool["vendor_type"]] == tool["call"]
        assert call.name == tool["tool_type"].lower()
        result = results[tool["id"]]
        assert result.raw is not None
        assert result.raw[tool["result"]["vendor_type"]] == tool["result"]["value"]
    grounding = expect.get("grounding")
    if grounding:
        cited = [
            (b.text, c)
            for b in _blocks(message, TextContent)
            for c in b.citations or []
            if c.raw is not None
        ]
        for support in grounding["supports"]:
            spans = [(t[c.start : c.end], c) for t, c in cited if c.cited_text == support["text"]]
            assert spans, support
            for span, c in spans:
                assert span == support["text"]
                assert c.raw is not None and c.raw["support"]["segment"]["text"] == span
        kept = [
            b for b in _blocks(message, ServerToolResult) if b.raw and "groundingMetadata" in b.raw
        ]
        assert kept[0].raw is not None
        assert kept[0].raw["groundingMetadata"] == grounding["metadata"]
    signatures = [r["thoughtSignature"] for r in expect.get("reasoning_opaque", [])]
    if signatures:
        dumped = message.model_dump_json()
        sent = json.dumps(_next_request(message))
        for signature in signatures:
            assert signature in dumped
            assert signature in sent
    usage = expect.get("server_tool_usage", {})
    if "toolUsePromptTokenCount" in usage:
        lines = [line for line in fixture.body.splitlines() if line.startswith(b"data: ")]
        last = json.loads(lines[-1][len(b"data: ") :])
        meta = last["usageMetadata"]
        prompt = meta["promptTokenCount"] - meta.get("cachedContentTokenCount", 0)
        assert message.usage.input == prompt + usage["toolUsePromptTokenCount"]


# --- the recordings, closer ----------------------------------------------------------------


def test_file_search_parts_signatures_and_grounding() -> None:
    message = _replay(FILE_SEARCH).message
    kinds = [b.type for b in message.content]
    assert kinds == [
        "server_tool_call",
        "server_tool_result",
        "text",
        "server_tool_call",
        "server_tool_result",
    ]
    call, result, text = message.content[:3]
    assert isinstance(call, ServerToolCall) and isinstance(result, ServerToolResult)
    assert (call.kind, result.kind, result.call_id) == ("file_search", "file_search", "tju3qkc9")
    assert isinstance(text, TextContent) and text.text_signature
    assert text.citations is not None and len(text.citations) == 1
    c = text.citations[0]
    assert text.text[c.start : c.end] == "The capital of France is **Paris**."
    assert c.raw is not None and c.raw["chunk"]["retrievedContext"]["fileSearchStore"]
    derived = message.content[4]
    assert isinstance(derived, ServerToolResult) and derived.sources[0].text
    # Back to Gemini: the three signed parts as they came, the derived pair left out.
    contents = _next_request(message)["contents"]
    model_turn = contents[1]
    assert model_turn["role"] == "model"
    assert [next(iter(p.keys() - {"thoughtSignature"})) for p in model_turn["parts"]] == [
        "toolCall",
        "toolResponse",
        "text",
    ]
    assert all("thoughtSignature" in p for p in model_turn["parts"])
    assert model_turn["parts"][0] == call.raw


def test_web_search_grounding_citations_queries_and_entry_point() -> None:
    message = _replay(WEB_SEARCH).message
    (text,) = _blocks(message, TextContent)
    assert text.citations is not None and len(text.citations) == 9  # 8 supports, one with 2
    for c in text.citations:
        assert c.raw is not None
        assert text.text[c.start : c.end] == c.cited_text == c.raw["support"]["segment"]["text"]
        assert c.title and c.url
    (call,) = _blocks(message, ServerToolCall)
    assert (call.kind, call.name) == ("web_search", "google_search")
    assert call.input == {"queries": ["weather in San Francisco today"]}
    (result,) = _blocks(message, ServerToolResult)
    assert [s.title for s in result.sources][:2] == [
        "Weather information for San Francisco, CA, US",
        "timeanddate.com",
    ]
    assert result.raw is not None
    assert result.raw["groundingMetadata"]["searchEntryPoint"]["renderedContent"]
    assert message.usage.server_tools == {"web_search": 1}
    # The grounding is response metadata: not sent back (Gemini has no field for it).
    parts = _next_request(message)["contents"][1]["parts"]
    assert parts == [{"text": text.text}]


def test_code_execution_call_result_and_signatures_go_back() -> None:
    message = _replay(CODE).message
    (call,) = _blocks(message, ServerToolCall)
    (result,) = _blocks(message, ServerToolResult)
    assert call.id == result.call_id == "8xju7mua"
    assert call.kind == result.kind == "code_execution"
    assert call.input == {
        "language": "PYTHON",
        "code": "result = 65465 - 6544 * 65464 - 6 + 1.02255\nprint(result)",
    }
    assert result.text == "-428330955.97745\n" and not result.is_error
    parts = _next_request(message)["contents"][1]["parts"]
    assert parts[0] == call.raw and "thoughtSignature" in parts[0]
    assert parts[1] == result.raw
    assert parts[-1]["thoughtSignature"]


def test_handoff_to_anthropic_keeps_sources_as_text() -> None:
    for name, needle in ((WEB_SEARCH, "timeanddate.com"), (FILE_SEARCH, "Paris is the capital")):
        message = _replay(name).message
        sent = json.dumps(_next_request(message, "anthropic-messages"), ensure_ascii=False)
        assert needle in sent
        assert "thoughtSignature" not in sent and "groundingMetadata" not in sent


# --- parts the recordings do not show --------------------------------------------------------


def _chunk(*parts: dict[str, Any], finish: str | None = None, **candidate: Any) -> bytes:
    body: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, **candidate}
    if finish:
        body["finishReason"] = finish
    return f"data: {json.dumps({'candidates': [body], 'responseId': 'r1'})}\n\n".encode()


def _run(*chunks: bytes) -> AssistantMessage:
    async def main() -> Run:
        return await run_provider(API, [sse_response([b"".join(chunks)])])

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run.message


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def test_generated_image_unknown_part_and_stray_signature_are_kept_and_sent_back() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": PNG}, "thoughtSignature": "aW1n"}
    unknown = {"somethingNew": {"x": 1}}
    message = _run(
        _chunk({"text": "Here:"}),
        _chunk(image),
        _chunk(unknown),
        _chunk({"text": "", "thoughtSignature": "c3RyYXk="}, finish="STOP"),
    )
    assert [b.type for b in message.content] == ["text", "file", "vendor", "vendor", "vendor"]
    file = message.content[1]
    assert isinstance(file, FileContent) and (file.data, file.mime_type) == (PNG, "image/png")
    assert message.content[3] == VendorContent(api=API, data=unknown)
    parts = _next_request(message)["contents"][1]["parts"]
    assert parts == [
        {"text": "Here:"},
        image,
        unknown,
        {"text": "", "thoughtSignature": "c3RyYXk="},
    ]


def test_tool_parts_without_ids_get_stable_ids_and_a_failed_run_is_an_error() -> None:
    message = _run(
        _chunk({"toolCall": {"toolType": "URL_CONTEXT", "args": {"url": "https://x.test"}}}),
        _chunk({"toolResponse": {"toolType": "URL_CONTEXT", "response": {"ok": True}}}),
        _chunk({"executableCode": {"language": "PYTHON", "code": "1/0"}}),
        _chunk({"codeExecutionResult": {"outcome": "OUTCOME_FAILED", "output": "ZeroDivision"}}),
        _chunk({"text": "Failed."}, finish="STOP"),
    )
    call, result, code, ran = message.content[:4]
    assert isinstance(call, ServerToolCall) and isinstance(result, ServerToolResult)
    assert (call.id, call.kind, call.input) == ("r1-0", "web_fetch", {"url": "https://x.test"})
    assert result.call_id == "r1-0" and result.text == '{"ok": true}'
    assert isinstance(code, ServerToolCall) and isinstance(ran, ServerToolResult)
    assert code.id == ran.call_id == "r1-2" and ran.is_error and ran.text == "ZeroDivision"


def test_url_context_metadata_is_a_web_fetch_pair() -> None:
    meta = {
        "urlMetadata": [
            {
                "retrievedUrl": "https://a.test",
                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
            },
            {"retrievedUrl": "https://b.test", "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR"},
        ]
    }
    message = _run(_chunk({"text": "Read."}, finish="STOP", urlContextMetadata=meta))
    _, call, result = message.content
    assert isinstance(call, ServerToolCall) and isinstance(result, ServerToolResult)
    assert call.kind == result.kind == "web_fetch"
    assert call.input == {"urls": ["https://a.test", "https://b.test"]}
    assert [s.url for s in result.sources] == ["https://a.test", "https://b.test"]
    assert not result.is_error and "URL_RETRIEVAL_STATUS_ERROR" in result.text
    assert result.raw == {"urlContextMetadata": meta}


def test_grounding_spans_are_byte_offsets_across_parts() -> None:
    first, second = "Héllo wörld. ", "Zwei Sätze."
    start = len(first.encode()) + len(b"Zwei ")
    support = {
        "segment": {
            "startIndex": start,
            "endIndex": start + len("Sätze".encode()),
            "text": "Sätze",
        },
        "groundingChunkIndices": [0],
    }
    grounding = {
        "groundingChunks": [{"web": {"uri": "https://s.test", "title": "s"}}],
        "groundingSupports": [support],
    }
    message = _run(
        _chunk({"text": first}),
        _chunk({"executableCode": {"code": "", "id": "c"}}),
        _chunk({"text": second}, finish="STOP", groundingMetadata=grounding),
    )
    cited = message.content[2]
    assert isinstance(cited, TextContent) and cited.citations is not None
    c = cited.citations[0]
    assert cited.text[c.start : c.end] == "Sätze" and (c.url, c.title) == ("https://s.test", "s")


@pytest.mark.parametrize(
    "metadata",
    [
        {"groundingMetadata": {"groundingSupports": "x", "groundingChunks": 3}},
        {"groundingMetadata": {"groundingSupports": [{"segment": {"endIndex": "9"}}, 5, None]}},
        {"groundingMetadata": {"groundingSupports": [{"segment": {"endIndex": 99, "text": 1}}]}},
        {"urlContextMetadata": {"urlMetadata": [None, {"retrievedUrl": 5}]}},
    ],
)
def test_malformed_metadata_leaves_a_valid_message(metadata: dict[str, Any]) -> None:
    message = _run(_chunk({"text": "Hi."}, finish="STOP", **metadata))
    first = message.content[0]
    assert message.stop_reason == "stop" and isinstance(first, TextContent)
    assert first.text == "Hi."


def test_another_models_signatures_are_not_sent() -> None:
    message = _replay(FILE_SEARCH).message.model_copy(update={"model": "gemini-other"})
    sent = json.dumps(_next_request(message))
    assert "thoughtSignature" not in sent and '"toolCall"' in sent


# --- asking for server tools, sending files ---------------------------------------------------


def _payload(context: Context) -> dict[str, Any]:
    async def main() -> Run:
        return await run_provider(API, [sse_response([OK])], context=context)

    return json.loads(anyio.run(main).requests[0].content)  # type: ignore[no-any-return]


def _asking(*tools: Any) -> Context:
    return Context(messages=[UserMessage(content="Go")], tools=list(tools))


def test_server_tools_become_gemini_tools_beside_functions() -> None:
    store = {"file_search_store_names": ["fileSearchStores/s1"]}
    payload = _payload(
        _asking(
            Tool(name="f", description="F.", parameters={"type": "object", "properties": {}}),
            ServerTool(kind="web_search"),
            ServerTool(kind="web_fetch"),
            ServerTool(kind="code_execution"),
            ServerTool(kind="file_search", options=store),
            ServerTool.native(API, {"google_maps": {}}),
        )
    )
    assert payload["tools"][1:] == [
        {"google_search": {}},
        {"url_context": {}},
        {"code_execution": {}},
        {"file_search": store},
        {"google_maps": {}},
    ]
    assert payload["tools"][0]["functionDeclarations"][0]["name"] == "f"
    only = _payload(_asking(ServerTool(kind="web_search")))
    assert only["tools"] == [{"google_search": {}}] and "toolConfig" not in only


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        (ServerTool(kind="image_generation"), "runs no 'image_generation'"),
        (ServerTool(kind="file_search"), "file_search_store_names"),
        (ServerTool(kind="web_search", allowed_domains=["a.test"]), "allowed_domains"),
        (ServerTool.native("anthropic-messages", {"type": "x"}), "cannot go to"),
    ],
)
def test_server_tools_gemini_cannot_take_raise_at_stream(tool: ServerTool, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        _payload(_asking(tool))


def test_files_go_inline_or_by_uri_and_other_types_raise() -> None:
    pdf = base64.b64encode(b"%PDF-1.7").decode()
    uri = "https://generativelanguage.googleapis.com/v1beta/files/abc"
    payload = _payload(
        Context(
            messages=[
                UserMessage(
                    content=[
                        TextContent(text="Read these."),
                        FileContent(data=pdf, mime_type="application/pdf", name="a.pdf"),
                        FileContent(file_id=uri, mime_type="application/pdf"),
                    ]
                )
            ]
        )
    )
    assert payload["contents"][0]["parts"][1:] == [
        {"inlineData": {"mimeType": "application/pdf", "data": pdf}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": uri}},
    ]
    with pytest.raises(ValueError, match="google-generative-ai cannot take a FileContent"):
        _payload(
            Context(
                messages=[UserMessage(content=[FileContent(data=pdf, mime_type="application/zip")])]
            )
        )


def test_citations_are_not_sent_but_the_text_is() -> None:
    model = contract_model(API)
    cited = TextContent(
        text="Paris.",
        citations=[Citation(url="https://p.test", cited_text="Paris", start=0, end=5)],
    )
    message = AssistantMessage(api=API, provider=model.provider, model=model.id, content=[cited])
    assert _next_request(message)["contents"][1]["parts"] == [{"text": "Paris."}]


# --- vendor_bytes ---------------------------------------------------------------------------


def _derived_ids_dropped(message: AssistantMessage) -> list[dict[str, Any]]:
    # vendor_bytes writes no responseId, the base of the derived grounding pair's id.
    out = []
    for b in message.content:
        dumped = b.model_dump(mode="json")
        if (
            isinstance(b, ServerToolCall | ServerToolResult)
            and b.raw is None
            or (isinstance(b, ServerToolResult) and b.raw and "groundingMetadata" in b.raw)
        ):
            dumped.pop("id", None)
            dumped.pop("call_id", None)
        out.append(dumped)
    return out


def _from_bytes(body: bytes) -> AssistantMessage:
    async def main() -> Run:
        return await run_provider(API, [sse_response([body])])

    run = anyio.run(main)
    assert_valid_event_stream(run.events)
    return run.message


@pytest.mark.parametrize("name", [FILE_SEARCH, WEB_SEARCH, CODE])
def test_vendor_bytes_of_a_recorded_message_replays_to_it(name: str) -> None:
    message = _replay(name).message
    again = _from_bytes(vendor_bytes(message, API).body)
    assert _derived_ids_dropped(again) == _derived_ids_dropped(message)
    assert again.usage.server_tools == message.usage.server_tools


def test_vendor_bytes_writes_a_web_search_in_geminis_own_shape() -> None:
    """Gemini says a search as grounding metadata after the text: a generic script (call,
    result, then whole-block citations) is refused naming the API, and a turn in Gemini's
    shape (span citations, then the grounding pair) replays to exactly what was scripted."""
    with pytest.raises(ValueError, match=API):
        vendor_bytes(faux_web_search("paris weather", ["https://a.test"], "Sunny."), API)
    text = TextContent(
        text="Sunny.", citations=[Citation(url="https://a.test", title="A", start=0, end=6)]
    )
    call = ServerToolCall(
        id="gemini-grounding",
        name="google_search",
        kind="web_search",
        input={"queries": ["paris weather"]},
    )
    result = ServerToolResult(
        call_id="gemini-grounding",
        name="google_search",
        kind="web_search",
        sources=[Source(url="https://a.test", title="A")],
    )
    message = _from_bytes(vendor_bytes(faux_content([text, call, result]), API).body)

    def shown(block: Any) -> dict[str, Any]:
        out: dict[str, Any] = block.model_dump(exclude={"raw"})
        for c in out.get("citations") or ():
            c.pop("raw", None)  # the vendor's support record, kept beside our reading
        return out

    assert [shown(b) for b in message.content] == [shown(b) for b in (text, call, result)]
    assert message.usage.server_tools == {"web_search": 1}


def test_grounding_on_a_candidate_without_index_or_finish_is_read() -> None:
    grounding = {"webSearchQueries": ["q"]}
    message = _run(
        b'data: {"candidates": [{"content": {"parts": [{"text": "A."}]}, '
        b'"groundingMetadata": ' + json.dumps(grounding).encode() + b"}]}\n\n",
        _chunk(finish="STOP"),
    )
    assert message.usage.server_tools == {"web_search": 1}
