"""What every message carries for a harness's logs: the model the vendor served, its request
id, time to first update and total duration; kept through JSON and the JSONL history."""

from __future__ import annotations

import io
import json
from collections import deque
from typing import Any

import anyio
import pytest

from stream_core import AssistantMessage, dump_messages, get_model, load_messages
from stream_core.contract_tests.kit import Run, run_provider, sse_response
from stream_core.provider import Assembler


def _openai(*chunks: dict[str, Any], headers: dict[str, str] | None = None) -> Run:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    body += b"data: [DONE]\n\n"
    response = sse_response(
        [body], headers={"content-type": "text/event-stream", **(headers or {})}
    )

    async def main() -> Run:
        return await run_provider("openai-completions", [response])

    return anyio.run(main)


def _chunk(model: Any, text: str = "", finish: str | None = None) -> dict[str, Any]:
    delta = {"content": text} if text else {}
    return {"id": "c1", "model": model, "choices": [{"delta": delta, "finish_reason": finish}]}


def test_openai_served_model_and_request_id() -> None:
    run = _openai(
        _chunk("gpt-4o-2024-08-06", "Hi"),
        _chunk("gpt-4o-2024-08-06", finish="stop"),
        headers={"x-request-id": "req_abc"},
    )
    m = run.message
    assert m.model == "contract-model"  # what was asked for stays as is
    assert m.response_model == "gpt-4o-2024-08-06"
    assert m.request_id == "req_abc"
    assert m.ttft_ms is not None and m.duration_ms is not None
    assert 0 <= m.ttft_ms <= m.duration_ms


@pytest.mark.parametrize("junk", [None, 7, 1e300, ["gpt"], {"id": "gpt"}, True, ""])
def test_a_served_model_that_is_not_a_string_is_ignored(junk: Any) -> None:
    run = _openai(_chunk(junk, "Hi"), _chunk(junk, finish="stop"))
    assert run.message.stop_reason == "stop" and run.message.text() == "Hi"
    assert run.message.response_model is None


def test_assembler_keeps_only_string_models() -> None:
    message = AssistantMessage(api="a", provider="p", model="m")
    asm = Assembler(message, get_model("anthropic", "claude-sonnet-4-5"), {}, deque())
    for junk in (None, 3, [], {}, b"x", ""):
        asm.set_response_model(junk)
    assert message.response_model is None
    asm.set_response_model("served-1")
    assert message.response_model == "served-1"


def test_no_request_id_header_leaves_it_empty() -> None:
    run = _openai(_chunk("m", "Hi"), _chunk("m", finish="stop"))
    assert run.message.request_id is None


def test_a_message_without_content_has_a_duration_but_no_first_update() -> None:
    run = _openai(_chunk("m", finish="stop"))
    assert run.message.duration_ms is not None and run.message.ttft_ms is None


def test_the_facts_round_trip_through_jsonl() -> None:
    message = AssistantMessage(
        api="a",
        provider="p",
        model="alias",
        response_model="alias-2025-01-01",
        request_id="req_1",
        ttft_ms=120.5,
        duration_ms=900.25,
        timestamp=1,
    )
    out = io.StringIO()
    dump_messages([message], out)
    (loaded,) = load_messages(io.StringIO(out.getvalue()))
    assert loaded == message
    assert AssistantMessage.model_validate_json(message.model_dump_json()) == message


def test_an_older_record_without_the_facts_still_loads() -> None:
    line = (
        '{"role":"assistant","content":[],"api":"a","provider":"p","model":"m",'
        '"stop_reason":"stop","timestamp":5}\n'
    )
    (loaded,) = load_messages(io.StringIO(line))
    assert isinstance(loaded, AssistantMessage)
    assert (loaded.response_model, loaded.request_id, loaded.ttft_ms, loaded.duration_ms) == (
        None,
        None,
        None,
        None,
    )
