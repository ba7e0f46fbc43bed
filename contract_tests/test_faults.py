"""Scripted faults, for every registered provider (CONTRACT 3.1, 3.2, 4, 5).

The bodies come from the provider's own recordings (a plain text case, a length-cut tool
call), cut or spliced the same way for every wire API, so a new provider is covered by
adding fixtures. Error bodies use the `{"error": {"type", "message"}}` shape both
Anthropic and OpenAI-compatible servers send.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    MessageUpdate,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    audit_tool_pairs,
    fail_truncated_tool_calls,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    API_KEY,
    ERROR_EVENT,
    LENGTH_TOOL_CALL,
    Fixture,
    Run,
    apis_under_test,
    cases_or_missing,
    check_expect,
    contract_context,
    contract_model,
    framing,
    load_fixtures,
    missing_recording,
    options,
    run_provider,
    text_case,
    vendor_response,
)

APIS = apis_under_test()


def _text_case(api: str) -> Fixture:
    return text_case(api)


def _error_case(api: str) -> Fixture:
    """The vendor's in-stream error event alone: a recording that ends in a retryable
    error with no content (`synthetic-<api>-error-event` by convention)."""
    cases = [
        f
        for f in load_fixtures(api)
        if f.expect.get("error_kind") in ("overloaded", "rate_limit", "server")
        and f.expect.get("content") == []
    ]
    assert cases, f"{api}: needs a recording: {missing_recording([api], ERROR_EVENT)}"
    return min(cases, key=lambda f: len(f.body))


def _events(api: str, body: bytes) -> list[bytes]:
    """The body's frames (SSE events, NDJSON lines, ...), each whole."""
    return framing(api).frames(body)


def _run(api: str, responses: Any, **opts: Any) -> Run:
    async def main() -> Run:
        with anyio.fail_after(20):  # a guard against hangs, not a timing assertion
            return await run_provider(api, responses, opts=options(**opts))

    return anyio.run(main)


def _ok(api: str) -> httpx.Response:
    return vendor_response(api, [_text_case(api).body])


def _error_response(status: int, vendor_type: str, message: str, **headers: str) -> httpx.Response:
    body = json.dumps({"type": "error", "error": {"type": vendor_type, "message": message}})
    return httpx.Response(
        status, headers={"content-type": "application/json", **headers}, content=body.encode()
    )


def _full_text(api: str) -> str:
    return "".join(b["text"] for b in _text_case(api).expect["content"] if b["type"] == "text")


# --- HTTP errors and retries --------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_http_400_context_overflow(api: str) -> None:
    """If this fails: an over-long prompt must be kind context_overflow, not retried."""
    run = _run(
        api,
        [
            _error_response(
                400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
            )
        ],
        max_retries=2,
    )
    assert_valid_event_stream(run.events)
    assert run.message.stop_reason == "error"
    assert run.message.error is not None
    assert run.message.error.kind == "context_overflow"
    assert run.message.error.status_code == 400
    assert "prompt is too long" in run.message.error.message
    assert run.calls == 1


@pytest.mark.parametrize("api", APIS)
def test_http_401_auth_and_no_secret_in_error(api: str) -> None:
    """If this fails: a bad key must be kind auth, and the key must never be echoed."""
    run = _run(
        api,
        [_error_response(401, "authentication_error", f"invalid x-api-key: {API_KEY}")],
        max_retries=2,
    )
    error = run.message.error
    assert error is not None and error.kind == "auth" and error.status_code == 401
    assert API_KEY not in error.message and API_KEY[:12] not in error.message
    assert API_KEY not in run.message.model_dump_json()
    assert run.calls == 1


@pytest.mark.parametrize("api", APIS)
def test_http_404_not_found(api: str) -> None:
    run = _run(api, [_error_response(404, "not_found_error", "model: nope")])
    assert run.message.error is not None and run.message.error.kind == "not_found"
    assert "model: nope" in run.message.error.message


@pytest.mark.parametrize("api", APIS)
def test_429_with_retry_after_is_retried_then_succeeds(api: str) -> None:
    """If this fails: a 429 before any content must be retried, honouring retry-after."""
    run = _run(
        api,
        [
            _error_response(429, "rate_limit_error", "slow down", **{"retry-after-ms": "5"}),
            _ok(api),
        ],
        max_retries=2,
    )
    assert run.calls == 2
    assert_valid_event_stream(run.events)
    check_expect(run.message, _text_case(api).expect)


