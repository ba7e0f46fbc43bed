"""The README's quick start runs as pasted (against recorded responses, offline)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import respx
from stream_core.contract_tests.kit import sse_response

from stream_core._cli import demo_body

README = Path(__file__).parents[1] / "README.md"
TEXT_BODY = (
    Path(__file__).parents[1]
    / "contract_tests/fixtures/anthropic-messages/llm-anthropic__test_prompt.0.body"
).read_bytes()


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    first_block = text.split("```")[1]
    assert "uv run stream-core demo" in first_block and "uv run pytest" in first_block


def test_quick_start_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme-test-0000000000")
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post("https://api.anthropic.com/v1/messages").mock(
            side_effect=[
                sse_response([demo_body("anthropic-thinking-tool.body")]),
                sse_response([TEXT_BODY]),
            ]
        )
        exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme"})
    assert route.call_count == 2
    second = route.calls[1].request.content.decode()
    assert '"tool_result"' in second  # the tool call was answered before the next request
    out = capsys.readouterr().out
    assert "Captain" in out and "stop" in out


def test_sync_quick_start_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text()
    setup = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S)
    sync = re.search(r"### Without async\n.*?```python\n(.*?)```", text, re.S)
    assert setup is not None and sync is not None
    # The sync block uses the quick start's names; define them without its async run.
    definitions = "\n".join(
        line for line in setup.group(1).splitlines() if not line.startswith("anyio.run(")
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme-test-0000000000")
    namespace = {"__name__": "readme"}
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post("https://api.anthropic.com/v1/messages").mock(
            side_effect=[
                sse_response([demo_body("anthropic-thinking-tool.body")]),
                sse_response(
                    [TEXT_BODY],
                    headers={"content-type": "text/event-stream", "request-id": "req_readme"},
                ),
            ]
        )
        exec(compile(definitions, "README.md", "exec"), namespace)
        exec(compile(sync.group(1), "README.md", "exec"), namespace)
    assert route.call_count == 2
    second = route.calls[1].request.content.decode()
    assert '"tool_result"' in second  # the tool call was answered before the next request
    out = capsys.readouterr().out
    assert "Captain" in out and "stop" in out and "req_readme" in out
    assert "claude-sonnet-4-5" in out  # the served model, as the vendor reported it
