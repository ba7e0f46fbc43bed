"""The testing kit as a harness author meets it: the README's snippets run as pasted, serve
scenarios drive a tool loop (Python and CLI), faux errors keep their kind, `replay --api`
decides, `record --api` and its `expect`, and the pytest plugin's fixtures."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from doc_pages import docs_text

import stream_core
from stream_core import Context, StreamOptions, UserMessage, complete_sync, get_model
from stream_core._cli import main
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_error,
    faux_model,
    load_scenario,
)

pytest_plugins = ["pytester"]

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
FIXTURES = ROOT / "contract_tests" / "fixtures"
DEMO = ROOT / "stream_core" / "demo"
TOOL_CALL = DEMO / "anthropic-thinking-tool.body"  # asks for get_forecast
ANSWER = FIXTURES / "anthropic-messages" / "llm-anthropic__test_prompt.0.body"  # text, stop
HELLO = Context(messages=[UserMessage(content="hi")])


def _readme_file(name: str) -> str:
    """The README's python block whose first line is `# tests/<name>`."""
    blocks = re.findall(r"```python\n(.*?)```", docs_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(f"# tests/{name}\n")]
    return block


def _forecast_folder(base: Path) -> Path:
    folder = base / "tests" / "scenarios" / "forecast"
    folder.mkdir(parents=True)
    shutil.copy(TOOL_CALL, folder / "1-call.body")
    shutil.copy(ANSWER, folder / "2-answer.body")
    return folder


# --- the README, run as pasted ---------------------------------------------------------------


def test_readme_tool_loop_with_a_serve_scenario_passes(pytester: pytest.Pytester) -> None:
    _forecast_folder(pytester.path)
    pytester.makepyfile(**{"tests/test_forecast_loop": _readme_file("test_forecast_loop.py")})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=1)


def test_readme_fixture_examples_pass(pytester: pytest.Pytester) -> None:
    recordings = pytester.path / "tests" / "recordings"
    recordings.mkdir(parents=True)
    shutil.copy(ANSWER, recordings / "hi.body")
    pytester.makepyfile(**{"tests/test_with_fixtures": _readme_file("test_with_fixtures.py")})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=3)


