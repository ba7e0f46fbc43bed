"""`Model.capabilities()` says which server tools and file types a model takes, from the
same tables `stream()` checks: for every registered API, each kind it lists passes the
checks and reaches the request, each kind it does not list raises naming the API, and so
do file types.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
import stream_core.provider
from stream_core import (
    Context,
    FileContent,
    Model,
    ServerTool,
    StreamOptions,
    TextContent,
    Tool,
    ToolResultMessage,
    UserMessage,
)
from stream_core._blocks import SERVER_TOOL_KINDS
from stream_core._pipeline.checks import check_call

HOST = "https://caps.test"


def _apis() -> list[str]:
    return sorted(e.api for e in stream_core.list_providers())


APIS = _apis()


def _wire(api: str) -> stream_core.provider.WireAPI:
    wire = stream_core.provider.get_provider(api).wire
    assert wire is not None, f"{api} has no WireAPI"
    return wire


def _model(api: str) -> Model:
    return Model(id="caps-model", api=api, provider="caps", base_url=HOST, input=["text", "image"])


def _context(*tools: ServerTool, content: Any = "hi") -> Context:
    return Context(messages=[UserMessage(content=content)], tools=list(tools))


def test_every_api_is_probed() -> None:
    assert "anthropic-messages" in APIS and "openai-responses" in APIS


@pytest.mark.parametrize("api", APIS)
def test_capabilities_list_the_tables_stream_checks(api: str) -> None:
    wire = _wire(api)
    caps = _model(api).capabilities()
    if wire.takes_tools:
        model = _model(api)
        taken = [
            k
            for k in wire.server_tools
            if wire.server_tool_refusal(model, ServerTool(kind=k)) is None
        ]
        assert caps.server_tools == taken
    else:
        assert caps.server_tools == []  # no tools at all: a server tool raises too
    assert caps.file_types == sorted(wire.file_types)
    assert all(kind in SERVER_TOOL_KINDS for kind in caps.server_tools), caps.server_tools


def test_a_tool_only_some_models_run_is_listed_for_those_only() -> None:
    """Bedrock runs web search as Amazon Nova's system tool: listed for Nova, not Claude."""
    api = "bedrock-converse-stream"
    nova = Model(id="us.amazon.nova-2-lite-v1:0", api=api, provider="caps", base_url=HOST)
    claude = Model(id="anthropic.claude-sonnet-4", api=api, provider="caps", base_url=HOST)
    assert "web_search" in nova.capabilities().server_tools
    assert "web_search" not in claude.capabilities().server_tools
    with pytest.raises(ValueError, match="only Nova models"):
        stream_core.stream(
            claude, _context(ServerTool(kind="web_search")), StreamOptions(api_key="k")
        )


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("kind", SERVER_TOOL_KINDS)
def test_a_listed_kind_passes_the_checks_and_an_unlisted_one_raises(api: str, kind: str) -> None:
    model = _model(api)
    tool = ServerTool(kind=kind)
    if kind in model.capabilities().server_tools:
        checked = check_call(_wire(api), model, _context(tool), StreamOptions(api_key="k"))
        assert checked.tools == [tool]
        return
    with pytest.raises(ValueError) as info:
        stream_core.stream(model, _context(tool), StreamOptions(api_key="k"))
    said = str(info.value)
    assert api in said and "context.tools[0]" in said


@pytest.mark.parametrize("api", APIS)
def test_a_native_tool_goes_to_its_own_api_only(api: str) -> None:
    model = _model(api)
    own = ServerTool.native(api, {"type": "vendor_tool_x", "name": "x"})
    other = ServerTool.native("some-other-api", {"type": "vendor_tool_x"})
    if _wire(api).takes_tools:
        check_call(_wire(api), model, _context(own), StreamOptions(api_key="k"))
    with pytest.raises(ValueError, match="native ServerTool for some-other-api"):
        stream_core.stream(model, _context(other), StreamOptions(api_key="k"))


def _capture(model: Model, context: Context) -> dict[str, Any]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"type": "invalid_request_error"}})

    async def main() -> None:
        with respx.mock(assert_all_mocked=True) as mock:
            mock.route(host="caps.test").mock(side_effect=answer)
            opts = StreamOptions(api_key="caps-key-0123456789", max_retries=0)
            await stream_core.stream(model, context, opts).result()

    anyio.run(main)
    assert len(seen) == 1
    payload: dict[str, Any] = json.loads(seen[0].content)
    return payload


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


LISTED = [(api, kind) for api in APIS for kind in _wire(api).server_tools]


@pytest.mark.parametrize(("api", "kind"), LISTED, ids=[f"{a}-{k}" for a, k in LISTED])
def test_a_listed_kind_reaches_the_request_as_the_tables_object(api: str, kind: str) -> None:
    model = _model(api)
    tool = ServerTool(kind=kind, options={"caps_probe": 1})
    try:
        payload = _capture(model, _context(tool))
    except ValueError as exc:
        # A kind whose vendor object needs a field only the caller knows (a vector store
        # for file search): the builder says which, naming the kind or the field.
        pytest.skip(f"{api} {kind} needs options: {exc}")
    made = _wire(api).server_tools[kind](tool)
    # `options` merge into the object at its top (COMMON form), or where the vendor's
    # shape keeps a tool's settings (Gemini: `{"google_search": {...}}`), by the table.
    forms = [_compact({**made, **tool.options}), _compact(made)]
    sent = _compact(payload)
    assert any(form in sent for form in forms), (forms, payload)
    assert '"caps_probe":1' in sent, "the tool's options were left out"


@pytest.mark.parametrize("api", APIS)
def test_file_types_listed_pass_and_others_raise_naming_api_and_block(api: str) -> None:
    wire = _wire(api)
    model = _model(api)
    for mime in sorted(wire.file_types):
        for where in ("user", "tool_result"):
            part = FileContent(data="JVBERi0xLjQK", mime_type=mime, name="f")
            check_call(wire, model, _with_file(where, part), StreamOptions(api_key="k"))
    bad = FileContent(data="AAAA", mime_type="application/x-caps-nope", name="f")
    with pytest.raises(ValueError) as info:
        stream_core.stream(model, _with_file("user", bad), StreamOptions(api_key="k"))
    said = str(info.value)
    assert api in said and "context.messages[0].content[1]" in said
    assert "application/x-caps-nope" in said


def _with_file(where: str, part: FileContent) -> Context:
    if where == "user":
        return Context(messages=[UserMessage(content=[TextContent(text="read"), part])])
    from stream_core import AssistantMessage, ToolCall

    call = AssistantMessage(
        api="x",
        provider="x",
        model="x",
        content=[ToolCall(id="c1", name="read", arguments={})],
        stop_reason="tool_use",
    )
    return Context(
        messages=[
            UserMessage(content="read the file"),
            call,
            ToolResultMessage(
                tool_call_id="c1", tool_name="read", content=[TextContent(text="here"), part]
            ),
        ],
        tools=[Tool(name="read", parameters={"type": "object"})],
    )
