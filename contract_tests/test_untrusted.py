"""Vendor bytes are untrusted (CONTRACT 1, 2, 5): every registered provider, over mutated
recordings, under asyncio and trio.

A mutation replaces a value anywhere in an event's JSON by a value of any JSON type (huge
integers, floats beyond range, objects where strings belong), deletes a key, inserts junk
bytes, drops or repeats an event, or cuts the body; the result is replayed in random
chunks. Whatever comes in: no exception, exactly one `message_end` and last, a valid
grammar, and a final message that prints, serializes and reads back unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stream_core
from stream_core import AssistantMessage, MessageEnd, event_to_json
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    Fixture,
    Run,
    apis_under_test,
    contract_context,
    contract_model,
    fresh_limiter,
    load_fixtures,
    missing_recording,
    options,
    replay_response,
    split_at,
)

APIS = apis_under_test()
# trio is a dev dependency here; a plugin author's install may not have it.
BACKENDS = ["asyncio"] + (["trio"] if importlib.util.find_spec("trio") else [])
EXAMPLES = int(os.environ.get("STREAM_CORE_FUZZ_EXAMPLES", "200"))
"""Examples per provider and backend; raise it for a deeper run than CI's."""
_SMALL = 32 * 1024  # recordings replayed hundreds of times stay small
_ANY = "any recording of the API, best one per shape (text, tool call, error)"


def _shape(fixture: Fixture) -> tuple[Any, ...]:
    expect = fixture.expect
    return (
        expect.get("stop_reason"),
        expect.get("error_kind"),
        tuple(sorted({b["type"] for b in expect.get("content") or ()})),
    )


def _recordings(api: str) -> list[Fixture]:
    """The smallest recording of each shape (stop reason, error, kinds of block), so the
    mutations reach thinking, tool calls, refusals and errors, not only plain text."""
    if not load_fixtures(api):
        pytest.skip(f"{api}: no recording to mutate: {missing_recording([api], _ANY)}")
    smallest: dict[tuple[Any, ...], Fixture] = {}
    for f in sorted(load_fixtures(api), key=lambda f: len(f.body)):
        if len(f.body) <= _SMALL:
            smallest.setdefault(_shape(f), f)
    return list(smallest.values()) or load_fixtures(api)[:1]


def _exhaustive_case(api: str) -> Fixture:
    """The smallest recording that ends normally with a tool call (it has every kind of
    event: start, blocks, deltas, stop reason, usage, end)."""
    cases = _recordings(api)
    with_call = [
        f
        for f in cases
        if f.expect.get("stop_reason") == "tool_use"
        and any(b["type"] == "tool_call" for b in f.expect.get("content") or ())
    ]
    return min(with_call or cases, key=lambda f: len(f.body))


# --- vendor JSON of any shape -------------------------------------------------------------