@pytest.mark.parametrize("api", APIS)
def test_429_retry_after_over_the_cap_fails_at_once(api: str) -> None:
    """If this fails: a wait longer than max_retry_delay must fail now, with retry_after."""
    run = _run(
        api,
        [_error_response(429, "rate_limit_error", "slow down", **{"retry-after": "120"}), _ok(api)],
        max_retries=2,
        max_retry_delay=1.0,
    )
    assert run.calls == 1
    error = run.message.error
    assert error is not None and error.kind == "rate_limit"
    assert error.retry_after == 120 and error.retryable


@pytest.mark.parametrize("api", APIS)
def test_500_and_529_are_retried(api: str) -> None:
    run = _run(
        api,
        [
            _error_response(500, "api_error", "boom"),
            _error_response(529, "overloaded_error", "Overloaded"),
            _ok(api),
        ],
        max_retries=2,
    )
    assert run.calls == 3
    check_expect(run.message, _text_case(api).expect)


@pytest.mark.parametrize("api", APIS)
def test_retries_are_bounded(api: str) -> None:
    run = _run(api, [_error_response(503, "overloaded_error", "busy")] * 3, max_retries=2)
    assert run.calls == 3
    error = run.message.error
    assert error is not None and error.kind == "overloaded" and error.retryable


@pytest.mark.parametrize("api", APIS)
def test_connection_error_is_retried(api: str) -> None:
    run = _run(api, [httpx.ConnectError("connection refused"), _ok(api)], max_retries=1)
    assert run.calls == 2
    assert run.message.stop_reason == "stop"


@pytest.mark.parametrize("api", APIS)
def test_missing_api_key_is_an_event_not_an_exception(api: str, monkeypatch: Any) -> None:
    # A catalog model of this API, so its provider's key variable is the one looked up.
    model = next(
        (m for m in stream_core.list_models() if m.api == api),
        stream_core.Model(id="m", api=api, provider="contract", base_url="https://contract.test"),
    ).model_copy(update={"base_url": "https://contract.test"})
    env, required = stream_core.api_key_env(model)
    if not required:
        pytest.skip(f"{api} takes requests without a key")
    for _ in range(3):  # the variable the provider reads, and any fallback it has
        if env:
            monkeypatch.delenv(env, raising=False)
        env, _ = stream_core.api_key_env(model)

    async def main() -> stream_core.AssistantMessage:
        s = stream_core.stream(model, {"messages": [{"role": "user", "content": "hi"}]})
        return await s.result()

    message = anyio.run(main)
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "auth"
    assert re.search(r"[A-Z_]+_API_KEY", message.error.message)


# --- broken streams -----------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("keep", ["half", "all_but_two"])
def test_eof_before_terminal_event(api: str, keep: str) -> None:
    """If this fails: a body that stops early must end error/network, keeping content."""
    events = _events(api, _text_case(api).body)
    n = len(events) // 2 if keep == "half" else len(events) - 2
    run = _run(api, [vendor_response(api, [b"".join(events[:n])])], max_retries=2)
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert run.message.stop_reason == "error"
    assert error is not None and error.kind == "network"
    assert "stream ended before" in error.message
    assert _full_text(api).startswith(run.message.text())
    assert run.calls == 1 or not any(isinstance(e, MessageUpdate) for e in run.events)


@pytest.mark.parametrize("api", APIS)
def test_malformed_json_ends_with_protocol_error_keeping_content(api: str) -> None:
    events = _events(api, _text_case(api).body)
    at = len(events) // 2
    body = b"".join(events[:at]) + framing(api).malformed + b"".join(events[at:])
    run = _run(api, [vendor_response(api, [body])])
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert error is not None and error.kind == "protocol"
    assert "malformed JSON" in error.message
    assert _full_text(api).startswith(run.message.text())


@pytest.mark.parametrize("api", APIS)
def test_unknown_events_and_comments_are_ignored(api: str) -> None:
    """If this fails: a vendor adding an event type would break every client."""
    case = _text_case(api)
    events = _events(api, case.body)
    body = b"".join(events[:2]) + framing(api).noise + b"".join(events[2:])
    run = _run(api, [vendor_response(api, [body])])
    assert_valid_event_stream(run.events)
    check_expect(run.message, case.expect)


