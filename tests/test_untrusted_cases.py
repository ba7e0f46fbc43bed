"""The cases of issue 5, one test each: hostile vendor values (CONTRACT 1, 2), secrets in
every surface (CONTRACT 4), programmer errors raised by `stream()` (CONTRACT 1) and cheap
printing (CONTRACT 5). The fuzzed versions are in `contract_tests/test_untrusted.py`."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from typing import Any

import anyio
import httpx
import pytest
import respx

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    ModelPrices,
    StreamOptions,
    TextDelta,
    Tool,
    ToolCall,
    UserMessage,
    event_to_json,
)
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    API_KEY,
    Run,
    contract_context,
    contract_model,
    options,
    replay_response,
)

ANTHROPIC, OPENAI = "anthropic-messages", "openai-completions"
HUGE = 10**400


def _anthropic(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _a_start(usage: dict[str, Any] | None = None) -> bytes:
    usage = usage if usage is not None else {"input_tokens": 10, "output_tokens": 1}
    return _anthropic("message_start", message={"id": "msg_1", "usage": usage})


def _a_text(text: str = "Hello") -> bytes:
    return (
        _anthropic("content_block_start", index=0, content_block={"type": "text", "text": ""})
        + _anthropic("content_block_delta", index=0, delta={"type": "text_delta", "text": text})
        + _anthropic("content_block_stop", index=0)
    )


def _a_end(stop: Any = "end_turn") -> bytes:
    return _anthropic("message_delta", delta={"stop_reason": stop}, usage={}) + _anthropic(
        "message_stop"
    )


def _openai(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps({'id': 'c1', **chunk})}\n\n".encode()


def _o_text(text: str = "Hello") -> bytes:
    return _openai({"choices": [{"index": 0, "delta": {"content": text}}]})


def _o_end(finish: Any = "stop", usage: dict[str, Any] | None = None) -> bytes:
    out = _openai({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        out += _openai({"choices": [], "usage": usage})
    return out + b"data: [DONE]\n\n"


def _priced(api: str) -> Model:
    return contract_model(api).model_copy(
        update={"prices": ModelPrices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)}
    )


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _stream(
    api: str,
    responses: list[httpx.Response],
    *,
    model: Model | None = None,
    opts: StreamOptions | None = None,
    client_headers: dict[str, str] | None = None,
) -> Run:
    """One stream against scripted responses, through an injected client (a mock transport:
    no SSL context per run, which is most of a run's cost)."""
    calls: list[httpx.Request] = []
    queue = list(responses)

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return queue.pop(0)

    transport = httpx.MockTransport(answer)
    async with httpx.AsyncClient(transport=transport, headers=client_headers) as client:
        opts = dataclasses.replace(opts or options(), client=client)
        async with stream_core.stream(model or contract_model(api), contract_context(), opts) as s:
            events = [e async for e in s]
    return Run(events, s.message, len(calls), calls)


def _run(
    api: str, body: bytes, *, model: Model | None = None, backend: str = "asyncio", **opts: Any
) -> Run:
    run = anyio.run(
        functools.partial(
            _stream, api, [replay_response([body])], model=model, opts=options(**opts)
        ),
        backend=backend,
    )
    _assert_sound(run)
    return run


def _assert_sound(run: Run) -> None:
    """What every case must keep: grammar, one end last, a message that reads back."""
    assert_valid_event_stream(run.events)
    assert isinstance(run.events[-1], MessageEnd)
    m = run.message
    dumped = m.model_dump_json()
    assert json.loads(AssistantMessage.model_validate_json(dumped).model_dump_json()) == (
        json.loads(dumped)
    )
    assert isinstance(m.text(), str)


def _protocol(run: Run, *words: str) -> str:
    error = run.message.error
    assert run.message.stop_reason == "error"
    assert error is not None and error.kind == "protocol", error
    for word in words:
        assert word in error.message, error.message
    return error.message


# --- section 1: any JSON type in any field ------------------------------------------------


def test_anthropic_partial_json_of_the_wrong_type_ends_protocol_naming_the_field(
    backend: str,
) -> None:
    body = (
        _a_start()
        + _anthropic(
            "content_block_start",
            index=1,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        )
        + _anthropic(
            "content_block_delta",
            index=1,
            delta={"type": "input_json_delta", "partial_json": 1.5},
        )
        + _a_end()
    )
    run = _run(ANTHROPIC, body, backend=backend)
    _protocol(run, "content_block_delta", "partial_json")
    (call,) = run.message.content
    assert isinstance(call, ToolCall) and call.truncated


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_a_400_digit_token_count_keeps_the_message_and_is_clamped(api: str, backend: str) -> None:
    if api == ANTHROPIC:
        body = _a_start({"input_tokens": 10, "output_tokens": HUGE}) + _a_text() + _a_end()
    else:
        usage = {"prompt_tokens": HUGE, "completion_tokens": 2, "total_tokens": 5}
        body = _o_text() + _o_end("stop", usage)
    run = _run(api, body, model=_priced(api), backend=backend)
    m = run.message
    assert m.stop_reason == "stop" and m.error is None and m.text() == "Hello"
    # The vendor's count is kept on `usage.clamped`; the counts priced and charged are
    # bounded by what the request could produce.
    assert m.usage.clamped is not None and HUGE in m.usage.clamped.values()
    assert HUGE not in (m.usage.output, m.usage.input)
    assert m.usage.cost is not None and m.usage.cost.total < 1.0


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize("stop", [{"a": 1}, ["end_turn"], 7, True])
def test_a_stop_reason_that_is_not_a_string_ends_protocol(
    api: str, stop: Any, backend: str
) -> None:
    body = _a_start() + _a_text() + _a_end(stop) if api == ANTHROPIC else _o_text() + _o_end(stop)
    run = _run(api, body, backend=backend)
    _protocol(run, "stop_reason" if api == ANTHROPIC else "finish_reason")
    assert run.message.text() == "Hello" and run.message.raw_stop_reason is None


@pytest.mark.parametrize(
    ("api", "body", "field"),
    [
        (
            ANTHROPIC,
            _a_start()
            + _anthropic("content_block_start", index=0, content_block={"type": "text", "text": -1})
            + _a_end(),
            "content_block.text",
        ),
        (OPENAI, _o_text() + _openai({"choices": [{"delta": {"content": 5}}]}), "content"),
        (OPENAI, _openai({"choices": [{"delta": {"reasoning_content": {}}}]}), "reasoning_content"),
        (OPENAI, _openai({"id": {}, "choices": []}), "chunk.id"),
        (ANTHROPIC, _anthropic("message_start", message={"id": {}}), "message.id"),
        (ANTHROPIC, _anthropic("content_block_stop", index="0"), "content_block_stop.index"),
        (ANTHROPIC, _anthropic("content_block_delta", index=0.5, delta={}), "index"),
        (OPENAI, _openai({"choices": [{"delta": {"tool_calls": [{"index": "a"}]}}]}), "index"),
        (OPENAI, _openai({"choices": {"0": {}}}), "choices"),
        (OPENAI, b"data: [1, 2]\n\n", "expected an object"),
        (ANTHROPIC, _anthropic("message_delta", usage={"output_tokens": "9"}), "output_tokens"),
        (OPENAI, _openai({"choices": [], "usage": {"prompt_tokens": True}}), "prompt_tokens"),
    ],
)
def test_a_field_of_the_wrong_type_ends_protocol_and_every_block_stays_valid(
    api: str, body: bytes, field: str, backend: str
) -> None:
    run = _run(api, body + (_a_end() if api == ANTHROPIC else _o_end()), backend=backend)
    _protocol(run, field)
    m = run.message
    assert m.response_id is None or isinstance(m.response_id, str)
    for block in m.content:
        assert type(block).model_validate(block.model_dump()) is not None


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_numbers_beyond_any_limit_end_protocol(api: str) -> None:
    huge = "1" + "0" * 5000  # beyond what Python prints or pydantic reads back
    data = (
        f'{{"type":"message_start","message":{{"usage":{{"output_tokens":{huge}}}}}}}'
        if api == ANTHROPIC
        else f'{{"choices":[],"usage":{{"prompt_tokens":{huge}}}}}'
    )
    run = _run(api, f"event: message_start\ndata: {data}\n\n".encode())
    _protocol(run, "malformed JSON")


@pytest.mark.parametrize(
    "arguments",
    ['{"a": 1e400}', '{"a": ' + "[" * 150 + "]" * 150 + "}", "[" * 100_000],
)
def test_tool_arguments_that_cannot_round_trip_are_truncated(arguments: str) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    body = (
        _a_start()
        + _anthropic("content_block_start", index=0, content_block=call)
        + _anthropic(
            "content_block_delta",
            index=0,
            delta={"type": "input_json_delta", "partial_json": arguments},
        )
        + _anthropic("content_block_stop", index=0)
        + _a_end("tool_use")
    )
    (block,) = _run(ANTHROPIC, body).message.content
    assert isinstance(block, ToolCall) and block.truncated


# --- section 3: no key in any surface -----------------------------------------------------

_ERROR_EVENT = (
    "event: error\n"
    'data: {{"type":"error","error":{{"type":"overloaded_error",'
    '"message":"key {key} revoked"}}}}\n\n'
)


def _every_surface(run: Run, caplog: pytest.LogCaptureFixture, secret: str) -> None:
    m = run.message
    assert m.error is not None
    surfaces = [m.error.message, repr(m), str(m), m.model_dump_json(), caplog.text]
    for event in run.events:
        surfaces += [str(event), repr(event), json.dumps(event_to_json(event))]
    for text in surfaces:
        assert secret not in text and secret[:12] not in text, text[:300]


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize("where", ["after_content", "before_content", "malformed_line"])
def test_the_key_echoed_by_the_vendor_is_redacted_everywhere(
    api: str, where: str, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="stream_core")
    text = _a_start() + _a_text() if api == ANTHROPIC else _o_text()
    echo = _ERROR_EVENT.format(key=API_KEY).encode()
    if where == "after_content":
        body = text + echo
    elif where == "before_content":
        body = echo  # retried, then failed the same way
    else:
        body = text + f'data: {{"oops": {API_KEY}\n\n'.encode()
    responses = [replay_response([body]) for _ in range(2)]
    run = anyio.run(
        functools.partial(_stream, api, responses, opts=options(max_retries=1)), backend=backend
    )
    _assert_sound(run)
    assert run.calls == (2 if where == "before_content" else 1)
    _every_surface(run, caplog, API_KEY)


_HEADER_KEY = "sk-only-in-a-header-0123456789abcdef"


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Authorization", f"Bearer {_HEADER_KEY}"),
        ("x-api-key", _HEADER_KEY),
        ("api-key", _HEADER_KEY),
        ("x-goog-api-key", _HEADER_KEY),
    ],
)
@pytest.mark.parametrize("source", ["options", "model", "client"])
def test_a_key_passed_only_in_headers_is_redacted_when_echoed(
    api: str,
    header: str,
    value: str,
    source: str,
    backend: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="stream_core")
    for env in ("ANTHROPIC_API_KEY", "CONTRACT_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    model = contract_model(api)
    opts = StreamOptions(max_retries=0)
    client_headers = None
    if source == "model":
        model = model.model_copy(update={"headers": {header: value}})
    elif source == "options":
        opts = StreamOptions(max_retries=0, headers={header: value})
    else:
        client_headers = {header: value}
    body = json.dumps(
        {"error": {"type": "authentication_error", "message": f"bad key {value} (got it)"}}
    ).encode()
    answer = httpx.Response(401, headers={"content-type": "application/json"}, content=body)
    run = anyio.run(
        functools.partial(
            _stream, api, [answer], model=model, opts=opts, client_headers=client_headers
        ),
        backend=backend,
    )
    _assert_sound(run)
    assert run.calls == 1  # the header's key was enough to send the request
    assert run.message.error is not None and run.message.error.kind == "auth"
    _every_surface(run, caplog, _HEADER_KEY)


# --- section 5: programmer errors raise from stream(), before any I/O ---------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_tokens": "100"}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"idle_timeout": "5"}, "idle_timeout"),
        ({"connect_timeout": -1}, "connect_timeout"),
        ({"cancel": True}, "cancel"),
        ({"headers": {"x-n": 5}}, "headers"),
        ({"headers": "x"}, "headers"),
        ({"client": "http://x"}, "client"),
        ({"reasoning": "extreme"}, "reasoning"),
        ({"max_retries": -1}, "max_retries"),
        ({"cache_retention": "forever"}, "cache_retention"),
        ({"thinking_budgets": {"high": "lots"}}, "thinking_budgets"),
        ({"api_key": 12345}, "api_key"),
        ({"on_payload": "not callable"}, "on_payload"),
    ],
)
def test_bad_options_raise_when_made_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises((TypeError, ValueError), match=rf"StreamOptions\.{field}"):
        StreamOptions(**kwargs)


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_an_option_changed_after_construction_raises_from_stream(api: str) -> None:
    opts = options()
    opts.reasoning = "extreme"  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"StreamOptions\.reasoning"):
        stream_core.stream(contract_model(api), contract_context(), opts)


