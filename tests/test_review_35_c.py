"""Review of issue 35 (c): the cross-cutting promises seen from a harness author's side.

A harness's own web-search / PDF context runs on the faux model; bad input raises at
`stream()` naming the field; an approval answer needs its request (and compaction keeps
the two together); `vendor_bytes` refuses what Gemini cannot say instead of dropping it;
`stream-core replay` shows a server call's input, an approval's arguments and an unlabelled
citation's quoted text."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import stream_core
from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Citation,
    Context,
    FileContent,
    ServerTool,
    StreamOptions,
    TextContent,
    UserMessage,
    VendorContent,
    compaction_cut,
    complete_sync,
)
from stream_core._cli import main
from stream_core.testing import faux_model, faux_web_search, vendor_bytes

PDF = FileContent(data=base64.b64encode(b"%PDF-1.4").decode(), mime_type="application/pdf")
OFFLINE = StreamOptions(api_key="k", base_url="http://127.0.0.1:9", max_retries=0)
FIXTURES = Path(__file__).resolve().parents[1] / "contract_tests" / "fixtures"


def _assistant(*blocks: object) -> AssistantMessage:
    return AssistantMessage(api="faux", provider="faux", model="faux", content=list(blocks))


def test_a_harness_context_asking_for_web_search_and_sending_a_pdf_runs_on_faux() -> None:
    model = faux_model([faux_web_search("paris", ["https://a.example"], "Sunny.")])
    context = Context(
        messages=[UserMessage(content=[TextContent(text="Weather?"), PDF])],
        tools=[ServerTool(kind="web_search", max_uses=2)],
    )
    message = complete_sync(model, context)
    assert message.error is None
    assert [b.type for b in message.content] == ["server_tool_call", "server_tool_result", "text"]
    assert model.requests[0]["tools"][0]["kind"] == "web_search"


def test_the_faux_model_still_refuses_a_file_no_api_takes() -> None:
    model = faux_model(["hi"])
    zipped = FileContent(data="eA==", mime_type="application/zip")
    with pytest.raises(ValueError, match=r"context\.messages\[0\]\.content\[0\].*zip"):
        complete_sync(model, Context(messages=[UserMessage(content=[zipped])]))


ASK = {"role": "user", "content": "x"}
NO_BYTES = {"messages": [ASK, {"role": "user", "content": [{"type": "file"}]}]}
TYPO = {"messages": [ASK], "tools": [{"type": "server_tool", "kind": "web_serch"}]}


@pytest.mark.parametrize(
    ("context", "field", "says"),
    [
        (NO_BYTES, "context.messages.1.content.0:", "needs `data`"),
        (TYPO, "context.tools.0.kind:", "'web_serch' is no server tool kind"),
    ],
)
def test_bad_blocks_and_tools_raise_naming_the_field(context: dict, field: str, says: str) -> None:
    model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    with pytest.raises(ValueError) as info:
        stream_core.stream(model, context, OFFLINE)
    assert str(info.value).startswith(field), info.value
    assert says in str(info.value) and "Value error" not in str(info.value)


@pytest.mark.parametrize(
    ("provider", "model_id", "api"),
    [("openai", "gpt-5", "openai-responses"), ("anthropic", "claude-sonnet-4-5", None)],
)
def test_an_approval_for_an_unknown_request_raises_at_the_call(
    provider: str, model_id: str, api: str | None
) -> None:
    model = stream_core.get_model(provider, model_id, **({"api": api} if api else {}))
    asked = _assistant(ApprovalRequest(id="mcpr_1", name="t", server="s"))
    answer = UserMessage(content=[ApprovalResponse(request_id="mcpr_typo", approve=True)])
    context = Context(messages=[UserMessage(content="go"), asked, answer])
    with pytest.raises(ValueError, match=r"context\.messages\[2\]\.content\[0\]\.request_id"):
        stream_core.stream(model, context, OFFLINE)


def test_an_approval_answering_its_request_is_sent() -> None:
    asked = _assistant(ApprovalRequest(id="mcpr_1", name="t", server="s"))
    answer = UserMessage(content=[ApprovalResponse(request_id="mcpr_1", approve=True)])
    model = faux_model(["done"])
    message = complete_sync(model, Context(messages=[UserMessage(content="go"), asked, answer]))
    assert message.error is None


def test_compaction_never_separates_an_approval_request_from_its_answer() -> None:
    messages = [
        UserMessage(content="a" * 400),
        _assistant(ApprovalRequest(id="mcpr_1", name="t", server="s", arguments={"x": 1})),
        UserMessage(content=[ApprovalResponse(request_id="mcpr_1", approve=True)]),
        _assistant(TextContent(text="done")),
    ]
    cut = compaction_cut(messages, keep_tokens=8)
    kept_requests = {
        b.id for m in messages[cut:] if isinstance(m, AssistantMessage) for b in m.content
        if isinstance(b, ApprovalRequest)
    }  # fmt: skip
    assert cut <= 1 and "mcpr_1" in kept_requests


@pytest.mark.parametrize(
    "block",
    [
        ApprovalRequest(id="mcpr_1", name="t", server="s", arguments={"a": 1}),
        VendorContent(api="openai-responses", data={"type": "foo"}),
    ],
    ids=["approval", "foreign-vendor-block"],
)
def test_vendor_bytes_for_gemini_refuses_what_it_cannot_say(block: object) -> None:
    with pytest.raises(ValueError, match="google-generative-ai"):
        vendor_bytes(_assistant(block, TextContent(text="hi")), "google-generative-ai")


def test_vendor_bytes_for_gemini_refuses_a_fetched_page_text() -> None:
    from stream_core.testing import faux_server_message

    fetched = faux_server_message(
        "web_fetch", {"url": "https://a.example"}, sources=["https://a.example"],
        result="the page", text="ok",
    )  # fmt: skip
    with pytest.raises(ValueError, match="google-generative-ai.*web_fetch"):
        vendor_bytes(fetched, "google-generative-ai")


def _replay(capsys: pytest.CaptureFixture[str], path: Path, api: str) -> str:
    assert main(["replay", str(path), "--api", api]) == 0
    return capsys.readouterr().out


def test_replay_shows_a_server_calls_input_and_an_approvals_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = "vercel-ai__openai-mcp-tool-approval.3.body"
    out = _replay(capsys, FIXTURES / "openai-responses" / name, "openai-responses")
    assert 'input: {"server_label": "zip1"}' in out
    assert "arguments: {" in out and "ai-sdk.dev" in out


def test_replay_names_a_file_search_citation(capsys: pytest.CaptureFixture[str]) -> None:
    """A file-search citation names its source (the chunk's URL), never an empty `[cites ]`."""
    name = "pydantic-ai__test_google_model_file_search_grounding_gemini_3-True.3.body"
    out = _replay(capsys, FIXTURES / "google-generative-ai" / name, "google-generative-ai")
    assert "[cites ]" not in out
    assert "[cites " in out and "https://example.com/paris" in out


def test_a_citation_label_falls_back_in_the_renderer() -> None:
    from stream_core._cli._render import _citation_label

    assert _citation_label(Citation(cited_text="x" * 300)).endswith('..."')
    assert _citation_label(Citation()) == "-"
