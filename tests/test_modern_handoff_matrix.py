"""The handoff matrix, modern column (issue 35): a conversation holding what vendors run
and produce themselves, sent from each wire API to every wire API (the 8x8 pairs of
`test_handoff_matrix`, whose sources, readers and capture it reuses).

The assistant turn holds a server call with its result (with sources), cited text, a
generated file, an approval request, a vendor block, a call with Anthropic's `caller` and
a Responses built-in call with its item; the next user turn answers the approval. Checked
for every pair:

- the request builds (no error) and is sent;
- to another API nothing vendor-only is sent as structure (no `server_tool_use`,
  `web_search_call`, `toolCall` part, `caller`, citation record, ... anywhere but inside a
  text), no encrypted payload at all, and the sources survive as text (URLs, titles,
  cited text, file notes, the approval and its answer); both calls become plain calls,
  each answered;
- to the same API and provider, the blocks that API has go back in its own form.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from test_handoff_matrix import SOURCES, TARGETS, _capture, _served, _target_model

import stream_core.provider
from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Citation,
    FileContent,
    Message,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core._content import Source

U1, T1 = "https://matrix.test/source-one", "Matrix source one"
U2, T2 = "https://matrix.test/source-two", "Matrix source two"
QUERY = "matrix weather query"
CITED = "sunny over the matrix"
ENC = "ENC_MATRIX_payload"
ENC_INDEX = "ENC_MATRIX_index"
VENDOR = "VENDOR_MATRIX"
IMAGE = base64.b64encode(b"\x89PNG\r\n\x1a\nmatrix generated chart").decode()
PDF = base64.b64encode(b"%PDF-1.4 matrix user document").decode()
SID = "srvtoolu_matrix01"
APPROVAL = "mcpr_matrix01"
CALLER_ID = "toolu_matrix_caller"
SHELL_ID = "call_matrix_shell"

FAMILIES: dict[str, frozenset[str]] = {
    "anthropic-messages": frozenset({"server", "citations", "file", "caller", "vendor"}),
    "openai-responses": frozenset({"server", "citations", "file", "approval", "builtin", "vendor"}),
    "google-generative-ai": frozenset({"server", "citations", "file", "vendor"}),
    "bedrock-converse-stream": frozenset({"server", "citations", "file", "vendor"}),
    "openai-completions": frozenset({"citations", "vendor"}),
    "mistral-conversations": frozenset({"citations", "vendor"}),
    "ollama-chat": frozenset(),
    "ollama-generate": frozenset(),
}
"""The block families each API's vendor makes (its docs): a same-API conversation holds
only these; a conversation handed to another API holds all of them."""
EVERY = frozenset().union(*FAMILIES.values())


# --- the blocks, as each vendor makes them ------------------------------------------------


def _server(api: str) -> list[Any]:
    sources = [Source(url=U1, title=T1), Source(url=U2, title=T2)]
    call_raw: dict[str, Any]
    result_raw: dict[str, Any]
    if api == "openai-responses":
        raw = {
            "type": "web_search_call",
            "id": SID,
            "status": "completed",
            "action": {
                "type": "search",
                "query": QUERY,
                "sources": [{"type": "url", "url": U1}, {"type": "url", "url": U2}],
            },
        }
        call = ServerToolCall(
            id=SID, name="web_search_call", kind="web_search", input={"query": QUERY}, raw=raw
        )
        # A reading of the call's own item (no `raw`): it goes back through the call.
        return [
            call,
            ServerToolResult(call_id=SID, name="web_search", kind="web_search", sources=sources),
        ]
    if api == "google-generative-ai":
        call_raw = {
            "toolCall": {"toolType": "GOOGLE_SEARCH_WEB", "id": SID, "args": {"queries": [QUERY]}}
        }
        result_raw = {
            "toolResponse": {
                "toolType": "GOOGLE_SEARCH_WEB",
                "id": SID,
                "response": {
                    "results": [{"url": U1, "title": T1}, {"url": U2, "title": T2}],
                    "token": ENC,
                },
            }
        }
        return [
            ServerToolCall(
                id=SID,
                name="google_search_web",
                kind="web_search",
                input={"queries": [QUERY]},
                raw=call_raw,
            ),
            ServerToolResult(
                call_id=SID,
                name="google_search_web",
                kind="web_search",
                sources=sources,
                raw=result_raw,
            ),
        ]
    if api == "bedrock-converse-stream":
        call_raw = {
            "toolUseId": SID,
            "name": "nova_grounding",
            "type": "server_tool_use",
            "input": {"query": QUERY},
        }
        result_raw = {
            "toolUseId": SID,
            "type": "nova_grounding_result",
            "content": [
                {
                    "json": {
                        "results": [{"url": U1, "title": T1}, {"url": U2, "title": T2}],
                        "token": ENC,
                    }
                }
            ],
            "status": "success",
        }
        return [
            ServerToolCall(
                id=SID,
                name="nova_grounding",
                kind="web_search",
                input={"query": QUERY},
                raw=call_raw,
            ),
            ServerToolResult(
                call_id=SID,
                name="nova_grounding",
                kind="web_search",
                sources=sources,
                raw=result_raw,
            ),
        ]
    # Anthropic's form (also what any other source is given: to another API it is text).
    call_raw = {
        "type": "server_tool_use",
        "id": SID,
        "name": "web_search",
        "input": {"query": QUERY},
    }
    result_raw = {
        "type": "web_search_tool_result",
        "tool_use_id": SID,
        "content": [
            {
                "type": "web_search_result",
                "url": U1,
                "title": T1,
                "encrypted_content": ENC,
                "page_age": None,
            },
            {
                "type": "web_search_result",
                "url": U2,
                "title": T2,
                "encrypted_content": ENC,
                "page_age": None,
            },
        ],
    }
    return [
        ServerToolCall(
            id=SID, name="web_search", kind="web_search", input={"query": QUERY}, raw=call_raw
        ),
        ServerToolResult(
            call_id=SID, name="web_search", kind="web_search", sources=sources, raw=result_raw
        ),
    ]


def _citation(api: str) -> Citation:
    raw: dict[str, Any] | None = None
    index: int | None = None
    if api == "openai-responses":
        raw = {"type": "url_citation", "url": U1, "title": T1, "start_index": 0, "end_index": 18}
    elif api == "bedrock-converse-stream":
        raw = {
            "title": T1,
            "sourceContent": [{"text": CITED}],
            "location": {"web": {"url": U1, "domain": "matrix.test"}},
        }
    elif api == "mistral-conversations":
        # Mistral cites the index of a source in what its tool returned.
        index, raw = 0, {"type": "reference", "reference_ids": [0]}
    elif api in ("anthropic-messages", "ollama-chat", "ollama-generate"):
        raw = {
            "type": "web_search_result_location",
            "url": U1,
            "title": T1,
            "cited_text": CITED,
            "encrypted_index": ENC_INDEX,
        }
    # Gemini's grounding and Chat Completions' annotations come at response level: no raw.
    return Citation(url=U1, title=T1, cited_text=CITED, document_index=index, raw=raw)


def _file(api: str) -> list[Any]:
    if api == "openai-responses":
        item = {
            "type": "image_generation_call",
            "id": "ig_matrix01",
            "status": "completed",
            "result": IMAGE,
        }
        call = ServerToolCall(
            id="ig_matrix01", name="image_generation_call", kind="image_generation", raw=item
        )
        return [
            call,
            FileContent(data=IMAGE, mime_type="image/png", name="chart.png", call_id="ig_matrix01"),
        ]
    if api in ("google-generative-ai", "bedrock-converse-stream"):
        # The model's own image output (no server call made it).
        return [FileContent(data=IMAGE, mime_type="image/png", name="chart.png")]
    # Anthropic: a file a code run wrote, named by its result (which goes back with it).
    return [
        FileContent(file_id="file_matrix01", mime_type="image/png", name="chart.png", call_id=SID)
    ]


def _vendor(api: str) -> VendorContent:
    if api == "google-generative-ai":
        return VendorContent(api=api, data={"matrixVendorPart": {"marker": VENDOR}})
    if api == "bedrock-converse-stream":
        return VendorContent(api=api, data={"matrixVendorBlock": {"marker": VENDOR}})
    return VendorContent(api=api, data={"type": "matrix_vendor_block", "marker": VENDOR})


def conversation(api: str, families: frozenset[str], *, pdf: bool) -> list[Message]:
    src = SOURCES[api]
    content: list[Any] = []
    if "server" in families:
        content += _server(api)
    if "citations" in families:
        content.append(TextContent(text="It is sunny today.", citations=[_citation(api)]))
    else:
        content.append(TextContent(text="It is sunny today."))
    if "file" in families:
        content += _file(api)
    if "approval" in families:
        content.append(
            ApprovalRequest(
                id=APPROVAL,
                name="create_issue",
                server="github",
                arguments={"title": "matrix bug"},
                raw={
                    "type": "mcp_approval_request",
                    "id": APPROVAL,
                    "server_label": "github",
                    "name": "create_issue",
                    "arguments": '{"title": "matrix bug"}',
                },
            )
        )
    if "vendor" in families:
        content.append(_vendor(api))
    results: list[Message] = []
    if "caller" in families:
        content.append(
            ToolCall(
                id=CALLER_ID,
                name="get_weather",
                arguments={"city": "Paris"},
                caller={"type": "code_execution_20250825", "tool_id": "srvtoolu_matrix_code"},
            )
        )
        results.append(
            ToolResultMessage(
                tool_call_id=CALLER_ID, tool_name="get_weather", content=[TextContent(text="19C")]
            )
        )
    if "builtin" in families:
        content.append(
            ToolCall(
                id=SHELL_ID,
                name="local_shell",
                arguments={"command": ["ls", "-la"]},
                builtin="local_shell_call",
                raw={
                    "type": "local_shell_call",
                    "id": "lsh_matrix01",
                    "call_id": SHELL_ID,
                    "status": "completed",
                    "action": {"type": "exec", "command": ["ls", "-la"], "env": {}},
                },
            )
        )
        results.append(
            ToolResultMessage(
                tool_call_id=SHELL_ID,
                tool_name="local_shell",
                content=[TextContent(text="total 0")],
            )
        )
    first: list[Any] = [TextContent(text="Search the weather and file an issue.")]
    if pdf:
        first.append(FileContent(data=PDF, mime_type="application/pdf", name="matrix.pdf"))
    after: list[Any] = [TextContent(text="Go on.")]
    if "approval" in families:
        after.insert(0, ApprovalResponse(request_id=APPROVAL, approve=True))
    said = AssistantMessage(
        content=content,
        api=api,
        provider=src.provider,
        model=src.model,
        stop_reason="tool_use" if results else "stop",
    )
    return [UserMessage(content=first), said, *results, UserMessage(content=after)]


# --- what may not be sent to another API ---------------------------------------------------

VENDOR_TYPES = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_search_result",
        "web_search_result_location",
        "web_search_call",
        "image_generation_call",
        "mcp_approval_request",
        "mcp_approval_response",
        "local_shell_call",
        "local_shell_call_output",
        "url_citation",
        "nova_grounding_result",
        "matrix_vendor_block",
    }
)
"""Item and block types only their own vendor takes."""
VENDOR_KEYS = frozenset(
    {
        "toolCall",
        "toolResponse",
        "matrixVendorPart",
        "matrixVendorBlock",
        "citationsContent",
        "caller",
        "citations",
    }
)
"""Keys (Gemini parts, Converse blocks, Anthropic fields) only their own vendor takes."""


def _structure(value: Any, path: str = "$") -> list[str]:
    """Where a vendor-only type or key is used as structure (not inside a string)."""
    found: list[str] = []
    if isinstance(value, dict):
        if value.get("type") in VENDOR_TYPES:
            found.append(f"{path}.type={value['type']}")
        found += [f"{path}.{k}" for k in value if k in VENDOR_KEYS]
        for k, v in value.items():
            found += _structure(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _structure(v, f"{path}[{i}]")
    return found


def _takes_pdf(api: str) -> bool:
    wire = stream_core.provider.get_provider(api).wire
    return wire is not None and "application/pdf" in wire.file_types


PAIRS = [(s, t) for s in SOURCES for t in TARGETS if s != t]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}->{t}" for s, t in PAIRS])
def test_modern_blocks_from_another_api_are_text_that_keeps_the_sources(
    source: str, target: str
) -> None:
    if target not in _served():
        pytest.skip(f"{target} is not served")
    pdf = _takes_pdf(target)
    messages = conversation(source, EVERY, pdf=pdf)
    payload = _capture(_target_model(target, vision=True), messages)
    dumped = json.dumps(payload, ensure_ascii=False)

    assert _structure(payload) == [], "vendor-only structure sent to another API"
    assert "ENC_MATRIX" not in dumped, "an encrypted payload went to another vendor"
    assert IMAGE not in dumped, "a generated file's bytes went to another vendor"
    # The sources survive as text: search results, cited text, the generated file.
    for needed in (U1, T1, U2, T2, QUERY, CITED, "[sources:", "[file: chart.png, image/png"):
        assert needed in dumped, f"{needed!r} was lost"
    # The approval and its answer, the vendor block, as text.
    assert "[approval asked for create_issue on github" in dumped
    assert f"[approved: {APPROVAL}]" in dumped
    assert VENDOR in dumped
    if pdf:
        assert PDF in dumped, "the user's PDF was not sent"

    rules = TARGETS[target]
    turns = rules.read(payload)
    if not rules.tools:
        assert "19C" in dumped and "total 0" in dumped
        return
    calls = [c for t in turns for c in t.calls]
    assert sorted(name for _, name in calls) == ["get_weather", "local_shell"], calls
    for n, turn in enumerate(turns):
        if turn.calls:
            answer = turns[n + 1]
            assert answer.role == "user" and len(answer.results) == len(turn.calls)
            assert not any(is_error for _, is_error in answer.results), answer.results


SAME_MARKS: dict[str, dict[str, list[str]]] = {
    "anthropic-messages": {
        "server": ['"type": "server_tool_use"', ENC, SID],
        "citations": [ENC_INDEX],
        "caller": ['"caller": {"type": "code_execution_20250825"'],
        "vendor": [VENDOR],
    },
    "openai-responses": {
        "server": ['"type": "web_search_call"', SID],
        "citations": ['"type": "url_citation"'],
        "file": ['"type": "image_generation_call"'],
        "approval": ['"type": "mcp_approval_request"', '"type": "mcp_approval_response"'],
        "builtin": ['"type": "local_shell_call"', '"type": "local_shell_call_output"'],
        "vendor": [VENDOR],
    },
    "google-generative-ai": {
        "server": ['"toolCall"', '"toolResponse"', ENC],
        "file": [IMAGE],
        "vendor": ['"matrixVendorPart"'],
    },
    "bedrock-converse-stream": {
        "server": ['"type": "server_tool_use"', ENC],
        "citations": ['"citationsContent"'],
        "file": [IMAGE],
        "vendor": ['"matrixVendorBlock"'],
    },
    "openai-completions": {"vendor": [VENDOR]},
    "mistral-conversations": {"citations": ['"type": "reference"'], "vendor": [VENDOR]},
}
"""What each API's own form of a family looks like in its payload (a family not named here
goes back as its text only: citations a vendor made at response level, say)."""

SAME = [api for api in SOURCES if api in TARGETS]


@pytest.mark.parametrize("api", SAME)
def test_modern_blocks_go_back_to_the_same_api_in_its_own_form(api: str) -> None:
    if api not in _served():
        pytest.skip(f"{api} is not served")
    families = FAMILIES[api]
    messages = conversation(api, families, pdf=_takes_pdf(api))
    payload = _capture(_target_model(api, vision=True), messages)
    dumped = json.dumps(payload, ensure_ascii=False)
    assert "It is sunny today." in dumped
    missing = {
        family: mark
        for family, marks in SAME_MARKS.get(api, {}).items()
        if family in families
        for mark in marks
        if mark not in dumped
    }
    assert not missing, f"{api} lost its own blocks: {missing}"
    if "citations" in SAME_MARKS.get(api, {}) and api != "mistral-conversations":
        assert U1 in dumped
    if _takes_pdf(api):
        assert PDF in dumped