def _tool(parameters: Any) -> Tool:
    tool = Tool(name="f")
    tool.parameters = parameters
    return tool


def _context_cases() -> list[tuple[Any, str]]:
    replaced_content = Context(messages=[UserMessage(content="hi")])
    replaced_content.messages[0].content = 5  # type: ignore[union-attr]
    none_content = Context(messages=[UserMessage(content="hi")])
    none_content.messages[0].content = None  # type: ignore[union-attr]
    call = ToolCall(id="c1", name="f", arguments={"when": object()})
    with_call = Context(
        messages=[
            UserMessage(content="hi"),
            AssistantMessage(api=OPENAI, provider="p", model="m", content=[call]),
        ]
    )
    hi = [UserMessage(content="hi")]
    return [
        (replaced_content, "context.messages.0"),
        (none_content, "context.messages.0"),
        (Context(messages=hi, tools=[_tool({"enum": {1, 2}})]), r"context.tools\[0\].parameters"),
        (
            Context(messages=hi, tools=[_tool({"default": float("nan")})]),
            r"context.tools\[0\].parameters",
        ),
        (Context(messages=hi, tools=[_tool("a string")]), "context.tools.0.parameters"),
        (Context(messages=hi, tools=[_tool(None)]), "context.tools.0.parameters"),
        (with_call, r"context.messages\[1\].content\[0\].arguments"),
    ]


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
@pytest.mark.parametrize(("context", "field"), _context_cases())
def test_a_bad_context_raises_from_stream_naming_the_field(
    api: str, context: Context, field: str
) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=httpx.Response(500))
        with pytest.raises((TypeError, ValueError), match=field):
            stream_core.stream(contract_model(api), context, options())
        assert route.call_count == 0


