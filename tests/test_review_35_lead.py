"""What the lead's review of issue 35 found, written from the user's side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_core.contract_tests.kit import Fixture, check_expect, replay, whole

FIXTURES = Path(__file__).resolve().parent.parent / "contract_tests" / "fixtures"


@pytest.mark.parametrize(
    "name",
    [
        "vercel-ai__anthropic-code-execution-20250825.pptx-skill",
        "pydantic-ai__test_pause_turn_web_search_streaming_vcr.0",
    ],
)
def test_an_answer_showing_server_tools_keeps_its_multi_round_input(name: str) -> None:
    """A recording replayed without the request that asked for the server tools (as a
    user replays a vendor's stream, or a tool asked for through a native form) still
    reports the input the vendor counted over its sampling rounds (320,032 and 404,500
    tokens, past a 128k window): the answer itself shows the vendor ran a server tool."""
    folder = FIXTURES / "anthropic-messages"
    meta = json.loads((folder / f"{name}.json").read_text())
    meta.pop("request_tools", None)
    body = (folder / f"{name}.body").read_bytes()
    run = replay(Fixture("anthropic-messages", name, body, meta), whole(body))
    check_expect(run.message, meta["expect"])
    assert run.message.usage.clamped is None