def test_the_plugin_lists_its_fixtures(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    out = result.stdout.str()
    for name in ("faux_model", "replay_client", "fake_vendor"):
        assert re.search(rf"^{name} .*stream_core", out, re.M), name


# --- serve scenarios, from Python ------------------------------------------------------------


def _ask(server: FakeVendor, model_id: str, text: str = "hi") -> stream_core.AssistantMessage:
    model = get_model("anthropic", "claude-sonnet-4-5").model_copy(update={"id": model_id})
    options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
    return complete_sync(model, Context(messages=[UserMessage(content=text)]), options)


def test_a_scenario_answers_in_turn_and_keeps_the_requests(tmp_path: Path) -> None:
    scenario = {"claude-sonnet-4-5": [TOOL_CALL, ANSWER]}
    with fake_vendor(scenarios=scenario) as server:
        first = _ask(server, "claude-sonnet-4-5", "one")
        second = _ask(server, "claude-sonnet-4-5", "two")
        third = _ask(server, "claude-sonnet-4-5", "three")
        other = _ask(server, "claude-haiku-4-5")
    assert first.stop_reason == "tool_use" and second.stop_reason == "stop"
    # Past the end: the vendor's own 400, naming the scenario, never retried.
    assert third.error is not None and third.error.kind == "invalid_request"
    assert "exhausted: 2 recording(s), this is request 3" in third.error.message
    assert other.error is not None and other.error.kind == "not_found"
    assert [r.status for r in server.requests] == [200, 200, 400, 404]
    assert [r.body["messages"][0]["content"][0]["text"] for r in server.requests[:3]] == [
        "one",
        "two",
        "three",
    ]
    assert server.requests[0].path == "/v1/messages"
    assert server.requests[0].answer == "claude-sonnet-4-5[1] anthropic-thinking-tool.body"
    assert server.requests[0].headers["x-api-key"] == "test-key"


def test_scenario_sources_folder_list_file_and_any_model(tmp_path: Path) -> None:
    folder = _forecast_folder(tmp_path)
    for n in (3, 10):  # numbers compare as numbers: 10 after 3
        shutil.copy(ANSWER, folder / f"{n}-more.body")
    assert [p.name for p in load_scenario(folder)] == [  # type: ignore[union-attr]
        "1-call.body",
        "2-answer.body",
        "3-more.body",
        "10-more.body",
    ]
    listing = tmp_path / "loop.txt"
    listing.write_text("# the tool call, then the answer\nanswer.body\n\ncall\n")
    shutil.copy(TOOL_CALL, tmp_path / "call.body")
    shutil.copy(ANSWER, tmp_path / "answer.body")
    assert load_scenario(listing) == [tmp_path / "answer.body", tmp_path / "call.body"]
    with pytest.raises(ValueError, match="line 2: no such recording: nope"):
        (tmp_path / "bad.txt").write_text("answer.body\nnope\n")
        load_scenario(tmp_path / "bad.txt")
    # "*" answers any model no recording or other scenario names.
    with fake_vendor(FIXTURES, scenarios={"*": listing}) as server:
        by_name = _ask(server, "vercel-ai__anthropic-text")
        anything = _ask(server, "claude-opus-4-1")
    assert by_name.text().startswith("Hello! I'm doing well")
    assert anything.stop_reason == "stop" and server.requests[1].answer.startswith("claude-opus")


# --- serve scenarios, from the command line --------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_serve_scenario_drives_a_tool_loop_and_logs_requests(tmp_path: Path) -> None:
    folder = _forecast_folder(tmp_path)
    log = tmp_path / "requests.jsonl"
    port = _free_port()
    cmd = [
        sys.executable, "-c", "from stream_core._cli import main; raise SystemExit(main())",
        "serve", "--scenario", f"claude-sonnet-4-5={folder}", "--port", str(port),
        "--log-requests", str(log),
    ]  # fmt: skip
    server = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        assert "scenarios: claude-sonnet-4-5 (2 in turn)" in banner, banner
        base = f"http://127.0.0.1:{port}"
        model = get_model("anthropic", "claude-sonnet-4-5")
        options = StreamOptions(base_url=base, api_key="test-key", max_retries=0)
        context = Context(messages=[UserMessage(content="Rain in Paris?")])
        call = complete_sync(model, context, options)
        assert call.stop_reason == "tool_use"
        context.messages.append(call)
        context.messages.append(
            stream_core.ToolResultMessage(
                tool_call_id=call.tool_calls()[0].id,
                tool_name=call.tool_calls()[0].name,
                content=[stream_core.TextContent(text="rain")],
            )
        )
        answer = complete_sync(model, context, options)
        assert answer.stop_reason == "stop" and answer.text()
    finally:
        server.terminate()
        server.wait(10)
        server.stderr.close()  # type: ignore[union-attr]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["n"], e["model"], e["status"]) for e in lines] == [
        (1, "claude-sonnet-4-5", 200),
        (2, "claude-sonnet-4-5", 200),
    ]
    assert lines[1]["body"]["messages"][-1]["content"][0]["type"] == "tool_result"
    assert "x-api-key" not in log.read_text() and "test-key" not in log.read_text()


def test_cli_serve_on_a_busy_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["serve", str(FIXTURES), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 1 and err == f"error: port {port} is in use\n"


def test_cli_serve_needs_recordings_or_a_scenario(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["serve"]) == 2
    assert "give a folder of recordings (DIR) or --scenario" in capsys.readouterr().err
    assert main(["serve", "--scenario", f"m={tmp_path / 'none'}"]) == 2
    assert "no such folder or file" in capsys.readouterr().err


# --- faux errors -----------------------------------------------------------------------------


def _once(model: Any, options: StreamOptions | None = None) -> stream_core.AssistantMessage:
    return complete_sync(model, HELLO, options or StreamOptions(max_retries=0))


@pytest.mark.parametrize("status", [None, 400])
def test_a_faux_error_keeps_the_kind_it_names(status: int | None) -> None:
    message = _once(faux_model([faux_error("context_overflow", status=status)]))
    assert message.error is not None and message.error.kind == "context_overflow"
    assert message.error.status_code == status and not message.error.retryable


@pytest.mark.parametrize("status", [None, 429])
def test_a_faux_error_can_ask_to_wait(status: int | None) -> None:
    message = _once(faux_model([faux_error("rate_limit", status=status, retry_after=7)]))
    assert message.error is not None and message.error.kind == "rate_limit"
    assert message.error.retry_after == 7 and message.error.retryable


@pytest.mark.parametrize("status", [None, 529])
def test_a_retried_faux_error_that_exhausts_the_script_says_so(status: int | None) -> None:
    model = faux_model([faux_error("overloaded", status=status)])
    message = _once(model, StreamOptions(retry_backoff=0.001))
    assert message.error is not None and message.error.kind == "overloaded"
    assert message.error.message.endswith(
        "faux overloaded error (the pipeline retried it: the faux script had no further answer)"
    )
    assert len(model.requests) == 2  # the call and one retry, then it stopped
    # A new call past the end is still the plain exhaustion.
    again = _once(model)
    assert again.error is not None and again.error.kind == "invalid_request"
    assert "faux script exhausted" in again.error.message


# --- replay and record -----------------------------------------------------------------------


PLAIN_ANSWER = {
    "id": "msg_plain",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "Hello from a proxy"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 4},
}


