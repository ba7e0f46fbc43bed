"""Issue 34's testing points, checked again from the user's side.

- `fake_vendor(scenarios={m.id: [faux_tool_call(...), "final"]})` answers a tool loop for
  every API it serves, Bedrock included: a Bedrock model id has a `:` in it
  (`amazon.nova-2-lite-v1:0`), and the server used to read the model from the path only
  up to that `:`, answering every Bedrock request 404 "not found".
- `--stream-core-fixtures` pointed at a folder whose recordings sit in a subfolder named
  after no API under test (`recordings/acme/` for the API `acme-chat`) says the layout it
  expected, instead of ignoring them and failing later for want of a recording.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    ErrorKind,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolResultMessage,
    UserMessage,
    complete,
    complete_sync,
    get_model,
)
from stream_core.testing import FauxTurn, fake_vendor, faux_error, faux_tool_call

pytest_plugins = ["pytester"]

FORECAST = Tool(
    name="get_forecast",
    description="The forecast for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
MODELS = {
    "anthropic-messages": ("anthropic", "claude-sonnet-4-5"),
    "openai-completions": ("openai", "gpt-4.1"),
    "google-generative-ai": ("google", "gemini-2.5-flash"),
    "bedrock-converse-stream": ("amazon-bedrock", "amazon.nova-2-lite-v1:0"),
    "mistral-conversations": ("mistral", "codestral-latest"),
}
LOCAL = {
    "openai-responses": Model(
        id="gpt-4.1", api="openai-responses", provider="openai", base_url="http://r.test/v1"
    ),
    "ollama-chat": Model(
        id="llama3.2", api="ollama-chat", provider="ollama", base_url="http://o.test"
    ),
}
APIS = [*MODELS, *LOCAL]


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def _model(api: str) -> Model:
    if api in LOCAL:
        return LOCAL[api]
    return get_model(*MODELS[api])


def _script() -> list[str | FauxTurn]:
    return [faux_tool_call("get_forecast", {"city": "Paris"}), "final"]


def _answer_tools(context: Context, message: AssistantMessage) -> None:
    """What a harness's tool loop does between the calls."""
    context.messages.append(message)
    for call in message.tool_calls():
        context.messages.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text="rain, 14 °C")],
            )
        )


@pytest.mark.parametrize("api", APIS)
def test_a_scripted_tool_loop_is_answered_for_every_api(api: str) -> None:
    model = _model(api)
    with fake_vendor(scenarios={model.id: _script()}) as server:
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
        context = Context(tools=[FORECAST], messages=[UserMessage(content="Rain in Paris?")])
        first = complete_sync(model, context, options)
        _answer_tools(context, first)
        second = complete_sync(model, context, options)
    assert first.error is None and first.stop_reason == "tool_use", (api, first.error)
    assert [c.name for c in first.tool_calls()] == ["get_forecast"]
    assert second.error is None and second.stop_reason == "stop", (api, second.error)
    assert second.text() == "final"
    assert [(r.model, r.status) for r in server.requests] == [(model.id, 200)] * 2


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["bedrock-converse-stream", "google-generative-ai"])
async def test_a_scripted_tool_loop_is_answered_to_async_calls(api: str) -> None:
    model = _model(api)
    with fake_vendor(scenarios={model.id: _script()}) as server:
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
        context = Context(tools=[FORECAST], messages=[UserMessage(content="Rain in Paris?")])
        first = await complete(model, context, options)
        _answer_tools(context, first)
        with anyio.fail_after(30):  # a guard, not a speed
            second = await complete(model, context, options)
    assert first.stop_reason == "tool_use", first.error
    assert second.stop_reason == "stop" and second.text() == "final", second.error


def test_the_plugin_fixture_serves_a_bedrock_tool_loop(fake_vendor: object) -> None:
    model = _model("bedrock-converse-stream")
    server = fake_vendor(scenarios={model.id: _script()})  # type: ignore[operator]
    options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
    context = Context(tools=[FORECAST], messages=[UserMessage(content="Rain in Paris?")])
    first = complete_sync(model, context, options)
    _answer_tools(context, first)
    second = complete_sync(model, context, options)
    assert (first.stop_reason, second.stop_reason) == ("tool_use", "stop"), second.error


PROVIDER = """
from stream_core.providers.anthropic import API, WIRE, stream  # noqa: F401
"""


def _copy_recordings(target: Path) -> None:
    from stream_core.contract_tests.kit import FIXTURES

    target.mkdir(parents=True)
    for body in sorted((FIXTURES / "anthropic-messages").glob("*.body"))[:3]:
        shutil.copy(body, target / body.name)
        if body.with_suffix(".json").exists():
            shutil.copy(body.with_suffix(".json"), target / body.with_suffix(".json").name)


