"""OpenTelemetry spans for stream calls, following the GenAI semantic conventions.

Imported only when `opentelemetry` is importable (the `otel` extra); without a configured
tracer provider the API hands out non-recording spans and this module does nothing more.
One span per call: started when the request goes out, ended once when the message ends,
so a stream costs nothing per event. Attributes (`gen_ai.*`, `server.*`, `error.type`):

- `gen_ai.operation.name` = "chat"; span name "chat {request model}", kind CLIENT.
- `gen_ai.provider.name` and the older `gen_ai.system`: the model's provider, spelled as
  the conventions' well-known values where one applies (`xai` becomes `x_ai`).
- `gen_ai.request.model`; `gen_ai.request.max_tokens` and `gen_ai.request.temperature`
  when the caller set them.
- `gen_ai.response.model`, `gen_ai.response.id`, `gen_ai.response.finish_reasons` (the
  vendor's raw stop value, else our stop reason).
- `gen_ai.usage.input_tokens` (all input, cached included, as the conventions ask),
  `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`,
  `gen_ai.usage.cache_creation.input_tokens`.
- `server.address`, `server.port` of the URL the request goes to.
- On failure `error.type` is the `StreamError.kind` and the status is ERROR (an abort by
  the caller sets `error.type` = "aborted" but leaves the status unset: nothing failed).
- An event `gen_ai.first_token` at the first content update.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ._models import Model
from ._options import StreamOptions
from ._types import AssistantMessage

__all__ = [
    "ChatSpan",
    "end_route_span",
    "enter_span",
    "leave_span",
    "start_route_span",
    "start_span",
]

logger = logging.getLogger("stream_core")

# A proxy tracer: it follows whatever provider the application installs, even later.
_tracer = trace.get_tracer("stream_core")

PROVIDER_NAMES = {
    "xai": "x_ai",
    "mistral": "mistral_ai",
    "azure-openai-responses": "azure.ai.openai",
    "azure-openai": "azure.ai.openai",
    "amazon-bedrock": "aws.bedrock",
    "google": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
}
"""Our provider names that the conventions spell differently; others are used as is."""


class ChatSpan:
    """One call's span; `end()` records the outcome (only the first call counts)."""

    __slots__ = ("_span", "_start_ns", "_start_perf")

    def __init__(self, span: Any, start_ns: int, start_perf: float) -> None:
        self._span = span
        self._start_ns = start_ns
        self._start_perf = start_perf

    def end(self, message: AssistantMessage, first_update: float | None) -> None:
        span, self._span = self._span, None
        if span is None:
            return
        try:
            _record(span, message, first_update, self._start_ns, self._start_perf)
        except Exception:  # telemetry never breaks a stream
            logger.debug("stream_core: recording the span failed", exc_info=True)
        finally:
            span.end()


def start_span(
    model: Model, options: StreamOptions, url: httpx.URL | None = None
) -> ChatSpan | None:
    """A started span for a call to `model`, or None when nothing records it. `url`: where
    the request actually goes (a call's `base_url`, `OPENAI_BASE_URL`, a filled template),
    which is what `server.address` reports; the model's base URL without one."""
    try:
        provider = PROVIDER_NAMES.get(model.provider, model.provider)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.request.model": model.id,
        }
        if options.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = options.max_tokens
        if options.temperature is not None:
            attributes["gen_ai.request.temperature"] = float(options.temperature)
        if url is None:
            try:
                url = httpx.URL(model.base_url)
            except Exception:
                url = None
        if url is not None and url.host:
            attributes["server.address"] = url.host
            port = url.port or {"https": 443, "http": 80}.get(url.scheme)
            if port:
                attributes["server.port"] = port
        start_ns = time.time_ns()
        span = _tracer.start_span(
            f"chat {model.id}", kind=SpanKind.CLIENT, attributes=attributes, start_time=start_ns
        )
        if not span.is_recording():
            span.end()
            return None
        return ChatSpan(span, start_ns, time.perf_counter())
    except Exception:
        logger.debug("stream_core: starting a span failed", exc_info=True)
        return None


def _record(
    span: Any,
    message: AssistantMessage,
    first_update: float | None,
    start_ns: int,
    start_perf: float,
) -> None:
    if first_update is not None:
        at = start_ns + int((first_update - start_perf) * 1e9)
        span.add_event("gen_ai.first_token", timestamp=max(at, start_ns))
    attributes: dict[str, Any] = {}
    # Strings only: a vendor may send any JSON type in any field.
    if isinstance(message.response_model, str):
        attributes["gen_ai.response.model"] = message.response_model
    if isinstance(message.response_id, str) and message.response_id:
        attributes["gen_ai.response.id"] = message.response_id
    raw = message.raw_stop_reason
    attributes["gen_ai.response.finish_reasons"] = [
        raw if isinstance(raw, str) and raw else message.stop_reason
    ]
    u = message.usage
    attributes["gen_ai.usage.input_tokens"] = u.input + u.cache_read + u.cache_write
    attributes["gen_ai.usage.output_tokens"] = u.output
    if u.cache_read:
        attributes["gen_ai.usage.cache_read.input_tokens"] = u.cache_read
    if u.cache_write:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = u.cache_write
    error = message.error
    if error is not None:
        attributes["error.type"] = error.kind
        if error.kind != "aborted":
            # The message is already redacted (no secrets), and capped: spans are exported.
            span.set_status(Status(StatusCode.ERROR, error.message[:500]))
    span.set_attributes(attributes)


# --- a route call: one parent span, the attempts' chat spans its children ---------------


def start_route_span(deployments: int) -> Any | None:
    """A started span for one route call, or None when nothing records it."""
    try:
        if isinstance(_tracer, trace.ProxyTracer) and isinstance(
            trace.get_tracer_provider(), trace.ProxyTracerProvider
        ):
            return None  # no tracer provider installed: nothing would record it
        span = _tracer.start_span(
            "route",
            kind=SpanKind.INTERNAL,
            attributes={"stream_core.route.deployments": deployments},
        )
        if not span.is_recording():
            span.end()
            return None
        return span
    except Exception:
        logger.debug("stream_core: starting a route span failed", exc_info=True)
        return None


def enter_span(span: Any) -> object:
    """Make `span` the parent of spans started until `leave_span(token)`."""
    return otel_context.attach(trace.set_span_in_context(span))


def leave_span(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


def end_route_span(span: Any, message: AssistantMessage) -> None:
    try:
        attributes: dict[str, Any] = {
            "stream_core.route.attempts": len(message.attempts or ()),
            "gen_ai.provider.name": PROVIDER_NAMES.get(message.provider, message.provider),
            "gen_ai.request.model": message.model,
        }
        if message.error is not None:
            attributes["error.type"] = message.error.kind
            if message.error.kind != "aborted":
                span.set_status(Status(StatusCode.ERROR, message.error.message[:500]))
        span.set_attributes(attributes)
    except Exception:  # telemetry never breaks a stream
        logger.debug("stream_core: recording the route span failed", exc_info=True)
    finally:
        span.end()