def test_replay_api_decides_for_a_plain_json_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = tmp_path / "litellm.body"  # no sidecar: nothing says what the body is but --api
    body.write_text(json.dumps(PLAIN_ANSWER))
    code = main(["replay", str(body), "--api", "anthropic-messages", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    message = stream_core.AssistantMessage.model_validate_json(out)
    assert message.text() == "Hello from a proxy" and message.stop_reason == "stop"
    assert message.usage.total_tokens == 9


def _record(args: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    code = main(["record", *args])
    capsys.readouterr()
    return code


def test_record_api_picks_the_wire_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefghij")
    name = "pydantic-ai__test_openai_responses_stream.0"
    with fake_vendor(FIXTURES) as server:
        out = tmp_path / "resp"
        args = [f"openai/{name}", "hi", "-o", str(out), "--base-url", server.url + "/v1"]
        assert _record([*args, "--api", "openai-responses"], capsys) == 0
        assert server.requests[-1].path == "/v1/responses"
        assert _record([*args, "--api", "no-such-api"], capsys) == 2
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["api"] == "openai-responses"
    want = json.loads((FIXTURES / "openai-responses" / f"{name}.json").read_text())["expect"]
    assert meta["expect"]["content"] == want["content"]


def test_record_leaves_generated_tool_ids_out_of_expect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    gemini = "pydantic-ai__test_google_model_iter_stream.1"
    anthropic = "vercel-ai__anthropic-json-tool.1"
    with fake_vendor(FIXTURES) as server:
        assert _record([f"google/{gemini}", "hi", "-o", str(tmp_path / "g"),
                        "--base-url", server.url], capsys) == 0  # fmt: skip
        assert _record([f"anthropic/{anthropic}", "hi", "-o", str(tmp_path / "a"),
                        "--base-url", server.url], capsys) == 0  # fmt: skip
    g_calls = [b for b in json.loads((tmp_path / "g.json").read_text())["expect"]["content"]
               if b["type"] == "tool_call"]  # fmt: skip
    assert g_calls and all("id" not in c for c in g_calls)  # Gemini sent none
    (a_call,) = json.loads((tmp_path / "a.json").read_text())["expect"]["content"]
    assert a_call["id"] == "toolu_01KFbKqPYSuAKujiL6mTfzYA"  # the vendor's own id stays
    # The recording still satisfies its own expect, through the contract kit.
    from stream_core.contract_tests.kit import check_expect

    body = (tmp_path / "g.body").read_bytes()
    model = stream_core.Model(id="m", api="google-generative-ai", provider="x", base_url="http://x")
    from stream_core.testing import replay_client

    options = StreamOptions(api_key="k", client=replay_client(body), max_retries=0)
    message = anyio.run(stream_core.complete, model, HELLO, options)
    check_expect(message, json.loads((tmp_path / "g.json").read_text())["expect"])


def test_fake_vendor_needs_something_to_serve() -> None:
    with pytest.raises(ValueError, match="recordings or scenarios"):
        fake_vendor()


NEVER_DONE = """
import dataclasses

from stream_core.providers import anthropic as base

API = base.API


def _translator(asm):
    inner = base.WIRE.translator(asm)

    def translate(event, data):
        inner(event, data)
        asm.finished = False  # the bug: the terminal event never finishes the message

    return translate


WIRE = dataclasses.replace(base.WIRE, translator=_translator)


def stream(model, context, options=None):
    return WIRE.open(model, context, options)
"""


def test_a_cascade_is_reported_once_and_the_rest_say_they_follow(
    pytester: pytest.Pytester,
) -> None:
    """Issue 28, point 3: a translator that never sets `finished` fails most of the
    suite; the first failure names the cause, and every later one says it follows."""
    from stream_core.contract_tests.kit import FIXTURES

    pytester.makepyfile(never_done=NEVER_DONE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--stream-core-provider=never_done",
        f"--stream-core-fixtures={FIXTURES}", "-q", "--tb=short", "-rN",
    )  # fmt: skip
    out = result.stdout.str()  # `-rN`: no short summary, whose width varies by terminal
    first = out.index("test_the_terminal_event_finishes_the_message")
    assert "never set `assembler.finished = True`" in out
    follows = out.count("follows from the first failure for anthropic-messages")
    failed = result.parseoutcomes().get("failed", 0)
    assert follows >= 5 and first < out.index("follows from the first failure"), out[-3000:]
    assert follows <= failed - 1  # once per failure after the first, never twice
