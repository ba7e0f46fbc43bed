"""Any script as real vendor bytes (issue 28, point 2), from the user's side: each API's
bytes from `vendor_bytes` replay through its provider to the scripted message (text,
thinking, parallel tool calls, usage, stop reasons, a cut call, errors before and after
content, an HTTP error), `fake_vendor` serves scripted turns in the API the request came
through, and `stream-core synthesize` writes recordings `serve` plays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
    complete,
)
from stream_core.testing import (
    faux_error,
    faux_message,
    faux_text,
    replay_client,
)
from stream_core.testing import vendor_bytes as _vendor_bytes

APIS = {
    "anthropic-messages": ("anthropic", "https://a.test"),
    "openai-completions": ("openai", "https://o.test/v1"),
    "mistral-conversations": ("mistral", "https://m.test/v1"),
    "openai-responses": ("openai", "https://r.test/v1"),
    "google-generative-ai": ("google", "https://g.test/v1beta"),
    "bedrock-converse-stream": (
        "amazon-bedrock",
        "https://bedrock-runtime.us-east-1.amazonaws.com",
    ),
    "ollama-chat": ("ollama", "http://localhost:11434"),
    "ollama-generate": ("ollama", "http://localhost:11434"),
}
NO_CACHE = {"mistral-conversations", "ollama-chat", "ollama-generate"}
WHOLE_ARGS = {"google-generative-ai", "ollama-chat"}
CTX = Context(messages=[UserMessage(content="hi")])


def _model(api: str) -> Model:
    provider, base = APIS[api]
    return Model(id="synthetic-model", api=api, provider=provider, base_url=base, reasoning=True)


def _replay(api: str, turn: Any) -> AssistantMessage:
    synth = _vendor_bytes(turn, api)
    options = StreamOptions(api_key="k", client=replay_client(synth), max_retries=0)
    return anyio.run(complete, _model(api), CTX, options)


def _summary(m: AssistantMessage) -> list[Any]:
    out: list[Any] = []
    for b in m.content:
        if isinstance(b, TextContent):
            out.append(("text", b.text))
        elif isinstance(b, ThinkingContent):
            out.append(("thinking", b.thinking))
        elif isinstance(b, ToolCall):
            out.append(("tool", b.name, None if b.truncated else b.arguments, b.truncated))
    return out


SCRIPT = AssistantMessage(
    api="faux", provider="faux", model="m",
    content=[
        ThinkingContent(thinking="Let me look.", signature="sig-1"),
        TextContent(text="Looking both up."),
        ToolCall(id="call_1", name="look", arguments={"q": "one", "n": [1, 2]}),
        ToolCall(id="call_2", name="find", arguments={"q": "two"}),
    ],
    stop_reason="tool_use",
    usage=Usage(input=120, output=40, cache_read=30, reasoning=0),
)  # fmt: skip


@pytest.mark.parametrize("api", list(APIS))
def test_a_rich_turn_replays_to_the_script(api: str) -> None:
    if api == "ollama-generate":
        with pytest.raises(ValueError, match="ollama-generate takes no tools"):
            _vendor_bytes(SCRIPT, api)
        return
    m = _replay(api, SCRIPT)
    assert m.error is None, m.error
    assert _summary(m) == _summary(SCRIPT)
    assert m.stop_reason == "tool_use"
    if api in NO_CACHE:
        assert (m.usage.input, m.usage.output) == (150, 40)
    else:
        assert (m.usage.input, m.usage.output, m.usage.cache_read) == (120, 40, 30)


@pytest.mark.parametrize("api", list(APIS))
def test_text_and_a_length_stop(api: str) -> None:
    m = _replay(api, faux_text("Hello there.", usage=Usage(input=5, output=3)))
    assert (m.text(), m.stop_reason, m.error) == ("Hello there.", "stop", None)
    cut = AssistantMessage(
        api="faux", provider="faux", model="m", content=[TextContent(text="Half an")],
        stop_reason="length", usage=Usage(input=5, output=2),
    )  # fmt: skip
    m = _replay(api, cut)
    assert (m.text(), m.stop_reason) == ("Half an", "length")


@pytest.mark.parametrize("api", [a for a in APIS if a not in WHOLE_ARGS | {"ollama-generate"}])
def test_a_call_cut_by_the_output_limit_is_truncated(api: str) -> None:
    call = ToolCall(
        id="call_9", name="look", arguments={}, partial_json='{"q": "abc', truncated=True
    )
    script = AssistantMessage(
        api="faux", provider="faux", model="m", content=[call], stop_reason="length",
        usage=Usage(input=5, output=9),
    )  # fmt: skip
    m = _replay(api, script)
    assert m.stop_reason == "length"
    (got,) = m.tool_calls()
    assert got.truncated and got.name == "look"


@pytest.mark.parametrize("api", [a for a in APIS if a in WHOLE_ARGS])
def test_a_cut_call_in_an_api_that_sends_arguments_whole_says_so(api: str) -> None:
    call = ToolCall(id="c", name="look", arguments={}, partial_json='{"q": "ab', truncated=True)
    script = AssistantMessage(
        api="faux", provider="faux", model="m", content=[call], stop_reason="length"
    )
    with pytest.raises(ValueError, match="sends a tool call's arguments whole"):
        _vendor_bytes(script, api)


@pytest.mark.parametrize("api", list(APIS))
def test_errors_before_and_after_content(api: str) -> None:
    before = _replay(api, faux_error("overloaded", "busy right now"))
    assert before.stop_reason == "error" and before.error is not None
    assert "busy right now" in before.error.message
    after = faux_message(
        AssistantMessage(
            api="faux",
            provider="faux",
            model="m",
            content=[TextContent(text="partial")],
            stop_reason="error",
            error={"kind": "server", "message": "it broke"},
        )  # fmt: skip
    )
    m = _replay(api, after)
    assert m.stop_reason == "error" and m.text() == "partial"
    assert m.error is not None and "it broke" in m.error.message


@pytest.mark.parametrize("api", list(APIS))
def test_an_http_error_turn(api: str) -> None:
    synth = _vendor_bytes(faux_error("rate_limit", "slow down", status=429, retry_after=2), api)
    assert synth.meta["status"] == 429
    m = _replay(api, faux_error("rate_limit", "slow down", status=429, retry_after=2))
    assert m.error is not None and m.error.kind == "rate_limit" and m.error.retry_after == 2


def test_fake_vendor_serves_scripted_turns_in_each_api(fake_vendor: Any) -> None:
    server = fake_vendor(
        scenarios={"synthetic-model": [faux_text("first"), faux_text("second"), SCRIPT]}
    )
    got = []
    for api in ("anthropic-messages", "openai-completions", "google-generative-ai"):
        provider, _ = APIS[api]
        base = server.url + ("/v1" if api == "openai-completions" else "")
        model = Model(
            id="synthetic-model", api=api, provider=provider, base_url=base, reasoning=True
        )
        got.append(anyio.run(complete, model, CTX, StreamOptions(api_key="k", max_retries=0)))
    assert [m.text() for m in got[:2]] == ["first", "second"]
    assert [c.name for c in got[2].tool_calls()] == ["look", "find"]
    assert len(server.requests) == 3


def test_synthesize_writes_recordings_serve_plays(tmp_path: Path) -> None:
    script = tmp_path / "turns.jsonl"
    script.write_text(
        json.dumps("Hello from a script.") + "\n" + SCRIPT.model_dump_json() + "\n",
        "utf-8",
    )
    out = tmp_path / "rec"
    from stream_core._cli import main

    code = main(["synthesize", str(script), "--api", "openai-completions", "--out", str(out)])
    assert code == 0
    bodies = sorted(out.glob("*.body"))
    assert [b.name for b in bodies] == ["1.body", "2.body"]
    meta = json.loads(bodies[0].with_suffix(".json").read_text())
    assert meta["api"] == "openai-completions" and meta["expect"]["stop_reason"] == "stop"
    client = replay_client(bodies[1])
    m = anyio.run(
        complete, _model("openai-completions"), CTX, StreamOptions(api_key="k", client=client)
    )
    assert [c.name for c in m.tool_calls()] == ["look", "find"]
    assert isinstance(client, httpx.AsyncClient)