_HUGE = [10**400, -(10**400), 2**63, 2**64 + 1, -1, 0, 1e308, -1e308, 5e-324]
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(_HUGE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*here, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    parent = value
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return value


def _split_events(body: bytes) -> list[bytes]:
    text = body.replace(b"\r\n", b"\n")
    return [e + b"\n\n" for e in text.split(b"\n\n") if e.strip()]


def _mutate_json(event: bytes, data: st.DataObject) -> bytes:
    lines = event.split(b"\n")
    for n, line in enumerate(lines):
        if not line.startswith(b"data:"):
            continue
        try:
            obj = json.loads(line[5:])
        except ValueError:
            return event
        path = data.draw(st.sampled_from(_paths(obj)), label="path")
        new = data.draw(json_values, label="value")
        obj = _replace(obj, path, new, delete=data.draw(st.booleans(), label="delete"))
        lines[n] = b"data: " + json.dumps(obj).encode()
        return b"\n".join(lines)
    return event


def _mutated_body(fixture: Fixture, data: st.DataObject) -> bytes:
    events = _split_events(fixture.body)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if not events:
            break
        at = data.draw(st.integers(0, len(events) - 1), label="event")
        how = data.draw(
            st.sampled_from(["value", "value", "value", "junk", "drop", "repeat"]), label="how"
        )
        if how == "value":
            events[at] = _mutate_json(events[at], data)
        elif how == "junk":
            junk = data.draw(st.binary(min_size=1, max_size=16), label="junk")
            cut = data.draw(st.integers(0, len(events[at])), label="junk_at")
            events[at] = events[at][:cut] + junk + events[at][cut:]
        elif how == "drop":
            del events[at]
        else:
            events.insert(at, events[at])
    body = b"".join(events)
    if data.draw(st.booleans(), label="truncate"):
        body = body[: data.draw(st.integers(0, len(body)), label="truncate_at")]
    return body


# --- the property -------------------------------------------------------------------------


_responses: list[httpx.Response] = []
_client: list[httpx.AsyncClient] = []


def _shared_client() -> httpx.AsyncClient:
    """One client for every replay: a new one per run would build an SSL context each time
    (most of a run's cost), and the mock transport holds no connection between runs."""
    if not _client:
        _client.append(httpx.AsyncClient(transport=httpx.MockTransport(_answer)))
    return _client[0]


def _answer(request: httpx.Request) -> httpx.Response:
    return _responses.pop(0)


async def _run_once(api: str, fixture: Fixture, chunks: list[bytes]) -> Run:
    fresh_limiter()
    _responses[:] = [replay_response(chunks, fixture.headers)]
    model = contract_model(api)
    events = []
    with anyio.fail_after(20):  # a guard against hangs, not a timing assertion
        async with stream_core.stream(
            model, contract_context(), options(client=_shared_client())
        ) as s:
            async for event in s:
                events.append(event)
    return Run(events, s.message, 1, [])


def _replay(api: str, fixture: Fixture, chunks: list[bytes], backend: str) -> Run:
    return anyio.run(_run_once, api, fixture, chunks, backend=backend)


def assert_untrusted_contract(run: Run) -> None:
    """What holds for any bytes: the grammar, one end, a message that reads back."""
    assert_valid_event_stream(run.events)
    assert sum(isinstance(e, MessageEnd) for e in run.events) == 1
    m = run.message
    dumped = m.model_dump_json()
    again = AssistantMessage.model_validate_json(dumped)
    assert json.loads(again.model_dump_json()) == json.loads(dumped), "must round-trip"
    assert isinstance(m.text(), str)
    repr(m)
    for event in run.events:
        assert len(repr(event)) < 200 and str(event)
        json.dumps(event_to_json(event))
    if m.stop_reason in ("error", "aborted"):
        assert m.error is not None and m.error.message
    else:
        assert m.error is None or m.error.kind in ("refusal", "content_filter")
    if m.error is not None and m.error.kind == "protocol":
        assert m.error.message  # names the event (checked case by case in the unit tests)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("api", APIS)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_mutated_recordings_never_break_the_contract(
    api: str, backend: str, data: st.DataObject
) -> None:
    fixture = data.draw(st.sampled_from(_recordings(api)), label="recording")
    body = _mutated_body(fixture, data)
    cuts = data.draw(st.lists(st.integers(0, max(len(body), 1)), max_size=12), label="cuts")
    chunks = split_at(body, cuts) if body else []
    assert_untrusted_contract(_replay(api, fixture, chunks, backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("api", APIS)
def test_every_value_at_every_path_of_a_recording(api: str, backend: str) -> None:
    """Exhaustive over one small recording: each path of each event, in turn, set to each
    hostile value (a hypothesis run samples; this one misses no field)."""
    fixture = _exhaustive_case(api)
    events = _split_events(fixture.body)
    hostile: list[Any] = [None, True, 10**400, 1.5, "x", [], {}, [1, {"a": None}]]
    bodies = []
    for i, event in enumerate(events):
        line = next((ln for ln in event.split(b"\n") if ln.startswith(b"data:")), None)
        if line is None:
            continue
        try:
            obj = json.loads(line[5:])
        except ValueError:
            continue
        for path in _paths(obj):
            for value in hostile:
                mutated = _replace(json.loads(line[5:]), path, value, delete=False)
                new_event = event.replace(line, b"data: " + json.dumps(mutated).encode())
                bodies.append(b"".join([*events[:i], new_event, *events[i + 1 :]]))

    async def main() -> None:
        for body in bodies:
            assert_untrusted_contract(await _run_once(api, fixture, [body]))

    anyio.run(main, backend=backend)
