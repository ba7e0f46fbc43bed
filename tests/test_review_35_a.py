"""Review of issue 35 (Anthropic Messages, Gemini, Bedrock), from a user's side: what a
request asks for is what the vendor documents, and nothing a user gives is left out
unsaid.

- Anthropic: a common `ServerTool` option the tool object has no field for (domains or
  max uses on code execution or tool search, a location on web fetch) raises at
  `stream()` instead of vanishing from the request; the tool search tool carries the
  beta header Anthropic documents for it.
- Gemini: a PDF a tool returns reaches a model that takes no images (it is a file, not
  an image), as the same PDF does in a user message.
"""

from __future__ import annotations

import base64
import json
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
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.contract_tests.kit import contract_model, options

PDF = base64.b64encode(b"%PDF-1.4 review").decode()


def _send(model: Model, context: Context) -> httpx.Request:
    """The request `stream()` sends for `context` (the vendor answers 400: only the
    request matters here)."""
    sent: list[httpx.Request] = []

    def vendor(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(400, json={"error": {"message": "stop here"}})

    async def main() -> None:
        with respx.mock(assert_all_called=False) as mock:
            mock.route().mock(side_effect=vendor)
            async with stream_core.stream(model, context, options()) as s:
                async for _ in s:
                    pass

    anyio.run(main)
    assert len(sent) == 1
    return sent[0]


def _ask(model: Model, tool: ServerTool) -> Context:
    return Context(messages=[UserMessage(content="hi")], tools=[tool])


# --- Anthropic ----------------------------------------------------------------------------

CLAUDE = contract_model("anthropic-messages").model_copy(update={"id": "claude-sonnet-4-5"})


@pytest.mark.parametrize(
    ("kind", "given", "named"),
    [
        ("code_execution", {"allowed_domains": ["example.com"]}, "allowed_domains"),
        ("code_execution", {"max_uses": 2}, "max_uses"),
        ("tool_search", {"blocked_domains": ["example.com"]}, "blocked_domains"),
        ("web_fetch", {"user_location": {"country": "US"}}, "user_location"),
    ],
)
def test_anthropic_option_the_tool_lacks_raises(
    kind: str, given: dict[str, Any], named: str
) -> None:
    # Before: the option was left out of the tool object and the request went out as if
    # it had never been given (a domain limit the user relies on, silently gone).
    with pytest.raises(ValueError, match=rf"anthropic-messages.*{kind}.*{named}"):
        _send(CLAUDE, _ask(CLAUDE, ServerTool(kind=kind, **given)))


def test_anthropic_web_tools_still_take_their_options() -> None:
    request = _send(
        CLAUDE,
        Context(
            messages=[UserMessage(content="hi")],
            tools=[
                ServerTool(kind="web_search", max_uses=2, user_location={"country": "US"}),
                ServerTool(kind="web_fetch", max_uses=3, allowed_domains=["example.com"]),
            ],
        ),
    )
    tools = json.loads(request.content)["tools"]
    assert tools[0]["max_uses"] == 2
    assert tools[0]["user_location"] == {"type": "approximate", "country": "US"}
    assert tools[1]["allowed_domains"] == ["example.com"]


def test_anthropic_both_domain_lists_raise() -> None:
    # Anthropic takes an allow list or a block list, not both in one tool.
    tool = ServerTool(kind="web_search", allowed_domains=["a.test"], blocked_domains=["b.test"])
    with pytest.raises(ValueError, match="not both"):
        _send(CLAUDE, _ask(CLAUDE, tool))


@pytest.mark.parametrize(
    "tool",
    [
        ServerTool(kind="tool_search"),
        ServerTool.native(
            "anthropic-messages",
            {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
        ),
    ],
)
def test_anthropic_tool_search_sends_its_beta(tool: ServerTool) -> None:
    # Before: no beta header for the tool search tool, which the vendor documents as
    # needing `advanced-tool-use-2025-11-20` on its own API.
    request = _send(CLAUDE, _ask(CLAUDE, tool))
    assert "advanced-tool-use-2025-11-20" in request.headers["anthropic-beta"].split(",")


# --- Gemini -------------------------------------------------------------------------------


def _tool_returns(model: Model, file: FileContent) -> Context:
    call = ToolCall(id="c1", name="fetch_report", arguments={})
    return Context(
        messages=[
            UserMessage(content="Summarise the report."),
            AssistantMessage(
                content=[call],
                api=model.api,
                provider=model.provider,
                model=model.id,
                stop_reason="tool_use",
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="fetch_report", content=[file]),
        ],
        tools=[Tool(name="fetch_report", description="d", parameters={"type": "object"})],
    )


@pytest.mark.parametrize("model_id", ["gemini-2.5-flash", "gemini-3-pro-preview"])
def test_gemini_pdf_from_a_tool_reaches_a_text_only_model(model_id: str) -> None:
    # Before: a model without image input lost the PDF a tool returned (its response
    # said "(no output)"), though the same PDF in a user message is sent.
    model = contract_model("google-generative-ai").model_copy(
        update={"id": model_id, "input": ["text"]}
    )
    pdf = FileContent(data=PDF, mime_type="application/pdf", name="report.pdf")
    body = json.loads(_send(model, _tool_returns(model, pdf)).content)
    last = json.dumps(body["contents"][-1])
    assert PDF in last
    assert "(no output)" not in last
    assert "(see attached file)" in last


def test_gemini_image_from_a_tool_still_skips_a_text_only_model() -> None:
    model = contract_model("google-generative-ai").model_copy(
        update={"id": "gemini-2.5-flash", "input": ["text"]}
    )
    png = FileContent(data=PDF, mime_type="image/png")
    body = json.loads(_send(model, _tool_returns(model, png)).content)
    assert PDF not in json.dumps(body)
