"""Tracing: one GenAI-convention span per call, ended once whatever way the call ends, and
nothing imported when OpenTelemetry is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import respx
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from stream_core import (
    Context,
    MessageUpdate,
    StreamOptions,
    TextDelta,
    UserMessage,
    _otel,
    complete,
    complete_sync,
    get_model,
    stream,
)
from stream_core.contract_tests.kit import sse_response

ROOT = Path(__file__).parents[1]
TEXT_BODY = (
    ROOT / "contract_tests/fixtures/anthropic-messages/llm-anthropic__test_prompt.0.body"
).read_bytes()
URL = "https://api.anthropic.com/v1/messages"
MODEL = get_model("anthropic", "claude-sonnet-4-5")
CONTEXT = Context(messages=[UserMessage(content="hi")])
OPTIONS = StreamOptions(api_key="sk-ant-test-0000", max_retries=0)


async def never_ending() -> Any:
    """The recording up to its first text, then silence."""
    yield TEXT_BODY.split(b"content_block_stop")[0]
    await anyio.sleep_forever()


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # A local provider instead of the global one (which can be set once per process).
    monkeypatch.setattr(_otel, "_tracer", provider.get_tracer("stream_core"))
    return exporter


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, spans
    return spans[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("base_url", "host", "port"),
    [
        ("https://gateway.example.test:8443/anthropic", "gateway.example.test", 8443),
        ("http://127.0.0.1:9999", "127.0.0.1", 9999),
    ],
)
async def test_server_address_is_where_the_call_went(
    exporter: InMemorySpanExporter, base_url: str, host: str, port: int
) -> None:
    """Issue 23: the span named the model's default host when the call went elsewhere."""
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(base_url + "/v1/messages").mock(return_value=sse_response([TEXT_BODY]))
        options = StreamOptions(api_key="sk-ant-test-0000", max_retries=0, base_url=base_url)
        message = await complete(MODEL, CONTEXT, options)
    assert message.error is None
    attrs = dict(only_span(exporter).attributes or {})
    assert attrs["server.address"] == host and attrs["server.port"] == port


@pytest.mark.anyio
async def test_a_call_is_one_span_with_the_genai_attributes(
    exporter: InMemorySpanExporter,
) -> None:
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(URL).mock(
            return_value=sse_response(
                [TEXT_BODY], headers={"content-type": "text/event-stream", "request-id": "req_9"}
            )
        )
        message = await complete(MODEL, CONTEXT, OPTIONS)
    span = only_span(exporter)
    assert span.name == "chat claude-sonnet-4-5" and span.kind == SpanKind.CLIENT
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == attrs["gen_ai.system"] == "anthropic"
    assert attrs["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert attrs["gen_ai.response.model"] == message.response_model is not None
    assert attrs["gen_ai.response.id"] == message.response_id
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    u = message.usage
    assert attrs["gen_ai.usage.input_tokens"] == u.input + u.cache_read + u.cache_write > 0
    assert attrs["gen_ai.usage.output_tokens"] == u.output > 0
    assert attrs["server.address"] == "api.anthropic.com" and attrs["server.port"] == 443
    assert "error.type" not in attrs and span.status.status_code == StatusCode.UNSET
    (first_token,) = span.events
    assert first_token.name == "gen_ai.first_token"
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= first_token.timestamp <= span.end_time
    assert message.request_id == "req_9"


@pytest.mark.anyio
async def test_a_failed_call_records_the_error_kind(exporter: InMemorySpanExporter) -> None:
    secret = OPTIONS.api_key
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(
                429,
                headers={"request-id": "req_429"},
                json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            )
        )
        message = await complete(MODEL, CONTEXT, OPTIONS)
    assert message.request_id == "req_429"  # kept on errors too: that's when support asks
    span = only_span(exporter)
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "rate_limit"
    assert attrs["gen_ai.response.finish_reasons"] == ("error",)
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description and "slow" in span.status.description
    assert secret and secret not in json.dumps([attrs, span.status.description])
    assert not span.events  # no content, no first token


@pytest.mark.anyio
async def test_the_span_ends_once_on_abort(exporter: InMemorySpanExporter) -> None:
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(URL).mock(return_value=sse_response(never_ending))
        async with stream(MODEL, CONTEXT, OPTIONS) as s:
            async for event in s:
                if isinstance(event, MessageUpdate):
                    break
        await s.aclose()  # a second close ends nothing twice
    span = only_span(exporter)
    attrs = dict(span.attributes or {})
    assert attrs["error.type"] == "aborted"
    assert span.status.status_code == StatusCode.UNSET  # the caller stopped; nothing failed


@pytest.mark.anyio
async def test_the_span_ends_once_when_the_callers_scope_is_cancelled(
    exporter: InMemorySpanExporter,
) -> None:
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(URL).mock(return_value=sse_response(never_ending))
        s = stream(MODEL, CONTEXT, OPTIONS)
        with anyio.CancelScope() as scope:
            async for event in s:
                if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta):
                    scope.cancel()
    assert s.message.stop_reason == "aborted"
    span = only_span(exporter)
    assert dict(span.attributes or {})["error.type"] == "aborted"
    assert len(span.events) == 1


def test_a_stream_closed_before_it_started_makes_no_span(exporter: InMemorySpanExporter) -> None:
    async def main() -> None:
        await stream(MODEL, CONTEXT, OPTIONS).aclose()

    anyio.run(main)
    assert exporter.get_finished_spans() == ()


WITHOUT_OTEL = """
import sys
import anyio, httpx
from pathlib import Path
from stream_core import Context, StreamOptions, UserMessage, complete, get_model

assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported eagerly"
sys.modules["opentelemetry"] = None  # from here on, as if the otel extra were not installed

body = Path(sys.argv[1]).read_bytes()
client = httpx.AsyncClient(transport=httpx.MockTransport(
    lambda request: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body)))
options = StreamOptions(api_key="sk-ant-test-0000", client=client)
context = Context(messages=[UserMessage(content="hi")])

async def main():
    return await complete(get_model("anthropic", "claude-sonnet-4-5"), context, options)

message = anyio.run(main)
assert message.stop_reason == "stop" and message.text(), message
assert message.duration_ms is not None and message.response_model
assert sys.modules["opentelemetry"] is None
assert "stream_core._otel" not in sys.modules
print("ok")
"""


def test_nothing_is_imported_without_need() -> None:
    body = ROOT / "contract_tests/fixtures/anthropic-messages/llm-anthropic__test_prompt.0.body"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL, str(body)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_sync_call_is_a_child_of_the_callers_current_span(
    exporter: InMemorySpanExporter,
) -> None:
    tracer = _otel._tracer  # the test's provider
    with respx.mock(assert_all_mocked=True) as mock:
        mock.post(URL).mock(return_value=sse_response([TEXT_BODY]))
        with tracer.start_as_current_span("handle request") as outer:
            message = complete_sync(MODEL, CONTEXT, OPTIONS)
    assert message.stop_reason == "stop"
    chat = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat "))
    assert chat.parent is not None
    assert chat.parent.span_id == outer.get_span_context().span_id
