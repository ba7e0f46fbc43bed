"""Server tools, for every provider that declares them (`WireAPI.server_tools`).

A provider whose table names a server tool must show, on a recording, that what the vendor
runs itself is kept: a recording whose `expect` lists `server_tools` (the modern fields of
fixtures/INDEX.md) or, for a scripted one (`vendor_bytes` of a faux turn with a
`ServerToolCall`), whose `content` lists a `server_tool_call` or `server_tool_result`. Each
such recording is replayed whole and checked with `check_expect` and `check_modern`.
"""

from __future__ import annotations

import pytest

import stream_core.provider
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Fixture,
    apis_under_test,
    cases_or_missing,
    check_expect,
    load_fixtures,
    missing_recording,
    replay,
    whole,
)
from stream_core.contract_tests.modern import check_modern

SERVER_TOOL_RECORDING = (
    "a stream in which the vendor runs one of its own tools (expect: `server_tools` as in "
    "fixtures/INDEX.md 'Modern-feature fields', or vendor_bytes of a faux_server_tool turn)"
)
_SERVER_BLOCKS = ("server_tool_call", "server_tool_result")


def _declares_server_tools(api: str) -> bool:
    wire = stream_core.provider.get_provider(api).wire
    return wire is not None and bool(wire.server_tools)


def _server_tool_recordings(api: str) -> list[Fixture]:
    return [
        f
        for f in load_fixtures(api)
        if f.expect.get("server_tools")
        or any(b.get("type") in _SERVER_BLOCKS for b in f.expect.get("content") or ())
    ]


DECLARING = [api for api in apis_under_test() if _declares_server_tools(api)]
_NONE_DECLARE = pytest.param(
    None,
    id="no-server-tools",
    marks=pytest.mark.skip(
        reason=f"{', '.join(apis_under_test()) or 'no API'}: WireAPI.server_tools is empty "
        "(the provider asks for no vendor-run tool), so there is nothing to check"
    ),
)


@pytest.mark.parametrize("api", DECLARING or [_NONE_DECLARE])
def test_a_provider_with_server_tools_has_a_recording_of_one(api: str) -> None:
    """If this fails: add a recording in which the vendor runs one of the server tools
    `WireAPI.server_tools` declares, with its `expect`."""
    wire = stream_core.provider.get_provider(api).wire
    assert wire is not None
    assert _server_tool_recordings(api), (
        f"{api}: WireAPI.server_tools declares {sorted(wire.server_tools)}, but no recording "
        f"shows one run: {missing_recording([api], SERVER_TOOL_RECORDING)}"
    )


@pytest.mark.parametrize(
    "fixture",
    [f for api in DECLARING for f in _server_tool_recordings(api)]
    or [
        _NONE_DECLARE
        if not DECLARING
        else cases_or_missing([], DECLARING, SERVER_TOOL_RECORDING)[0]
    ],
    ids=repr,
)
def test_a_server_tool_recording_keeps_what_the_vendor_ran(fixture: Fixture) -> None:
    """If this fails: the provider drops or misreads a server tool call, its result, a
    citation or a count (the message names the recording's field and what was found)."""
    run = replay(fixture, whole(fixture.body))
    assert_valid_event_stream(run.events)
    check_expect(run.message, fixture.expect)
    check_modern(run.message, fixture.expect)