@pytest.mark.slow
def test_recordings_in_a_subfolder_named_after_no_api_say_the_layout(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(my_provider=PROVIDER)
    root = pytester.path / "tests" / "recordings"
    _copy_recordings(root / "anthropic")  # the vendor's name, not the API's

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--stream-core-provider=my_provider",
        f"--stream-core-fixtures={root}", "-q",
    )  # fmt: skip

    said = result.stderr.str() + result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, said[-2000:]
    assert "anthropic/" in said and "anthropic-messages/" in said and "<api>/" in said


@pytest.mark.slow
def test_a_folder_with_an_api_subfolder_beside_others_is_taken(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(my_provider=PROVIDER)
    root = pytester.path / "tests" / "recordings"
    _copy_recordings(root / "anthropic-messages")
    _copy_recordings(root / "notes")  # other recordings beside: not refused

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--stream-core-provider=my_provider",
        f"--stream-core-fixtures={root}", "-q", "--co",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, (result.stdout.str() + result.stderr.str())[-2000:]


HTTP_KINDS: dict[ErrorKind, int] = {
    "auth": 401,
    "not_found": 404,
    "rate_limit": 429,
    "overloaded": 529,
    "server": 500,
    "invalid_request": 400,
    "context_overflow": 400,
}


@pytest.mark.parametrize("api", APIS)
def test_an_http_error_turn_is_served_as_its_kind(api: str) -> None:
    # faux_model says `faux_error("context_overflow", status=400)` is context_overflow; the
    # same script through fake_vendor came back invalid_request on every API.
    model = _model(api)
    turns: list[str | FauxTurn] = [faux_error(k, status=s) for k, s in HTTP_KINDS.items()]
    with fake_vendor(scenarios={model.id: turns}) as server:
        options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
        back = {}
        for kind in HTTP_KINDS:
            message = complete_sync(model, Context(messages=[UserMessage(content="hi")]), options)
            back[kind] = message.error.kind if message.error else None
    assert back == {k: k for k in HTTP_KINDS}, api


BLOCKED = """
import importlib, importlib.abc, io, json, pkgutil, sys, tempfile
from pathlib import Path


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest", "respx", "hypothesis"):
            raise ModuleNotFoundError(f"No module named {name!r} (a plain install)")
        return None


sys.meta_path.insert(0, Absent())
import stream_core.testing
from stream_core._cli import main

for info in pkgutil.iter_modules(stream_core.testing.__path__):
    if info.name != "pytest_plugin":
        importlib.import_module(f"stream_core.testing.{info.name}")
with tempfile.TemporaryDirectory() as folder:
    script = Path(folder, "turns.json")
    script.write_text(json.dumps(["Hello.", {"content": [{"type": "text", "text": "Hi"}]}]))
    out = Path(folder, "rec")
    for api in ("anthropic-messages", "bedrock-converse-stream", "ollama-chat"):
        code = main(["synthesize", str(script), "--api", api, "--out", str(out / api)])
        assert code == 0, api
    sys.argv = ["stream-core", "serve", "--help"]
    try:
        main(["serve", "--help"])
    except SystemExit as exc:
        assert exc.code == 0, exc.code
print("plain ok")
"""


def test_the_helpers_and_commands_import_no_test_tool() -> None:
    # A fast guard beside the slow wheel install (tests/test_plain_install.py): every
    # helper module, `synthesize` and `serve` run with pytest, respx and hypothesis absent.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", BLOCKED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "plain ok" in done.stdout, done.stdout + done.stderr


def test_synthesize_takes_an_answer_object_without_api_provider_or_model(
    tmp_path: Path,
) -> None:
    # The documented script: "an object an AssistantMessage (text, tool calls, ...)"; it
    # was refused for want of `api`, `provider` and `model`, which the script cannot know.
    import io
    import json

    from stream_core._cli import main

    script = tmp_path / "turns.jsonl"
    call = {"type": "tool_call", "id": "call_1", "name": "get_forecast", "arguments": {}}
    lines = [{"content": [call], "stop_reason": "tool_use"}, "final"]
    script.write_text("\n".join(json.dumps(line) for line in lines))
    err = io.StringIO()
    code = main(["synthesize", str(script), "--api", "openai-completions",
                 "--out", str(tmp_path / "rec")])  # fmt: skip
    assert code == 0, err.getvalue()
    assert sorted(p.name for p in (tmp_path / "rec").iterdir()) == [
        "1.body", "1.json", "2.body", "2.json",
    ]  # fmt: skip
