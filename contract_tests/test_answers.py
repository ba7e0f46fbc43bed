"""A non-streamed JSON answer (a proxy that ignored `stream: true`), for every provider
that reads one (`WireAPI.parse_response`, CONTRACT 7).

The recordings are the API's own with `content-type: application/json`; test_fixtures.py
replays them like any other, this module makes sure each such provider has one and that
it is read as an answer, not a stream.
"""

from __future__ import annotations

import pytest

import stream_core
import stream_core.provider
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    JSON_ANSWER,
    Fixture,
    apis_under_test,
    cases_or_missing,
    check_expect,
    load_fixtures,
    missing_recording,
    one_byte,
    replay,
)


def _reads_answers(api: str) -> bool:
    wire = stream_core.provider.get_provider(api).wire
    return wire is not None and wire.parse_response is not None


def _answers(api: str) -> list[Fixture]:
    return [
        f for f in load_fixtures(api) if not f.streamed and int(f.meta.get("status") or 200) < 300
    ]


READERS = [api for api in apis_under_test() if _reads_answers(api)]
_NO_READER = pytest.param(
    None,
    id="no-parse_response",
    marks=pytest.mark.skip(
        reason=f"{', '.join(apis_under_test()) or 'no API'}: WireAPI.parse_response is not "
        "set, so a non-streamed JSON answer (a proxy that ignored stream: true) ends the "
        "stream `protocol` and there is no answer reader to check; to read one, set "
        f"parse_response and {missing_recording(apis_under_test(), JSON_ANSWER)}"
    ),
)


@pytest.mark.parametrize("api", READERS or [_NO_READER])
def test_a_provider_reading_answers_has_a_recorded_answer(api: str) -> None:
    """If this fails: add a recording of the vendor's non-streamed JSON answer, with
    `"headers": {"content-type": "application/json"}` in its .json."""
    assert _answers(api), (
        f"{api}: parse_response is set but no answer is recorded: "
        f"{missing_recording([api], JSON_ANSWER)}"
    )


@pytest.mark.parametrize(
    "fixture",
    [f for api in READERS for f in _answers(api)]
    or [_NO_READER if not READERS else cases_or_missing([], READERS, JSON_ANSWER)[0]],
    ids=repr,
)
def test_a_recorded_answer_is_read_whole(fixture: Fixture) -> None:
    """If this fails: parse_response must make the same assembler calls as the stream would
    and end with `finished = True`; the answer may arrive in any number of reads."""
    run = replay(fixture, one_byte(fixture.body))
    assert_valid_event_stream(run.events)
    assert run.message.error is None or "stream ended before" not in run.message.error.message
    check_expect(run.message, fixture.expect)
