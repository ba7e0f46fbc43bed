"""Review of issue 35 (writers): `vendor_bytes` never changes a scripted block silently.

For every API it writes, a turn scripted with search sources with titles, citations with
and without spans and cited text, code results with and without exit codes, and search
calls either raises a ValueError naming the API and the field the vendor's format cannot
say, or replays through the provider to the scripted blocks, field for field (the vendor
record the translator keeps in `raw` aside, where the script left `raw` unset).
"""

from __future__ import annotations

from typing import Any

import pytest

from stream_core import (
    AssistantMessage,
    Citation,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
)
from stream_core.contract_tests.kit import Fixture, replay, whole
from stream_core.testing import vendor_bytes
from stream_core.testing._synthesize import APIS


def _msg(*content: Any) -> AssistantMessage:
    return AssistantMessage(api="faux", provider="faux", model="faux", content=list(content))


def _text(text: str, *citations: Citation) -> TextContent:
    return TextContent(text=text, citations=list(citations) or None)


TEXT = "Hot in Paris. Cool in Oslo."
URL, TITLE = "https://meteo.example/paris", "Paris forecast"

SEARCH_CALL = ServerToolCall(
    id="srvtoolu_1", name="web_search", kind="web_search", input={"query": "paris weather"}
)
SEARCH_RESULT = ServerToolResult(
    call_id="srvtoolu_1",
    name="web_search",
    kind="web_search",
    sources=[Source(url=URL, title=TITLE), Source(url="https://b.example", title="B")],
)
CODE_CALL = ServerToolCall(
    id="srvtoolu_2", name="code_execution", kind="code_execution", input={"code": "print(1)"}
)


def _code_result(exit_code: int | None) -> ServerToolResult:
    return ServerToolResult(
        call_id="srvtoolu_2",
        name="code_execution",
        kind="code_execution",
        text="1\n",
        exit_code=exit_code,
    )


SCRIPTS: dict[str, AssistantMessage] = {
    "search_with_titles": _msg(SEARCH_CALL, SEARCH_RESULT, _text("Hot.")),
    "search_call_alone": _msg(SEARCH_CALL, _text("Hot.")),
    "cite_whole_block": _msg(_text(TEXT, Citation(url=URL, title=TITLE))),
    "cite_no_title": _msg(_text(TEXT, Citation(url=URL))),
    "cite_span": _msg(_text(TEXT, Citation(url=URL, title=TITLE, start=0, end=13))),
    "cite_inner_span": _msg(_text(TEXT, Citation(url=URL, title=TITLE, start=4, end=12))),
    "cite_cited_text": _msg(_text(TEXT, Citation(url=URL, title=TITLE, cited_text="It is hot"))),
    "cite_span_and_text": _msg(
        _text(TEXT, Citation(url=URL, title=TITLE, cited_text="It is hot", start=0, end=13))
    ),
    "search_then_cite": _msg(
        SEARCH_CALL, SEARCH_RESULT, _text(TEXT, Citation(url=URL, title=TITLE, start=0, end=13))
    ),
    "code_exit_0": _msg(CODE_CALL, _code_result(0), _text("Done.")),
    "code_exit_1": _msg(CODE_CALL, _code_result(1), _text("Done.")),
    "code_no_exit": _msg(CODE_CALL, _code_result(None), _text("Done.")),
    "plain_text": _msg(_text("Hello.")),
    # Gemini: a search is grounding metadata, read back as this pair after the parts
    "grounded": _msg(
        _text(
            TEXT,
            Citation(url=URL, title=TITLE, start=0, end=13),
            Citation(url="https://b.example", title="B", cited_text="Cool", start=14, end=18),
        ),
        ServerToolCall(
            id="gemini-grounding",
            name="google_search",
            kind="web_search",
            input={"queries": ["paris weather"]},
        ),
        ServerToolResult(
            call_id="gemini-grounding",
            name="google_search",
            kind="web_search",
            sources=[Source(url=URL, title=TITLE), Source(url="https://b.example", title="B")],
        ),
    ),  # fmt: skip
    "cite_document": _msg(_text(TEXT, Citation(document_index=1, start=0, end=len(TEXT)))),
    "cite_document_whole": _msg(_text(TEXT, Citation(document_index=1))),
    # Responses names a code call by its tool, `code_interpreter`
    "interpreter_exit": _msg(
        CODE_CALL.model_copy(update={"name": "code_interpreter"}),
        _code_result(0).model_copy(update={"name": "code_interpreter"}),
    ),
    "interpreter_no_exit": _msg(
        CODE_CALL.model_copy(update={"name": "code_interpreter"}),
        _code_result(None).model_copy(update={"name": "code_interpreter"}),
    ),
}


