"""What more than one command needs: running a stream into a sink, serving a recorded body
through the real provider code, finding the model a live call names, usage errors."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TextIO, TypeVar

import anyio
import httpx

from .._events import MessageUpdate, TextDelta, ThinkingDelta, ToolCallDelta
from .._models import Model
from .._options import StreamOptions
from .._registry import get_model, get_provider, list_providers, stream
from .._types import AssistantMessage, Context, UserMessage
from .._wire import WireAPI
from ._render import EventSink, error

__all__ = [
    "api_media_type",
    "chat_model",
    "consume",
    "exit_status",
    "replay_body",
    "usage_error",
    "user_context",
]


def usage_error(err: TextIO, text: str) -> int:
    """Say what is wrong with the command line in one line; the exit status for it."""
    error(err, text)
    return 2


async def consume(
    model: Model, context: Context, options: StreamOptions, sink: EventSink, pace: float
) -> AssistantMessage:
    """Feed every event to `sink` as it arrives; with `pace` (characters per second) > 0,
    pause after each delta in proportion to its length, like a live stream."""
    async with stream(model, context, options) as s:
        async for event in s:
            sink(event)
            if pace > 0 and isinstance(event, MessageUpdate):
                d = event.delta
                if isinstance(d, (TextDelta, ThinkingDelta, ToolCallDelta)) and d.delta:
                    await anyio.sleep(len(d.delta) / pace)
        return await s.result()


def _mock_client(
    body: bytes,
    chunk_size: int | None,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> httpx.AsyncClient:
    """A client whose every request gets `body` back, streamed in `chunk_size` pieces."""
    size = chunk_size or max(1, len(body))
    response_headers = {"content-type": "text/event-stream"}
    response_headers.update(headers or {})

    def handler(request: httpx.Request) -> httpx.Response:
        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), size):
                yield body[start : start + size]

        return httpx.Response(status, headers=response_headers, content=chunks())

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def replay_body(
    model: Model,
    context: Context,
    body: bytes,
    *,
    api_key: str,
    sink: EventSink,
    chunk_size: int | None = None,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    pace: float = 0.0,
    output_schema: dict[str, Any] | None = None,
) -> AssistantMessage:
    """Stream `model` as usual, answered with the recorded `body`: the provider code that
    runs is the real one, and nothing leaves the machine. `output_schema`: the structured
    answer the recorded call asked for (a fixture's `call`), so the body is read as it."""
    wire = get_provider(model.api).wire
    if wire is not None and not any(k.lower() == "content-type" for k in headers or {}):
        headers = {**(headers or {}), "content-type": api_media_type(wire, body)}
    async with _mock_client(body, chunk_size, status=status, headers=headers) as client:
        options = StreamOptions(
            client=client, api_key=api_key, max_retries=0, output_schema=output_schema
        )
        return await consume(model, context, options, sink, pace)


def api_media_type(wire: WireAPI, body: bytes) -> str:
    """The content type `wire` gives a recorded body whose own is unknown: the API decides.

    Its streaming framing (SSE, NDJSON, binary event-stream), except that for an API that
    does not stream NDJSON a body that is one JSON document is the vendor's non-streamed
    answer (a proxy that ignored `stream: true`), read by `WireAPI.parse_response`.
    """
    stream_types = wire.decoder().media_types
    ndjson = any("ndjson" in t or "jsonl" in t for t in stream_types)
    if not ndjson and wire.parse_response is not None and body.lstrip()[:1] in (b"{", b"["):
        try:
            json.loads(body)
        except ValueError:
            pass
        else:
            return "application/json"
    return stream_types[0]


def chat_model(provider: str, model_id: str, base_url: str | None, reasoning: bool) -> Model:
    """The catalog entry, else a model of a provider some wire API serves by name (Ollama,
    vLLM, a vendor's model newer than the catalog), else, with a base URL, any
    OpenAI-compatible server. `KeyError` with a one-line reason otherwise."""
    try:
        return get_model(provider, model_id)
    except KeyError as exc:
        missing = str(exc.args[0])
    wires = [e.wire for e in list_providers() if e.wire is not None]
    wire = next((w for w in wires if provider in w.providers), None)
    if wire is None and base_url is None:
        known = sorted({p for w in wires for p in w.providers})
        raise KeyError(f"{missing}; known providers: {', '.join(known)} (or pass --base-url)")
    return Model(
        id=model_id,
        api=wire.api if wire is not None else "openai-completions",
        provider=provider,
        base_url=base_url or (wire.providers[provider] if wire is not None else ""),
        reasoning=reasoning,  # unknown: trust the person asking for thinking
    )


def user_context(system: str | None, prompt: str) -> Context:
    """The one-turn conversation of a live call."""
    return Context(system_prompt=system, messages=[UserMessage(content=prompt)])


def exit_status(message: AssistantMessage) -> int:
    """Unlike a replay, a live call that failed is a failed command."""
    return 1 if message.stop_reason in ("error", "aborted") else 0


def positive_int(value: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def seconds_or_none(value: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not n >= 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return n


T = TypeVar("T")


async def then_close_store(run: Callable[[], Awaitable[T]]) -> T:
    """`await run()`, then close the limit store's connections on this event loop: a
    command's loop ends with it, and a Redis connection left open would be a socket
    nobody closes."""
    from .._limits import limiter

    try:
        return await run()
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await limiter.config.store.aclose()
            except Exception:  # noqa: BLE001 - closing is best effort; the answer stands
                pass
