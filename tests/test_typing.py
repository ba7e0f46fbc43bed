"""What a harness author's type checker sees: `mypy --strict` over a small harness."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy")

HARNESS = """
from typing import Any

from stream_core import (
    AssistantMessage, AssistantStream, Context, Message, Model, StreamOptions, TextContent,
    ToolResultMessage, UserMessage, dump_messages, load_messages, messages_only,
)
from stream_core.provider import register_provider

# A list mixing message kinds, passed everywhere a history goes.
history: list[Message] = [
    UserMessage(content="hi"),
    AssistantMessage(api="a", provider="p", model="m", content=[TextContent(text="x")]),
]
history.append(ToolResultMessage(tool_call_id="1", tool_name="t"))
context = Context(messages=history)
context.messages.extend(history)
dump_messages(history, "history.jsonl")
records = load_messages("history.jsonl")
kept: list[Message] = [r for r in records if isinstance(r, Message)]
kept = messages_only(records)


def last_text(messages: list[Message]) -> str:
    last = messages[-1]
    return last.text() if isinstance(last, AssistantMessage) else last.role


def my_stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    raise NotImplementedError


def wrong_stream(model: Model) -> AssistantStream:
    raise NotImplementedError


register_provider("my-api", my_stream)
register_provider("bad-api", wrong_stream)  # the one expected error
"""


def test_a_harness_type_checks_under_mypy_strict(tmp_path: Path) -> None:
    (tmp_path / "harness.py").write_text(textwrap.dedent(HARNESS))

    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "harness.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip

    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # Only the provider whose signature does not match the registry's protocol is refused.
    assert len(errors) == 1, done.stdout + done.stderr
    assert '"register_provider"' in errors[0] and "StreamFunction" in errors[0]
    bad_line = next(n for n, s in enumerate(HARNESS.splitlines(), 1) if "bad-api" in s)
    assert f"harness.py:{bad_line}:" in errors[0]