def _blocks(message: AssistantMessage, scripted: AssistantMessage) -> list[dict[str, Any]]:
    """The message's content as compared: every block of a new kind whole, text blocks by
    their text and citations; `raw` left out where the script left it unset (the vendor's
    record, which the translator keeps)."""
    out: list[dict[str, Any]] = []
    for block in message.content:
        data = block.model_dump(mode="json")
        if block.type == "text":
            data = {"type": "text", "text": data["text"], "citations": data.get("citations")}
            for c in data["citations"] or ():
                c.pop("raw", None)
        else:
            data.pop("raw", None)
        out.append(data)
    return out


def _says(name: str, api: str) -> AssistantMessage | None:
    """The scripted message replayed through `api`'s provider, or None when `vendor_bytes`
    refuses it (the refusal must name the API)."""
    script = SCRIPTS[name]
    try:
        synth = vendor_bytes(script, api)
    except ValueError as e:
        assert api in str(e), f"{api} refused {name} without naming the API: {e}"
        return None
    run = replay(Fixture(api, "s", synth.body, synth.meta), whole(synth.body))
    return run.message


@pytest.mark.parametrize("name", list(SCRIPTS))
@pytest.mark.parametrize("api", list(APIS))
def test_vendor_bytes_raises_or_replays_the_script_field_for_field(api: str, name: str) -> None:
    got = _says(name, api)
    if got is None:
        return
    assert _blocks(got, SCRIPTS[name]) == _blocks(SCRIPTS[name], SCRIPTS[name])


# --- what each API must say rather than refuse (its format has the fields) -------------------

SAID = {
    "anthropic-messages": {
        "search_with_titles", "search_call_alone", "cite_whole_block", "cite_cited_text",
        "code_exit_0", "code_exit_1", "cite_document_whole", "plain_text",
    },
    "openai-completions": {"cite_whole_block", "cite_no_title", "cite_span",
                           "cite_inner_span", "plain_text"},
    "openai-responses": {"cite_whole_block", "cite_no_title", "cite_span", "cite_inner_span",
                         "search_call_alone", "interpreter_no_exit", "plain_text"},
    "bedrock-converse-stream": {"cite_whole_block", "cite_no_title", "cite_cited_text",
                                "cite_document_whole", "plain_text"},
    "mistral-conversations": {"cite_document", "cite_document_whole", "plain_text"},
    "google-generative-ai": {"grounded", "code_no_exit", "plain_text"},
}  # fmt: skip
"""Scripts each API writes (a refusal of any of these is a regression)."""

REFUSED = {
    "openai-completions": {"cite_cited_text": "cited_text"},
    "openai-responses": {"cite_cited_text": "cited_text", 
                         "code_exit_0": "code_interpreter", "interpreter_exit": "exit_code"},
    "bedrock-converse-stream": {"cite_span": "start", "cite_span_and_text": "end"},
    "mistral-conversations": {"cite_whole_block": "document_index"},
    "anthropic-messages": {"code_no_exit": "exit_code", "cite_span": "start",
                           "cite_inner_span": "whole text blocks"},
    "google-generative-ai": {"cite_whole_block": "start", "cite_cited_text": "cited_text",
                             "code_exit_0": "exit_code", "search_call_alone": "grounding",
                             "cite_span": "grounding", "search_with_titles": "grounding"},
}  # fmt: skip
"""Scripts an API refuses, and the field the refusal names."""


@pytest.mark.parametrize(
    ("api", "name"), [(api, name) for api, names in SAID.items() for name in sorted(names)]
)
def test_vendor_bytes_says_what_the_format_can_say(api: str, name: str) -> None:
    assert _says(name, api) is not None


@pytest.mark.parametrize(
    ("api", "name", "field"),
    [(api, name, field) for api, names in REFUSED.items() for name, field in names.items()],
)
def test_vendor_bytes_refusal_names_the_api_and_field(api: str, name: str, field: str) -> None:
    with pytest.raises(ValueError, match=api) as raised:
        vendor_bytes(SCRIPTS[name], api)
    assert field in str(raised.value)


def test_a_gemini_file_search_citation_names_its_page_from_the_chunk() -> None:
    """`retrievedContext` chunks name their page by `uri`, or the document's
    `customMetadata` `source_url` (the recording has only that), and their title."""
    import json
    from pathlib import Path

    name = "pydantic-ai__test_google_model_file_search_grounding_gemini_3-True.3"
    base = Path(__file__).parent.parent / "contract_tests/fixtures/google-generative-ai" / name
    body = Path(f"{base}.body").read_bytes()
    meta = json.loads(Path(f"{base}.json").read_text())
    message = replay(Fixture(meta["api"], name, body, meta), whole(body)).message
    cited = [c for b in message.content if b.type == "text" for c in b.citations or ()]
    assert [(c.url, c.cited_text) for c in cited] == [
        ("https://example.com/paris", "The capital of France is **Paris**.")
    ]
    (result,) = [b for b in message.content if b.type == "server_tool_result" and b.sources]
    assert [s.url for s in result.sources] == ["https://example.com/paris"]
