"""Run first (see conftest.py): a provider whose translator never marks the vendor's
terminal event fails nearly every other test with "stream ended before ..."; this test
names the cause once, before those failures.
"""

from __future__ import annotations

import pytest

import stream_core.provider
from stream_core.contract_tests.kit import (
    PLAIN_TEXT,
    apis_under_test,
    load_fixtures,
    missing_recording,
    replay,
    text_case,
    whole,
)

APIS = apis_under_test()


@pytest.mark.parametrize("api", APIS)
def test_the_terminal_event_finishes_the_message(api: str) -> None:
    """If this fails: on the vendor's terminal event the translator must set
    `assembler.finished = True` (CONTRACT 8)."""
    if not any(f.expect.get("stop_reason") == "stop" for f in load_fixtures(api)):
        pytest.skip(f"{api}: nothing to replay: {missing_recording([api], PLAIN_TEXT)}")
    fixture = text_case(api)
    message = replay(fixture, whole(fixture.body)).message
    error = message.error
    if error is not None and error.kind == "network" and "stream ended before" in error.message:
        wire = stream_core.provider.get_provider(api).wire
        terminal = wire.terminal_event if wire is not None else "its last event"
        pytest.fail(
            f"{fixture!r}: the whole recording was replayed and the message still ended "
            f"`network` ({error.message!r}): the translator never set "
            f"`assembler.finished = True` on the vendor's terminal event ({terminal}) "
            "(CONTRACT 8). Every other replay fails the same way until it does.",
            pytrace=False,
        )


# The collection hook in conftest.py puts this module's tests first.
test_the_terminal_event_finishes_the_message.run_first = True  # type: ignore[attr-defined]
