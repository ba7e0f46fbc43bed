"""The `stream-core` command: demo, replay and chat, all offline."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import AssistantMessage, Context, Model, StreamOptions, UserMessage
from stream_core._cli import main
from stream_core._cli._render import Renderer
from stream_core._cli.demo import demo_body
from stream_core.provider import EventStreamDecoder

FIXTURES = Path(__file__).resolve().parent.parent / "contract_tests" / "fixtures"
OVERLOADED = FIXTURES / "anthropic-messages" / "synthetic-anthropic-overloaded-after-text.body"
PARALLEL = FIXTURES / "openai-completions" / "synthetic-openai-chat-parallel-interleaved.body"
LENGTH_TOOL = FIXTURES / "openai-completions" / "synthetic-openai-chat-length-mid-tool-call.body"
TEXT = FIXTURES / "anthropic-messages" / "vercel-ai__anthropic-text.body"
THINKING = FIXTURES / "anthropic-messages" / "llm-anthropic__test_stream_events_thinking.0.body"
DEMO_FILES = (
    "anthropic-thinking-tool.body",
    "openai-parallel-tools.body",
    "gemini-parallel-tools.body",
    "bedrock-reasoning-tool.body",
    "openai-responses-reasoning-tool.body",
    "mistral-reasoning.body",
    "ollama-chat-text.body",
    "anthropic-overloaded.body",
)


def fixtures_with_stop_reason() -> Iterator[Any]:
    for meta_path in sorted(FIXTURES.glob("*/*.json")):
        meta = json.loads(meta_path.read_text())
        expect = meta["expect"]
        # `replay` makes a plain call: a recording of a call made otherwise (`call`: an
        # output_schema, a forced tool) ends differently without it.
        if "stop_reason" in expect and "call" not in meta:
            yield pytest.param(meta_path.with_suffix(".body"), expect, id=meta_path.stem)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def without_timestamp(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    # Wall-clock facts of the replay, not part of the recording.
    for key in ("timestamp", "ttft_ms", "duration_ms"):
        data.pop(key)
    return data


# --- demo -----------------------------------------------------------------------------------


def test_demo_shows_every_recording(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "demo", "--speed", "0")
    assert code == 0
    # (a) thinking, text, one streamed tool call with parsed arguments, tool_use stop
    assert "thinking:\n  The user is asking whether to take an umbrella" in out
    assert "Let me check tomorrow's forecast for Paris before you decide." in out
    assert "tool call get_forecast" in out
    assert '"units": "metric"' in out
    assert "stop: tool_use (raw: tool_use)" in out
    # (b) two parallel calls, each with its own arguments
    assert "tool call get_weather" in out and "tool call get_time" in out
    assert '"city": "Paris"' in out and '"tz": "Europe/Paris"' in out
    assert "stop: tool_use (raw: tool_calls)" in out
    # (c) Bedrock's binary event-stream: reasoning, text, a tool call, usage with a cache read
    assert "The user wants 17% of 2,340." in out
    assert "tool call calculator" in out and '"expression": "2340 * 0.17"' in out
    assert "cache read 1536" in out
    # (c) Responses: summary parts as one thinking block, text, a call by its call_id
    assert "**Checking the tide**" in out and "**Plan**" in out
    assert "tool call get_tides (#2, id call_demo_0001)" in out
    assert "stop: tool_use (raw: completed)" in out
    # (d) the mid-stream error, with the partial text kept
    assert "Here is the first part of a longer answer that never finishes" in out
    assert "error: overloaded: Overloaded" in out
    assert "stop: error" in out
    # (d) Gemini: thought parts, then two whole function calls in one chunk
    assert "The user wants both the weather and the local time in Paris." in out
    assert "stop: tool_use (raw: STOP)" in out
    # (e) Mistral's thinking parts, and Ollama's native NDJSON from a local model
    assert "The user is asking for 2+2." in out and "2 + 2 = 4" in out
    assert "The sky looks blue because air scatters short wavelengths more." in out
    # catalog models, so a price: cost in USD on every summary line but the local model's
    assert len(re.findall(r"cost: \$\d+\.\d{6}", out)) == len(DEMO_FILES) - 1
    assert out.count("cost unknown") == 1
    assert "\x1b" not in out  # not a terminal: plain text


def test_demo_recordings_ship_as_package_data() -> None:
    for name in DEMO_FILES:
        body = demo_body(name)
        if name.startswith("bedrock"):
            assert EventStreamDecoder().decode(body)  # whole binary frames, CRCs valid
        elif name.startswith("ollama"):
            assert body.startswith(b"{") and body.endswith(b"\n")  # one JSON object a line
        else:
            assert body.startswith((b"event: ", b"data: "))
    readme = (files("stream_core") / "demo" / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in readme.lower()
    # The copies stay byte-identical to the contract fixtures they come from.
    assert demo_body("openai-parallel-tools.body") == PARALLEL.read_bytes()
    assert demo_body("anthropic-overloaded.body") == OVERLOADED.read_bytes()
    for name, fixture in (
        ("mistral-reasoning.body", "mistral-conversations/vercel-ai__mistral-reasoning.body"),
        ("ollama-chat-text.body", "ollama-chat/synthetic-ollama-chat-text.body"),
    ):
        assert demo_body(name) == (FIXTURES / fixture).read_bytes()


def test_demo_rejects_a_negative_speed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "demo", "--speed", "-1")
    assert code == 2 and out == "" and "--speed" in err


# --- replay ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "expect"), list(fixtures_with_stop_reason()))
def test_replay_json_is_the_final_message(
    capsys: pytest.CaptureFixture[str], body: Path, expect: dict[str, Any]
) -> None:
    code, out, _ = run(capsys, "replay", str(body), "--json")
    assert code == 0  # even when the recorded message ends in error
    message = AssistantMessage.model_validate(json.loads(out))
    assert out.count("\n") == 1  # the message and nothing else
    assert message.stop_reason == expect["stop_reason"]
    if "error_kind" in expect:
        assert message.error is not None and message.error.kind == expect["error_kind"]


def test_replay_events_are_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "replay", str(TEXT), "--events")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0] == {"type": "message_start"}
    assert events[-1]["type"] == "message_end"
    final = AssistantMessage.model_validate(events[-1]["message"])
    deltas = [e["delta"] for e in events[1:-1]]
    assert all(e["type"] == "message_update" for e in events[1:-1])
    text = "".join(
        d["delta"] for d in deltas if d["type"] == "text_delta" and d["content_index"] == 0
    )
    assert text == final.content[0].text != ""  # type: ignore[union-attr]
    assert all("delta" not in d for d in deltas if d["type"] in ("text_start", "text_end"))


def test_replay_events_carry_tool_arguments_at_toolcall_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "replay", str(PARALLEL), "--events")
    assert code == 0
    ends = [json.loads(line)["delta"] for line in out.splitlines() if "toolcall_end" in line]
    assert ends == [
        {"type": "toolcall_end", "content_index": 0, "arguments": {"city": "Paris"}},
        {"type": "toolcall_end", "content_index": 1, "arguments": {"tz": "Europe/Paris"}},
    ]


def test_replay_events_then_json_ends_with_the_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "replay", str(OVERLOADED), "--events", "--json")
    assert code == 0
    lines = out.splitlines()
    end = json.loads(lines[-2])
    assert end["type"] == "message_end"
    assert json.loads(lines[-1]) == end["message"]
    assert end["message"]["error"]["kind"] == "overloaded"


def test_replay_one_byte_chunks_give_the_same_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A multi-byte character (é) in the recording is split across chunks too.
    _, whole, _ = run(capsys, "replay", str(THINKING), "--json")
    _, one_byte, _ = run(capsys, "replay", str(THINKING), "--json", "--chunk-size", "1")
    assert "é" in whole
    assert without_timestamp(one_byte) == without_timestamp(whole)


def test_replay_human_output_renders_the_recording(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "replay", str(OVERLOADED))
    assert code == 0
    assert out.startswith("Here is the first part of a longer answer that never finishes\n")
    assert "error: overloaded: Overloaded" in out
    assert "partial content kept: text (61 chars)" in out
    # The recording names its vendor and model, so genai-prices prices it: 25 in, 1 out.
    assert "cost: $0.000090" in out


def test_replay_keeps_interleaved_tool_calls_apart(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "replay", str(PARALLEL))
    # Each fragment's line names its own call, in arrival order.
    assert '  get_weather #0 > {"city"\n  get_time #1 > {"tz"\n' in out
    assert '  get_weather #0 > : "Paris"}\n  get_time #1 > : "Europe/Paris"}\n' in out


def test_replay_flags_a_truncated_tool_call(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "replay", str(LENGTH_TOOL))
    assert "TRUNCATED" in out and "do not execute" in out
    assert "stop: length (raw: length)" in out


MAX_TOKENS_AFTER_TOOL = b"".join(
    b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())
    for name, data in [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"id": "msg_x", "usage": {"input_tokens": 10, "output_tokens": 1}},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_x", "name": "save", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"path": "a.txt"}'},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "max_tokens"},
                "usage": {"output_tokens": 20},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
)


@pytest.mark.parametrize("chunking", [[], ["--chunk-size", "1"]], ids=["whole", "1-byte"])
def test_replay_flags_a_call_truncated_by_a_later_length_stop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, chunking: list[str]
) -> None:
    # The JSON parses, but a length stop makes the call untrusted (CONTRACT 3.2); the stop
    # may arrive after the call's toolcall_end has been drawn.
    body = tmp_path / "max-tokens.body"
    body.write_bytes(MAX_TOKENS_AFTER_TOOL)
    code, out, _ = run(capsys, "replay", str(body), "--api", "anthropic-messages", *chunking)
    assert code == 0
    assert out.count("TRUNCATED") == 1
    assert "stop: length (raw: max_tokens)" in out


def test_replay_without_api_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = tmp_path / "lonely.body"
    shutil.copy(OVERLOADED, body)
    code, out, err = run(capsys, "replay", str(body))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "--api" in err


def test_replay_with_api_needs_no_sidecar(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = tmp_path / "lonely.body"
    shutil.copy(OVERLOADED, body)
    code, out, _ = run(capsys, "replay", str(body), "--api", "anthropic-messages", "--json")
    assert code == 0
    message = json.loads(out)
    assert (message["model"], message["provider"]) == ("replay", "replay")


def test_replay_takes_model_and_vendor_from_the_sidecar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(capsys, "replay", str(OVERLOADED), "--json")
    message = json.loads(out)
    assert message["model"] == "claude-sonnet-4-5-20250929"
    assert message["provider"] == "anthropic"


def test_replay_unknown_api_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "replay", str(OVERLOADED), "--api", "no-such-api")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no-such-api" in err


@pytest.mark.parametrize(
    ("body", "wrong_api"),
    [(TEXT, "openai-completions"), (PARALLEL, "anthropic-messages")],
    ids=["anthropic-as-openai", "openai-as-anthropic"],
)
def test_replay_with_the_wrong_api_says_nothing_was_recognised(
    capsys: pytest.CaptureFixture[str], body: Path, wrong_api: str
) -> None:
    code, _, err = run(capsys, "replay", str(body), "--api", wrong_api)

    assert code == 1
    assert err == (
        f"error: no event of {body.name} was recognised as {wrong_api}; "
        "is --api the wire API that recorded it?\n"
    )


def test_replay_of_a_recorded_transport_failure_still_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Text arrived, then the body stopped: the recording's failure, not a wrong --api.
    body = tmp_path / "cut.body"
    body.write_bytes(PARALLEL.read_bytes().split(b"data: [DONE]")[0])

    code, out, err = run(capsys, "replay", str(body), "--api", "openai-completions")

    assert code == 0 and err == ""
    assert "error: network" in out


def test_replay_missing_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "replay", str(tmp_path / "absent.body"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "absent.body" in err


def test_replay_rejects_a_zero_chunk_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "replay", str(OVERLOADED), "--chunk-size", "0")
    assert code == 2 and out == "" and "--chunk-size" in err


# --- chat -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "env"),
    [
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("openai/gpt-4.1-mini", "OPENAI_API_KEY"),
        ("groq/qwen/qwen3-32b", "GROQ_API_KEY"),
    ],
)
def test_chat_without_a_key_names_the_variable_and_sends_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, target: str, env: str
) -> None:
    monkeypatch.delenv(env, raising=False)
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().respond(500)
        code, out, err = run(capsys, "chat", target, "hello")
    assert code == 2
    assert out == ""
    assert err == f"error: set {env} to use {target}\n"
    assert not route.called


@pytest.mark.parametrize("target", ["unknown/model", "no-slash", "/model", "openai/"])
def test_chat_unknown_model_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        route = mock.route().respond(500)
        code, out, err = run(capsys, "chat", target, "hello")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert not route.called


def test_chat_streams_with_the_renderer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    body = demo_body("anthropic-thinking-tool.body")
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post("https://api.anthropic.com/v1/messages").respond(
            200, headers={"content-type": "text/event-stream"}, content=body
        )
        code, out, _ = run(
            capsys,
            "chat",
            "anthropic/claude-sonnet-4-5",
            "Umbrella?",
            "--system",
            "Be brief.",
            "--max-tokens",
            "4000",
            "--reasoning",
            "low",
        )
    assert code == 0
    assert "thinking:" in out and "tool call get_forecast" in out
    assert re.search(r"cost: \$\d+\.\d{6}", out)
    payload = json.loads(route.calls.last.request.content)
    assert payload["system"][0]["text"] == "Be brief."
    assert payload["messages"][0]["content"][0]["text"] == "Umbrella?"
    assert payload["thinking"]["type"] == "enabled"


def test_chat_exits_1_when_the_answer_ends_in_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post("https://api.anthropic.com/v1/messages").respond(
            200, headers={"content-type": "text/event-stream"}, content=OVERLOADED.read_bytes()
        )
        code, out, _ = run(capsys, "chat", "anthropic/claude-sonnet-4-5", "hello")
    assert code == 1
    assert "error: overloaded" in out


OPENAI_OK = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"hi there"},'
    b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


@pytest.mark.parametrize(
    ("argv", "url", "model_id"),
    [
        (["lmstudio/qwen3-8b"], "http://localhost:1234/v1/chat/completions", "qwen3-8b"),
        (
            ["vllm/Qwen/Qwen3-8B", "--base-url", "http://10.0.0.5:8000/v1"],
            "http://10.0.0.5:8000/v1/chat/completions",
            "Qwen/Qwen3-8B",
        ),
        (
            ["my-gateway/any-model", "--base-url", "http://127.0.0.1:4000/v1"],
            "http://127.0.0.1:4000/v1/chat/completions",
            "any-model",
        ),
    ],
    # `ollama/...` is Ollama's native API now (tests/test_papercuts.py).
    ids=["lmstudio", "vllm-elsewhere", "unknown-provider-with-base-url"],
)
def test_chat_takes_any_provider_and_model(
    capsys: pytest.CaptureFixture[str], argv: list[str], url: str, model_id: str
) -> None:
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post(url).respond(
            200, headers={"content-type": "text/event-stream"}, content=OPENAI_OK
        )
        code, out, err = run(capsys, "chat", argv[0], "hello", *argv[1:])

    assert (code, err) == (0, ""), err
    assert "hi there" in out
    assert json.loads(route.calls.last.request.content)["model"] == model_id


def test_chat_base_url_redirects_a_catalog_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post("http://127.0.0.1:4000/v1/messages").respond(
            200, headers={"content-type": "text/event-stream"}, content=TEXT.read_bytes()
        )
        code, _, err = run(
            capsys, "chat", "anthropic/claude-not-in-the-catalog", "hi",
            "--base-url", "http://127.0.0.1:4000",
        )  # fmt: skip

    assert (code, err) == (0, "")
    assert json.loads(route.calls.last.request.content)["model"] == "claude-not-in-the-catalog"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")

    assert code == 0
    assert out == f"stream-core {stream_core.__version__}\n"


# --- renderer and entry point ---------------------------------------------------------------


def render(body: bytes, api: str, *, color: bool) -> str:
    out = io.StringIO()
    model = Model(id="m", api=api, provider="test", base_url="https://render.invalid")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            options = StreamOptions(client=client, api_key="k", max_retries=0)
            renderer = Renderer(out, color=color)
            context = Context(messages=[UserMessage(content="hi")])
            async with stream_core.stream(model, context, options) as s:
                async for event in s:
                    renderer.handle(event)

    anyio.run(go)
    return out.getvalue()


def test_renderer_on_a_terminal_dims_thinking_and_defuses_escapes() -> None:
    body = THINKING.read_bytes().replace(b'"text":"1. **Pouch**', b'"text":"\\u001b[2J1. **Pouch**')
    out = render(body, "anthropic-messages", color=True)
    assert "\x1b[2mthinking:\x1b[0m" in out
    assert "\x1b[2mThe user wants\x1b[0m" in out
    # The model's own escape sequence is shown, not sent to the terminal.
    assert "\\x1b[2J1. **Pouch**" in out and "\x1b[2J" not in out


def test_renderer_without_color_writes_plain_text() -> None:
    out = render(THINKING.read_bytes(), "anthropic-messages", color=False)
    assert out.startswith("thinking:\n  The user wants two names")
    assert "\n\n1. **Pouch** - references their iconic bill pouch\n" in out
    assert "\x1b" not in out


def test_help_and_bad_arguments_return_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert main(["frobnicate"]) == 2
    assert main([]) == 2
    capsys.readouterr()


def test_console_script_points_at_main() -> None:
    # `stream-core` is the entry point; `python -m stream_core` is not needed.
    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    scripts = tomllib.loads(pyproject.read_text())["project"]["scripts"]
    assert scripts["stream-core"] == "stream_core._cli:main"


# --- the library never loads the command ----------------------------------------------------

NO_CLI = (
    "assert not any(m.startswith('stream_core._cli') for m in sys.modules), "
    "[m for m in sys.modules if m.startswith('stream_core.')]"
)

LIBRARY_USE = f"""
import sys
import anyio
import stream_core
{NO_CLI}
from stream_core.testing import replay_client

async def main():
    model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
    context = stream_core.Context(messages=[stream_core.UserMessage(content="hi")])
    options = stream_core.StreamOptions(api_key="k", client=replay_client({str(TEXT)!r}))
    async with stream_core.stream(model, context, options) as s:
        return [e async for e in s], await s.result()

events, message = anyio.run(main)
assert events and message.stop_reason == "stop", message
{NO_CLI}
print("ok")
"""


@pytest.mark.parametrize(
    "code",
    [f"import stream_core, sys; {NO_CLI}", LIBRARY_USE],
    ids=["import", "stream-a-replay"],
)
def test_the_library_never_loads_the_command(code: str) -> None:
    # In a fresh interpreter: this test process has imported the command already.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr


def test_no_library_module_imports_the_command() -> None:
    package = Path(stream_core.__file__).parent
    roots = [package, package.parent / "providers", package.parent / "contract_tests"]
    for path in (p for root in roots for p in root.rglob("*.py")):
        if package / "_cli" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any("_cli" in n.split(".") for n in names), f"{path}:{node.lineno}"