@pytest.mark.parametrize("messages", [[], [UserMessage(content="  \n ")]])
def test_an_anthropic_context_with_nothing_to_send_raises(messages: list[Any]) -> None:
    with pytest.raises(ValueError, match="context.messages"):
        stream_core.stream(contract_model(ANTHROPIC), Context(messages=messages), options())


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_a_payload_hook_returning_junk_raises_from_stream(api: str) -> None:
    with pytest.raises(TypeError, match=r"StreamOptions\.on_payload"):
        stream_core.stream(
            contract_model(api), contract_context(), options(on_payload=lambda p, m: [p])
        )
    with pytest.raises(ValueError, match="request payload .after StreamOptions.on_payload"):
        stream_core.stream(
            contract_model(api),
            contract_context(),
            options(on_payload=lambda p, m: {**p, "x": {1}}),
        )


@pytest.mark.parametrize("api", [ANTHROPIC, OPENAI])
def test_the_caller_context_is_not_mutated_or_read_again(api: str) -> None:
    context = contract_context()
    s = stream_core.stream(contract_model(api), context, options())
    context.messages.clear()  # after stream(): the request was already built
    assert s._request.content and b"Hello" in s._request.content


# --- section 6: cheap to print ------------------------------------------------------------


def test_events_print_a_summary_not_the_message() -> None:
    big = "x" * 1_000_000
    m = AssistantMessage(api=ANTHROPIC, provider="p", model="m")
    m.content.append(stream_core.TextContent(text=big))
    for event in (
        MessageStart(m),
        MessageUpdate(m, TextDelta(0, big)),
        MessageEnd(m),
    ):
        for text in (repr(event), str(event)):
            assert len(text) < 120 and "xxxx" not in text
            assert event.type in text
    assert "len=1000000" in repr(MessageUpdate(m, TextDelta(0, big)))
    assert big in repr(m)  # the message itself prints in full when asked