@pytest.mark.parametrize("api", APIS)
def test_idle_stall_times_out_without_hanging(api: str) -> None:
    events = _events(api, _text_case(api).body)

    async def stalled() -> AsyncIterator[bytes]:
        yield b"".join(events[: len(events) // 2])
        await anyio.sleep(3600)

    run = _run(api, [vendor_response(api, stalled)], idle_timeout=0.2, max_retries=2)
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert error is not None and error.kind == "timeout"
    assert _full_text(api).startswith(run.message.text())


@pytest.mark.parametrize("api", APIS)
def test_first_byte_timeout(api: str) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    run = _run(api, slow, first_byte_timeout=0.2, max_retries=0)
    error = run.message.error
    assert error is not None and error.kind == "timeout"
    assert run.message.content == []


# --- cancel -------------------------------------------------------------------------------


class _Body:
    """A body that sends the first events, then waits; records whether it was closed."""

    def __init__(self, api: str, body: bytes) -> None:
        events = _events(api, body)
        self.head = b"".join(events[: max(3, len(events) // 2)])
        self.closed = False

    async def __call__(self) -> AsyncIterator[bytes]:
        try:
            yield self.head
            await anyio.sleep(3600)
        finally:
            self.closed = True


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["options.cancel", "aclose", "leave async with"])
def test_cancel_mid_stream(api: str, how: str) -> None:
    """If this fails: cancelling must close the response and end `aborted`, content kept."""
    body = _Body(api, _text_case(api).body)
    model = stream_core.Model(
        id="m", api=api, provider="contract", base_url="https://contract.test"
    )
    cancel = anyio.Event()
    events: list[Any] = []

    async def main() -> stream_core.AssistantMessage:
        import respx

        with respx.mock() as mock, anyio.fail_after(20):
            mock.route(host="contract.test").mock(return_value=vendor_response(api, body))
            opts = options(cancel=cancel)
            async with stream_core.stream(
                model, {"messages": [{"role": "user", "content": "hi"}]}, opts
            ) as s:
                async for event in s:
                    events.append(event)
                    if isinstance(event, MessageUpdate) and isinstance(
                        event.delta, (TextDelta, ThinkingDelta)
                    ):
                        if how == "options.cancel":
                            cancel.set()
                        elif how == "aclose":
                            await s.aclose()
                        else:
                            break
            return await s.result()

    message = anyio.run(main)
    assert message.stop_reason == "aborted"
    assert message.error is not None and message.error.kind == "aborted"
    assert message.content, "the content received before the cancel was dropped"
    assert _full_text(api).startswith(message.text())
    assert body.closed, "the HTTP response was left open"
    if how == "options.cancel":
        assert_valid_event_stream(events)


@pytest.mark.parametrize("api", APIS)
def test_caller_cancel_scope_propagates_and_closes(api: str) -> None:
    body = _Body(api, _text_case(api).body)
    model = stream_core.Model(
        id="m", api=api, provider="contract", base_url="https://contract.test"
    )
    holder: list[stream_core.AssistantStream] = []

    async def main() -> None:
        import respx

        with respx.mock() as mock:
            mock.route(host="contract.test").mock(return_value=vendor_response(api, body))
            with anyio.move_on_after(0.3):
                s = stream_core.stream(
                    model, {"messages": [{"role": "user", "content": "hi"}]}, options()
                )
                holder.append(s)
                async for _ in s:
                    pass

    anyio.run(main)
    assert body.closed
    assert holder[0].message.stop_reason == "aborted"


# --- length-cut tool calls ----------------------------------------------------------------


def _length_tool_cases() -> list[Fixture]:
    return [
        f
        for api in APIS
        for f in load_fixtures(api)
        if f.expect.get("stop_reason") == "length"
        and any(b.get("truncated") for b in f.expect.get("content", []))
    ]


def test_every_provider_with_tools_has_a_length_cut_tool_call() -> None:
    """If this fails: record (or write) a stream cut by max tokens inside a tool call."""
    with_tools = {
        f.api
        for api in APIS
        for f in load_fixtures(api)
        if any(b["type"] == "tool_call" for b in f.expect.get("content", []))
    }
    covered = {f.api for f in _length_tool_cases()}
    missing = sorted(with_tools - covered)
    assert not missing, missing_recording(missing, LENGTH_TOOL_CALL)


@pytest.mark.parametrize(
    "fixture",
    cases_or_missing(
        _length_tool_cases(),
        APIS,
        LENGTH_TOOL_CALL + " (needed only by a provider whose vendor streams tool calls)",
    ),
    ids=repr,
)
def test_length_stop_fails_every_tool_call(fixture: Fixture) -> None:
    run = _run(fixture.api, [vendor_response(fixture.api, [fixture.body])])
    message = run.message
    assert message.stop_reason == "length", (
        f"stop_reason {message.stop_reason!r}: a stop by the output limit must end `length`, "
        "with every tool call truncated (map the vendor's length reason to length)"
    )
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    assert calls and all(c.truncated for c in calls), "every tool call must be truncated"
    results = fail_truncated_tool_calls(message)
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert all(r.is_error for r in results)
    history = [stream_core.UserMessage(content="go"), message, *results]
    assert audit_tool_pairs(history).ok


# --- more failure paths -------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_vendor_error_before_any_content_is_retried(api: str) -> None:
    """If this fails: an error event before the first update may be retried (CONTRACT 4)."""
    error_event = _error_case(api).body
    run = _run(api, [vendor_response(api, [error_event]), _ok(api)], max_retries=1)
    assert run.calls == 2
    assert_valid_event_stream(run.events)
    check_expect(run.message, _text_case(api).expect)


@pytest.mark.parametrize("api", APIS)
def test_vendor_error_event_gets_the_kind_of_its_status(api: str) -> None:
    case = _error_case(api)
    run = _run(api, [vendor_response(api, [case.body])], max_retries=0)
    error = run.message.error
    assert error is not None and error.kind == case.expect["error_kind"] and error.retryable


@pytest.mark.parametrize("api", APIS)
def test_connection_dropped_mid_body_keeps_content(api: str) -> None:
    events = _events(api, _text_case(api).body)

    async def dropped() -> AsyncIterator[bytes]:
        yield b"".join(events[: len(events) // 2])
        raise httpx.ReadError("connection reset by peer")

    run = _run(api, [vendor_response(api, dropped)], max_retries=0)
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert error is not None and error.kind == "network"
    assert "stream ended before" in error.message and "connection reset" in error.message
    assert _full_text(api).startswith(run.message.text())


@pytest.mark.parametrize("api", APIS)
def test_connect_timeout_is_kind_timeout_and_retried(api: str) -> None:
    run = _run(api, [httpx.ConnectTimeout("timed out"), _ok(api)], max_retries=1)
    assert run.calls == 2 and run.message.stop_reason == "stop"
    run = _run(api, [httpx.ConnectTimeout("timed out")], max_retries=0)
    assert run.message.error is not None and run.message.error.kind == "timeout"


@pytest.mark.parametrize("api", APIS)
def test_a_failing_payload_hook_raises_from_stream_before_any_io(api: str) -> None:
    """The request is built inside `stream()` (CONTRACT 1): the hook's failure is the
    caller's bug, raised there and naming the option."""

    def hook(payload: dict[str, Any], model: stream_core.Model) -> None:
        raise RuntimeError("hook exploded")

    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=_ok(api))
        with pytest.raises(ValueError, match=r"StreamOptions\.on_payload raised .*hook exploded"):
            stream_core.stream(contract_model(api), contract_context(), options(on_payload=hook))
        assert route.call_count == 0


@pytest.mark.parametrize("api", APIS)
def test_close_before_reading_still_gives_a_whole_sequence(api: str) -> None:
    model = stream_core.Model(
        id="m", api=api, provider="contract", base_url="https://contract.test"
    )

    async def main() -> list[Any]:
        s = stream_core.stream(model, {"messages": [{"role": "user", "content": "hi"}]}, options())
        await s.aclose()
        return [e async for e in s]

    events = anyio.run(main)
    assert [e.type for e in events] == ["message_start", "message_end"]
    assert events[-1].message.stop_reason == "aborted"


@pytest.mark.parametrize("api", APIS)
def test_terminal_event_ends_the_stream_even_if_the_body_stays_open(api: str) -> None:
    """If this fails: a server that keeps the connection open after its terminal event
    (`[DONE]`, `message_stop`) would hang the caller (peers' pain 17)."""
    body = _text_case(api).body

    async def never_closes() -> AsyncIterator[bytes]:
        yield body
        await anyio.sleep(3600)

    run = _run(api, [vendor_response(api, never_closes)], idle_timeout=None)
    check_expect(run.message, _text_case(api).expect)


@pytest.mark.parametrize("api", APIS)
def test_no_retry_once_content_has_streamed(api: str) -> None:
    """If this fails: a retry after content would replay text the caller already has."""
    events = _events(api, _text_case(api).body)
    case = _error_case(api)
    body = b"".join(events[: len(events) - 2]) + case.body
    run = _run(api, [vendor_response(api, [body]), _ok(api)], max_retries=2)
    assert run.calls == 1
    assert run.message.error is not None
    assert run.message.error.kind == case.expect["error_kind"]
    assert run.message.text() and _full_text(api).startswith(run.message.text())
