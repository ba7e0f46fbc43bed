"""Scripted server tools, citations and files as vendor bytes (`vendor_bytes`, `fake_vendor`):
each built-in API either writes them so its provider reads back what was scripted, or
refuses with a `ValueError` naming what it cannot say; never a silent misreading (a server
call written as a function call, a dropped result)."""

from __future__ import annotations

import base64

import pytest

import stream_core
from stream_core import FileContent, StreamOptions, TextContent, complete_sync
from stream_core.contract_tests.kit import Fixture, check_expect, replay, whole
from stream_core.testing import fake_vendor, faux_content, faux_web_search, vendor_bytes
from stream_core.testing._synthesize import APIS

SEARCH = faux_web_search(
    "weather in Paris", [("https://meteo.example/paris", "Paris forecast")], "Sunny, 24 °C."
)
IMAGE = faux_content(
    [
        FileContent(data=base64.b64encode(b"\x89PNG\r\n\x1a\n").decode(), mime_type="image/png"),
        TextContent(text="Here is the picture."),
    ]
)
ASK = {"messages": [{"role": "user", "content": "Weather in Paris?"}]}


@pytest.mark.parametrize("api", list(APIS))
@pytest.mark.parametrize("turn", [SEARCH, IMAGE], ids=["web-search", "generated-image"])
def test_vendor_bytes_writes_new_blocks_faithfully_or_refuses(api: str, turn: object) -> None:
    """If this fails: the API's writer (_write_sse.py, _write_framed.py, from its codec
    module) writes a block of a `block_*` kind as something else, or drops it, instead of
    raising."""
    try:
        synth = vendor_bytes(turn, api)  # type: ignore[arg-type]
    except ValueError as e:
        assert api in str(e) or "vendor_bytes" in str(e), e
        return
    run = replay(Fixture(api, "scripted", synth.body, synth.meta), whole(synth.body))
    assert run.message.error is None, run.message.error
    expect = synth.meta["expect"]
    if api in GROUNDED_AFTER_TEXT:
        # Gemini says a search as grounding metadata on its last chunk: the same blocks,
        # the search read after the text it grounds.
        got = sorted(b.type for b in run.message.content)
        assert got == sorted(b["type"] for b in expect["content"]), got
        expect = {**expect, "content_partial": True, "content": [
            b for b in expect["content"] if b["type"] == "text"
        ]}  # fmt: skip
    check_expect(run.message, expect)


GROUNDED_AFTER_TEXT = {"google-generative-ai"}


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_a_fake_vendor_serves_a_scripted_web_search(api: str) -> None:
    provider = "anthropic" if api == "anthropic-messages" else "openai"
    model = stream_core.get_model(
        provider, "claude-sonnet-4-5" if provider == "anthropic" else "gpt-5", api=api
    )
    with fake_vendor(scenarios={model.id: [SEARCH]}) as server:
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
        message = complete_sync(model, ASK, options)
    assert message.error is None, message.error
    assert [b.type for b in message.content] == [
        "server_tool_call",
        "server_tool_result",
        "text",
    ]
    text = message.content[2]
    assert isinstance(text, TextContent) and text.text == "Sunny, 24 °C."
    assert [c.url for c in text.citations or ()] == ["https://meteo.example/paris"]
    assert message.stop_reason == "stop"
