"""Hostile structured answers and histories (issue 23, points 2 and 9, and the JSONL Low
items): every answer size ends with one bounded outcome, validation never holds an event
loop (nor the sync facade's shared one), `total_timeout` still ends the call, and no
history line is written that JSON cannot read back.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import anyio
import httpx
import pytest
from loop_watch import with_heartbeat
from pydantic import BaseModel, field_validator

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    HistoryFormatError,
    StreamOptions,
    UserMessage,
    complete_sync,
    dump_messages,
    load_messages,
)

MODEL = stream_core.get_model("openai", "gpt-4.1", api="openai-completions")
CONTEXT = Context(messages=[UserMessage(content="answer")])
GUARD = 30.0  # seconds: against a hang, not a timing assertion


class Numbers(BaseModel):
    items: list[int]


def _body(answer: str, piece: int = 256 * 1024) -> bytes:
    chunks = [
        b"data: "
        + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {"content": p}}]}).encode()
        + b"\n\n"
        for p in (answer[i : i + piece] for i in range(0, len(answer), piece))
    ]
    end = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return b"".join(chunks) + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


def _options(answer: str, schema: Any, **more: Any) -> StreamOptions:
    body = _body(answer)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return StreamOptions(api_key="sk-test-0000", client=client, output_schema=schema, **more)


def _strings(megabytes: float) -> str:
    return json.dumps({"items": ["ab"] * int(megabytes * 1024 * 1024 / 6)})


# --- point 2: a bounded outcome, the loop free ---------------------------------------------


@pytest.mark.anyio
async def test_a_huge_wrong_answer_gives_a_short_error_and_keeps_the_loop_ticking() -> None:
    answer = _strings(3)
    work = stream_core.complete(MODEL, CONTEXT, _options(answer, Numbers))
    message, gaps = await with_heartbeat(work, guard=GUARD)
    assert message.error is not None and message.error.kind == "invalid_output"
    assert message.stop_reason == "error" and message.output is None
    assert message.text() == answer  # what was received is kept
    error = message.error.message
    assert len(error) < 2_000
    assert "items.0: Input should be a valid integer" in error
    assert "524,288 problems in all" in error
    # Building every error on the loop stalled it for seconds (21 s at 10 MB); off the loop
    # the heartbeat keeps ticking (the GIL is shared, so the bound is loose on purpose).
    assert max(gaps) < 2.0


@pytest.mark.anyio
@pytest.mark.parametrize("schema", [Numbers, {"type": "object"}], ids=["class", "dict"])
async def test_an_answer_over_the_limit_is_not_read(schema: Any) -> None:
    answer = _strings(5)
    with anyio.fail_after(GUARD):
        message = await stream_core.complete(MODEL, CONTEXT, _options(answer, schema))
    assert message.error is not None and message.error.kind == "invalid_output"
    assert "over the 4,194,304" in message.error.message
    assert len(message.error.message) < 300
    assert len(message.text()) == len(answer)


@pytest.mark.anyio
async def test_a_few_problems_are_all_listed() -> None:
    message = await stream_core.complete(
        MODEL, CONTEXT, _options('{"items": [1, "x", 3]}', Numbers)
    )
    assert message.error is not None
    assert message.error.message == (
        "the answer does not match Numbers: items.1: Input should be a valid integer, "
        "unable to parse string as an integer"
    )


# --- point 9: validators that are slow, raise, or meet numbers JSON cannot hold -----------

_release = threading.Event()
_entered = threading.Event()


class Slow(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def wait(cls, v: int) -> int:
        _entered.set()
        _release.wait(10)
        return v


class Raises(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def boom(cls, v: int) -> int:
        raise RuntimeError("the validator broke")


def test_a_slow_validator_does_not_hold_other_threads_sync_calls() -> None:
    _release.clear()
    _entered.clear()
    slow: list[AssistantMessage] = []
    thread = threading.Thread(
        target=lambda: slow.append(complete_sync(MODEL, CONTEXT, _options('{"value": 1}', Slow)))
    )
    thread.start()
    try:
        assert _entered.wait(GUARD)
        # The slow answer is being validated; another thread's call still completes.
        quick = complete_sync(MODEL, CONTEXT, _options('{"value": 2}', {"type": "object"}))
        assert quick.output == {"value": 2}
        assert not slow  # the slow one is still waiting for the release
    finally:
        _release.set()
        thread.join(GUARD)
    assert slow[0].output == Slow(value=1)


@pytest.mark.anyio
async def test_total_timeout_ends_a_call_whose_validator_hangs() -> None:
    _release.clear()
    try:
        with anyio.fail_after(GUARD):
            message = await stream_core.complete(
                MODEL, CONTEXT, _options('{"value": 1}', Slow, total_timeout=0.5)
            )
    finally:
        _release.set()
    assert message.error is not None and message.error.kind == "timeout"
    assert message.text() == '{"value": 1}' and message.output is None


@pytest.mark.anyio
async def test_a_validator_raising_any_exception_is_invalid_output() -> None:
    message = await stream_core.complete(MODEL, CONTEXT, _options('{"value": 1}', Raises))
    assert message.error is not None and message.error.kind == "invalid_output"
    assert "RuntimeError: the validator broke" in message.error.message


@pytest.mark.anyio
@pytest.mark.parametrize("number", ["1e400", "-1e400"])
async def test_a_number_beyond_a_float_is_invalid_output_not_null(number: str) -> None:
    answer = '{"value": ' + number + "}"
    message = await stream_core.complete(MODEL, CONTEXT, _options(answer, {"type": "object"}))
    assert message.error is not None and message.error.kind == "invalid_output"
    assert "beyond a float" in message.error.message
    saved = io.StringIO()
    dump_messages([message], saved)  # the text, kept as received, saves and reloads
    assert load_messages(io.StringIO(saved.getvalue()))[0].text() == answer  # type: ignore[union-attr]


# --- JSONL: every line readable, every failure naming its line ----------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "line 2: nested too deeply"),
        ('{"role": "x", "n": ' + "9" * 5_000 + "}", "line 2: cannot be read: an integer of more"),
        ('{"role": "x", "cost": 1e400}', "line 2: holds 1e400"),
        ('{"role": "x", "n": NaN}', "line 2: holds NaN"),
        ('{"role": "x", "n": -Infinity}', "line 2: holds -Infinity"),
    ],
    ids=["deep", "digits", "1e400", "nan", "infinity"],
)
def test_a_hostile_history_line_is_a_clear_error_naming_it(line: str, said: str) -> None:
    with pytest.raises(HistoryFormatError, match=said) as raised:
        load_messages(io.StringIO('{"role": "x"}\n' + line + "\n"))
    assert raised.value.line == 2
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_no_line_json_cannot_read_is_ever_written(bad: float, tmp_path: Any) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"role":"x"}\n')
    with pytest.raises(ValueError, match="record 1: it holds NaN or an infinite number"):
        dump_messages([{"role": "y"}, {"role": "z", "cost": bad}], path, append=True)
    assert path.read_text() == '{"role":"x"}\n'  # nothing was written, nothing lost
