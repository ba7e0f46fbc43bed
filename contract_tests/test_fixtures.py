"""Every registered provider over every recording of its API (CONTRACT 2, 5, 6).

Each case is replayed whole, one byte at a time, with CRLF line ends and in
hypothesis-chosen splits; every replay must pass the grammar and give the same message,
which must match the recording's `expect`.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Fixture,
    apis_under_test,
    cases_or_missing,
    check_expect,
    crlf,
    framing,
    load_fixtures,
    missing_recording,
    one_byte,
    replay,
    split_at,
    whole,
)
from stream_core.contract_tests.modern import check_modern, has_modern

_ANY = "any recording of the API (start with a plain text answer, expect: stop_reason stop)"
CASES = cases_or_missing(
    [f for api in apis_under_test() for f in load_fixtures(api)], apis_under_test(), _ANY
)


def test_every_provider_has_recordings() -> None:
    """If this fails: add `contract_tests/fixtures/<api>/` with at least one case."""
    missing = [api for api in apis_under_test() if not load_fixtures(api)]
    assert not missing, f"providers without fixtures: {missing_recording(missing, _ANY)}"


def _signature(fixture: Fixture, chunks: list[bytes]) -> dict:
    run = replay(fixture, chunks)
    assert_valid_event_stream(run.events)
    check_expect(run.message, fixture.expect)
    if has_modern(fixture.expect):
        check_modern(run.message, fixture.expect)
    # Wall-clock facts of the replay, not of the recording.
    return run.message.model_dump(exclude={"timestamp", "ttft_ms", "duration_ms"})


@pytest.mark.parametrize("fixture", CASES, ids=repr)
def test_recording_whole(fixture: Fixture) -> None:
    """If this fails: the provider's mapping of this vendor stream is off (see the diff)."""
    _signature(fixture, whole(fixture.body))


@pytest.mark.parametrize("fixture", CASES, ids=repr)
def test_recording_one_byte_chunks(fixture: Fixture) -> None:
    """If this fails: state is lost across chunk boundaries (lines, UTF-8, events)."""
    assert _signature(fixture, one_byte(fixture.body)) == _signature(fixture, whole(fixture.body))


@pytest.mark.parametrize("fixture", CASES, ids=repr)
def test_recording_crlf(fixture: Fixture) -> None:
    """If this fails: lines are split on LF only; SSE allows CRLF and CR."""
    if not framing(fixture.api).text_lines:
        pytest.skip("a binary framing has no line ends")
    converted = Fixture(fixture.api, fixture.name, crlf(fixture.body), fixture.meta)
    assert _signature(converted, whole(converted.body)) == _signature(fixture, whole(fixture.body))


@pytest.mark.parametrize("fixture", CASES, ids=repr)
def test_recording_random_splits(fixture: Fixture) -> None:
    """If this fails: some split of the body changes the events (hypothesis shows which)."""
    expected = _signature(fixture, whole(fixture.body))
    size = len(fixture.body)

    @settings(
        max_examples=8,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(st.integers(min_value=1, max_value=max(1, size - 1)), max_size=40))
    def check(cuts: list[int]) -> None:
        assert _signature(fixture, split_at(fixture.body, cuts)) == expected

    check()


_SECRET_HEADERS = {
    "authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    "set-cookie",
}
_SECRET_PATTERN = re.compile(
    rb"sk-(?:ant|proj|or)-[A-Za-z0-9_-]{16,}|Bearer [A-Za-z0-9._-]{20,}"
    rb"|AKIA[0-9A-Z]{16}|gsk_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}"
)


@pytest.mark.parametrize("fixture", CASES, ids=repr)
def test_recordings_hold_no_secrets(fixture: Fixture) -> None:
    """If this fails: scrub the recording (headers and body) before committing it."""
    leaked = _SECRET_HEADERS & {k.lower() for k in fixture.meta.get("headers", {})}
    assert not leaked, f"secret headers kept: {leaked}"
    assert not _SECRET_PATTERN.search(fixture.body)
