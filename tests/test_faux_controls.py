"""The faux model honours every portable control the way a vendor would (issue 28, point
1): a harness that sets them runs on it as written, and a script that contradicts the
call fails loudly, naming the script's turn."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from stream_core import Context, StreamOptions, Tool, UserMessage, complete
from stream_core.testing import faux_model, faux_text, faux_tool_call

LOOK = Tool(name="look", description="Look.", parameters={"type": "object"})
OTHER = Tool(name="other", description="Another.", parameters={"type": "object"})
CTX = Context(messages=[UserMessage(content="hi")], tools=[LOOK, OTHER])


class Weather(BaseModel):
    city: str
    temp: int


def run(model, **opts):  # type: ignore[no-untyped-def]
    return anyio.run(complete, model, CTX, StreamOptions(**opts))


def test_output_schema_reads_the_scripted_answer() -> None:
    m = faux_model(['{"city": "Paris", "temp": 18}', '{"city": "Paris"}'])
    good = run(m, output_schema=Weather)
    assert good.error is None and good.output == Weather(city="Paris", temp=18)
    assert m.requests[0]["output_schema"]["properties"]["city"] == {
        "title": "City",
        "type": "string",
    }
    bad = run(m, output_schema=Weather)
    assert bad.error is not None and bad.error.kind == "invalid_output"


@pytest.mark.parametrize(
    ("turn", "choice", "words"),
    [
        (
            faux_text("no call"),
            "required",
            "calls no tool, but the call set tool_choice='required'",
        ),
        (faux_tool_call("look", {}), "none", "calls 'look', but the call set tool_choice='none'"),
        (faux_tool_call("look", {}), {"tool": "other"}, "calls 'look', but the call set"),
    ],
)
def test_a_script_that_contradicts_tool_choice_fails_naming_its_turn(
    turn: object, choice: object, words: str
) -> None:
    m = faux_model([faux_text("first"), turn])
    run(m)
    message = run(m, tool_choice=choice)
    assert message.error is not None and message.error.kind == "invalid_request"
    assert (
        message.error.message.startswith("faux script turn 2 ") and words in message.error.message
    )


def test_tool_choice_the_script_agrees_with_passes() -> None:
    m = faux_model([faux_tool_call("look", {"at": "x"}), faux_text("plain")])
    assert run(m, tool_choice={"tool": "look"}).tool_calls()[0].name == "look"
    assert run(m, tool_choice="none").text() == "plain"


def test_stop_cuts_the_text_at_the_first_stop_sequence() -> None:
    m = faux_model(["one two END three", "no stop here"])
    cut = run(m, stop=["END", "two"])
    assert (cut.text(), cut.stop_reason) == ("one ", "stop")
    assert run(m, stop=["END"]).text() == "no stop here"


def test_max_tokens_cuts_text_and_tool_arguments() -> None:
    m = faux_model(["x" * 100, faux_tool_call("look", {"query": "a long query indeed"})])
    text = run(m, max_tokens=5)
    assert (len(text.text()), text.stop_reason) == (20, "length")
    call = run(m, max_tokens=3, tool_choice="required")
    assert call.stop_reason == "length"
    (cut,) = call.tool_calls()
    assert cut.truncated  # a cut call is failed, never run (CONTRACT)


def test_sampling_controls_are_recorded_on_the_call() -> None:
    m = faux_model(["ok"])
    message = run(m, temperature=0.3, top_p=0.9, top_k=5, seed=7, presence_penalty=0.1)
    assert message.error is None
    sent = m.requests[0]
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["seed"]) == (0.3, 0.9, 5, 7)
    assert sent["presence_penalty"] == 0.1
