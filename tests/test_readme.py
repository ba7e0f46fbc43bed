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
