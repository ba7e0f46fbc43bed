"""The `stream-core` command: an offline demo, recording replay, and a live chat.

    stream-core demo [--speed CHARS_PER_SECOND]
    stream-core replay FILE.body [--api API] [--chunk-size N] [--events] [--json]
    stream-core chat PROVIDER/MODEL "prompt" [--base-url URL] [--system S] [--max-tokens N]
                     [--reasoning E]
    stream-core --version

All three draw a stream with the one `Renderer`. `demo` and `replay` serve a recorded body
through an `httpx.MockTransport`, so the provider code that runs is the real one and nothing
leaves the machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx

from . import __version__
from ._cost import list_prices, prices_source
from ._events import (
    AssistantStreamEvent,
    Delta,
    MessageStart,
    MessageUpdate,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    event_to_json,
)
from ._models import Model, catalog_source, get_model, list_models, model_apis
from ._options import StreamOptions
from ._registry import api_key_env, get_provider, list_providers, stream
from ._types import (
    AssistantMessage,
    Context,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    UnknownContent,
    UserMessage,
)

__all__ = ["Renderer", "demo_body", "main"]

_DIM, _BOLD, _RED, _CYAN, _RESET = "\x1b[2m", "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[0m"
# C0 controls other than tab and newline: model output must not drive the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

EventSink = Callable[[AssistantStreamEvent], None]


# --- rendering ------------------------------------------------------------------------------


class Renderer:
    """Draws one stream for a person to watch, on `out`.

    Text is written as it arrives; thinking goes under a `thinking:` header, indented (and
    dim when `color`); a tool call shows its name, its argument text as it streams, then
    the parsed arguments, flagged when truncated; `message_end` adds the error, if any, and
    a one-line summary of stop reason, usage and cost. Deltas of interleaved blocks (parallel
    tool calls) each start a line labelled with their block, so they never run together.
    """

    def __init__(self, out: TextIO, *, color: bool = False) -> None:
        self.out = out
        self.color = color
        self._reset()

    def _reset(self) -> None:
        self._col0 = True  # the cursor is at the start of a line
        self._last_kind: str | None = None  # kind of the section written last
        self._owner: int | None = None  # the block the current output belongs to
        self._flagged: set[int] = set()  # tool calls already shown as truncated
        self._fresh = False  # the current section has shown nothing yet

    # --- events -----------------------------------------------------------------------

    def __call__(self, event: AssistantStreamEvent) -> None:
        self.handle(event)

    def handle(self, event: AssistantStreamEvent) -> None:
        if isinstance(event, MessageStart):
            self._reset()
        elif isinstance(event, MessageUpdate):
            self._update(event.message, event.delta)
        else:
            self._end(event.message)
        # Flushed per event: a person is watching.
        self.out.flush()

    def _update(self, message: AssistantMessage, d: Delta) -> None:
        i = d.content_index
        block = message.content[i]
        if isinstance(d, TextStart):
            self._section("text", i)
        elif isinstance(d, TextDelta):
            if self._owner != i:
                self._section("text", i)
            self._emit(d.delta)
        elif isinstance(d, ThinkingStart):
            self._section("thinking", i)
            self._line("thinking:", _DIM)
        elif isinstance(d, ThinkingDelta):
            if self._owner != i:
                self._section("thinking", i)
                self._line("thinking (continued):", _DIM)
            self._emit(d.delta, indent="  ", style=_DIM)
        elif isinstance(d, (TextEnd, ThinkingEnd)):
            self._end_line()
        elif isinstance(block, ToolCall):
            if isinstance(d, ToolCallStart):
                self._section("tool", i)
                self._write("tool call ", _CYAN)
                self._write(block.name or "?", _BOLD)
                self._line(f" (#{i}, id {block.id or '-'})", _DIM)
            elif isinstance(d, ToolCallDelta):
                self._tool_fragment(i, block, d.delta)
            elif isinstance(d, ToolCallEnd):
                self._tool_end(i, block)

    def _tool_fragment(self, i: int, call: ToolCall, fragment: str) -> None:
        if not fragment:
            return
        if self._owner != i or self._col0:
            self._end_line()
            # The block's own line needs no label; after another block's output it does.
            label = "  > " if self._owner == i else f"  {call.name or '?'} #{i} > "
            self._write(label, _DIM)
            self._owner = i
        self._emit(fragment, indent="    ")

    def _tool_end(self, i: int, call: ToolCall) -> None:
        self._end_line()
        head = "  arguments" if self._owner == i else f"  {call.name or '?'} #{i} arguments"
        if call.truncated:
            self._flagged.add(i)
            self._write(head, None)
            self._line(
                " TRUNCATED (cut off or not valid JSON; do not execute), best-effort parse:",
                _RED,
            )
        else:
            self._line(head + ":")
        for line in json.dumps(call.arguments, indent=2, ensure_ascii=False).split("\n"):
            self._line("    " + line)
        self._owner = i

    def _end(self, message: AssistantMessage) -> None:
        self._end_line()
        # A length stop marks calls truncated only when the message settles, which can be
        # after their toolcall_end was drawn: flag those here.
        late = [
            (i, b)
            for i, b in enumerate(message.content)
            if isinstance(b, ToolCall) and b.truncated and i not in self._flagged
        ]
        why = "cut by the output limit" if message.stop_reason == "length" else "incomplete"
        for i, call in late:
            self._line(f"tool call {call.name or '?'} #{i} TRUNCATED ({why}); do not execute", _RED)
        error = message.error
        if error is not None:
            self._blank()
            text = f"error: {error.kind}: {error.message}"
            if error.status_code is not None:
                text += f" (HTTP {error.status_code})"
            if error.retryable:
                after = f" after {error.retry_after:g}s" if error.retry_after is not None else ""
                text += f" [retryable{after}]"
            self._line(text, _RED)
            if message.content:
                kept = ", ".join(_describe(b) for b in message.content)
                self._line(f"partial content kept: {kept}", _DIM)
        self._blank()
        self._line(_summary(message), _BOLD)

    # --- output primitives ------------------------------------------------------------

    def _section(self, kind: str, owner: int) -> None:
        """Start a block's output on a fresh line; a blank line sets text and thinking
        apart, while consecutive tool-call lines stay together."""
        self._end_line()
        if self._last_kind is not None and not (kind == "tool" == self._last_kind):
            self._write("\n", None)
        self._last_kind = kind
        self._owner = owner
        self._fresh = True

    def _write(self, text: str, style: str | None) -> None:
        if not text:
            return
        self._col0 = text.endswith("\n")
        if self.color:
            # On a terminal, escape sequences in model output are shown, not obeyed.
            text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
            if style:
                text = f"{style}{text}{_RESET}"
        self.out.write(text)

    def _emit(self, text: str, *, indent: str = "", style: str | None = None) -> None:
        """Write streamed text, indenting each non-empty line."""
        if self._fresh:
            # Blank lines a block opens with (common in reasoning) would only push it down.
            text = text.lstrip("\n")
            if not text:
                return
            self._fresh = False
        for k, part in enumerate(text.split("\n")):
            if k:
                self.out.write("\n")
                self._col0 = True
            if part:
                if self._col0 and indent:
                    self.out.write(indent)
                self._write(part, style)
                self._col0 = False

    def _line(self, text: str, style: str | None = None) -> None:
        self._write(text, style)
        self.out.write("\n")
        self._col0 = True

    def _end_line(self) -> None:
        if not self._col0:
            self.out.write("\n")
            self._col0 = True

    def _blank(self) -> None:
        self._end_line()
        self.out.write("\n")


def _describe(block: TextContent | ThinkingContent | ToolCall | UnknownContent) -> str:
    if isinstance(block, TextContent):
        return f"text ({len(block.text)} chars)"
    if isinstance(block, ThinkingContent):
        return f"thinking ({len(block.thinking)} chars)"
    if isinstance(block, UnknownContent):
        return f"{block.type} block"
    return f"tool call {block.name or '?'}" + (" (truncated)" if block.truncated else "")


def _summary(message: AssistantMessage) -> str:
    """One line: stop reason (and the vendor's own), token usage, cost in USD."""
    u = message.usage
    raw = message.raw_stop_reason
    stop = f"stop: {message.stop_reason} (raw: {raw if raw is not None else 'none'})"
    tokens = (
        f"tokens: input {u.input}, output {u.output}, cache read {u.cache_read}, "
        f"cache write {u.cache_write}, reasoning {u.reasoning}, total {u.total_tokens}"
    )
    cost = f"cost: ${u.cost.total:.6f}" if u.cost is not None else "cost unknown"
    return " | ".join((stop, tokens, cost))


def _use_color(out: TextIO) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


# --- running a stream -----------------------------------------------------------------------


async def _consume(
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


async def _replay(
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
) -> AssistantMessage:
    wire = get_provider(model.api).wire
    if wire is not None and not any(k.lower() == "content-type" for k in headers or {}):
        # Served with the content type of the API's own framing (SSE, NDJSON, binary).
        headers = {**(headers or {}), "content-type": wire.decoder().media_types[0]}
    async with _mock_client(body, chunk_size, status=status, headers=headers) as client:
        options = StreamOptions(client=client, api_key=api_key, max_retries=0)
        return await _consume(model, context, options, sink, pace)


# --- demo -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Recording:
    file: str
    title: str
    provider: str
    model_id: str
    prompt: str
    tools: tuple[Tool, ...] = ()
    api: str | None = None
    """The wire API, where the catalog's default for the model is another."""
    base_url: str | None = None
    """A model outside the catalog (a local server): a plain `Model` at this URL."""


def _tool(name: str, description: str, **properties: str) -> Tool:
    return Tool(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: {"type": t} for k, t in properties.items()},
        },
    )


_DEMO: tuple[_Recording, ...] = (
    _Recording(
        "anthropic-thinking-tool.body",
        "Anthropic Messages: thinking, then text, then a streamed tool call",
        "anthropic",
        "claude-sonnet-4-5",
        "Should I take an umbrella in Paris tomorrow?",
        (
            _tool(
                "get_forecast",
                "Weather forecast for a city",
                city="string",
                country="string",
                day="string",
                fields="array",
                units="string",
            ),
        ),
    ),
    _Recording(
        "openai-parallel-tools.body",
        "OpenAI Chat Completions: two parallel tool calls, fragments interleaved",
        "openai",
        "gpt-4.1-mini",
        "What's the weather in Paris, and what time is it there?",
        (
            _tool("get_weather", "Current weather in a city", city="string"),
            _tool("get_time", "Current time in a time zone", tz="string"),
        ),
    ),
    _Recording(
        "gemini-parallel-tools.body",
        "Gemini: thought parts, text, then two function calls in one chunk",
        "google",
        "gemini-2.5-flash",
        "What's the weather in Paris, and what time is it there?",
        (
            _tool("get_weather", "Current weather in a city", city="string"),
            _tool("get_time", "Current time in a time zone", tz="string"),
        ),
    ),
    _Recording(
        "bedrock-reasoning-tool.body",
        "Amazon Bedrock Converse (binary event-stream): reasoning, text, a tool call",
        "amazon-bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "What is 17% of 2,340? Use the calculator.",
        (_tool("calculator", "Evaluate an arithmetic expression", expression="string"),),
    ),
    _Recording(
        "openai-responses-reasoning-tool.body",
        "OpenAI Responses: reasoning summary, a commentary message, then a function call",
        "openai",
        "gpt-5.1",
        "Can I walk out to Mont-Saint-Michel tomorrow morning?",
        (_tool("get_tides", "Tide times for a place", place="string", date="string"),),
        api="openai-responses",
    ),
    _Recording(
        "mistral-reasoning.body",
        "Mistral (Magistral): thinking parts inside the content array, then the answer",
        "mistral",
        "magistral-medium-latest",
        "What is 2+2?",
    ),
    _Recording(
        "ollama-chat-text.body",
        "Ollama's native /api/chat (newline-delimited JSON), a local model, no key",
        "ollama",
        "llama3.2",
        "Why is the sky blue? One sentence.",
        api="ollama-chat",
        base_url="http://localhost:11434",
    ),
    _Recording(
        "anthropic-overloaded.body",
        "Anthropic Messages: the vendor overloads mid-answer",
        "anthropic",
        "claude-sonnet-4-5",
        "Write me a long explanation of server-sent events.",
    ),
)


def demo_body(name: str) -> bytes:
    """A bundled demo recording (package data under `stream_core/demo/`)."""
    return (files("stream_core") / "demo" / name).read_bytes()


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    speed: float = args.speed
    renderer = Renderer(out, color=_use_color(out))

    def style(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if renderer.color else text

    out.write(
        style(
            _DIM,
            f"{len(_DEMO)} recorded vendor streams, replayed offline through the real "
            "provider code (no network, no API key).",
        )
        + "\n"
    )
    for n, rec in enumerate(_DEMO, 1):
        model = (
            get_model(rec.provider, rec.model_id, api=rec.api)
            if rec.base_url is None
            else Model(
                id=rec.model_id, api=rec.api or "", provider=rec.provider, base_url=rec.base_url
            )
        )
        context = Context(messages=[UserMessage(content=rec.prompt)], tools=list(rec.tools) or None)
        out.write(f"\n{style(_BOLD, f'=== {n}/{len(_DEMO)} {rec.title}')}\n")
        out.write(
            style(
                _DIM, f"model {rec.provider}/{rec.model_id}, recording stream_core/demo/{rec.file}"
            )
            + "\n"
        )
        out.write(f"{style(_CYAN, 'you:')} {rec.prompt}\n\n")
        out.flush()
        anyio.run(_demo_one, model, context, demo_body(rec.file), renderer, speed)
        if speed > 0 and n < len(_DEMO):
            time.sleep(60 / speed)  # a beat between recordings
    return 0


async def _demo_one(
    model: Model, context: Context, body: bytes, renderer: Renderer, speed: float
) -> None:
    await _replay(
        model,
        context,
        body,
        api_key="demo-key-not-sent-anywhere",
        sink=renderer,
        chunk_size=64,
        pace=speed,
    )


# --- replay ---------------------------------------------------------------------------------

# Response headers that describe the original transfer, not the stored body.
_TRANSFER_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})


def _cmd_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.file)
    if not path.is_file():
        return _usage_error(err, f"no such file: {path}")
    sidecar = path.with_suffix(".json")
    meta: dict[str, Any] = {}
    if sidecar.is_file() and sidecar != path:
        try:
            loaded = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return _usage_error(err, f"cannot read {sidecar}: {exc}")
        if not isinstance(loaded, dict):
            return _usage_error(err, f"{sidecar} is not a JSON object")
        meta = loaded
    api = args.api or meta.get("api")
    if not isinstance(api, str) or not api:
        return _usage_error(
            err,
            f"which wire API recorded {path.name}? pass --api (e.g. --api "
            f'anthropic-messages) or put an "api" key in {sidecar.name}',
        )
    try:
        get_provider(api)
    except ValueError as exc:
        return _usage_error(err, str(exc))
    model = Model(
        id=str(meta.get("model") or "replay"),
        api=api,
        provider=str(meta.get("vendor") or "replay"),
        base_url="https://replay.invalid",
    )
    status = meta.get("status")
    raw_headers = meta.get("headers")
    headers = (
        {
            str(k).lower(): str(v)
            for k, v in (raw_headers or {}).items()
            if str(k).lower() not in _TRANSFER_HEADERS
        }
        if isinstance(raw_headers, dict)
        else {}
    )

    def print_event(event: AssistantStreamEvent) -> None:
        # Serialized at once: toolcall_end reads arguments from the live message.
        out.write(json.dumps(event_to_json(event), ensure_ascii=False) + "\n")
        out.flush()

    sink: EventSink
    if args.events:
        sink = print_event
    elif args.json:
        sink = _ignore
    else:
        sink = Renderer(out, color=_use_color(out))
    context = Context(messages=[UserMessage(content="(replayed recording)")])
    message = anyio.run(
        _replay_main,
        model,
        context,
        path.read_bytes(),
        sink,
        args.chunk_size,
        status if isinstance(status, int) else 200,
        headers,
    )
    if args.json:
        out.write(json.dumps(message.model_dump(mode="json"), ensure_ascii=False) + "\n")
    if _nothing_recognised(message):
        err.write(
            f"error: no event of {path.name} was recognised as {api}; "
            "is --api the wire API that recorded it?\n"
        )
        return 1
    return 0  # an error in the recording is output, not a failure of the command


def _nothing_recognised(message: AssistantMessage) -> bool:
    """The body failed to parse or ended without the API's terminal event, and no event
    of it changed the message: the recording is of another API (or empty)."""
    error = message.error
    return (
        error is not None
        and error.kind in ("network", "protocol")
        and not message.content
        and message.raw_stop_reason is None
        and message.response_id is None
        and message.usage.total_tokens == 0
    )


async def _replay_main(
    model: Model,
    context: Context,
    body: bytes,
    sink: EventSink,
    chunk_size: int | None,
    status: int,
    headers: dict[str, str],
) -> AssistantMessage:
    return await _replay(
        model,
        context,
        body,
        api_key="replay-key",
        sink=sink,
        chunk_size=chunk_size,
        status=status,
        headers=headers,
    )


def _ignore(event: AssistantStreamEvent) -> None:
    return None


# --- chat -----------------------------------------------------------------------------------


def _chat_model(provider: str, model_id: str, base_url: str | None, reasoning: bool) -> Model:
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


def _cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    provider, _, model_id = args.model.partition("/")
    if not provider or not model_id:
        return _usage_error(
            err, f"expected PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5), got {args.model!r}"
        )
    try:
        model = _chat_model(provider, model_id, args.base_url, args.reasoning is not None)
    except KeyError as exc:
        return _usage_error(err, str(exc.args[0]))
    try:
        env, required = api_key_env(model)
    except ValueError as exc:
        return _usage_error(err, str(exc))
    if required and env and not os.environ.get(env):
        # Checked here, before any I/O, so the person gets one actionable line.
        return _usage_error(err, f"set {env} to use {provider}/{model_id}")
    context = Context(system_prompt=args.system, messages=[UserMessage(content=args.prompt)])
    options = StreamOptions(
        max_tokens=args.max_tokens, reasoning=args.reasoning, base_url=args.base_url
    )
    renderer = Renderer(out, color=_use_color(out))
    message = anyio.run(_consume, model, context, options, renderer, 0.0)
    # Unlike replay, a live call that failed is a failed command.
    return 1 if message.stop_reason in ("error", "aborted") else 0


# --- serve and record -----------------------------------------------------------------------


def _cmd_serve(args: argparse.Namespace, err: TextIO) -> int:
    from .testing._serve import serve

    root = Path(args.dir)
    if not root.is_dir():
        return _usage_error(err, f"{root} is not a folder of recordings")
    return serve(root, args.host, args.port, chunk_size=args.chunk_size, delay=args.delay, out=err)


def _cmd_record(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .testing._record import record

    provider, _, model_id = args.model.partition("/")
    if not provider or not model_id:
        return _usage_error(err, f"expected PROVIDER/MODEL, got {args.model!r}")
    try:
        model = _chat_model(provider, model_id, args.base_url, args.reasoning is not None)
        env, required = api_key_env(model)
    except (KeyError, ValueError) as exc:
        return _usage_error(err, str(exc.args[0]))
    key = os.environ.get(env) if env else None
    if required and not key:
        return _usage_error(err, f"set {env} to use {provider}/{model_id}")
    context = Context(system_prompt=args.system, messages=[UserMessage(content=args.prompt)])
    options = StreamOptions(
        max_tokens=args.max_tokens, reasoning=args.reasoning, base_url=args.base_url,
        max_retries=0,
    )  # fmt: skip
    message, body, meta = anyio.run(
        functools.partial(record, model, context, options, Path(args.output), api_key=key)
    )
    out.write(f"wrote {body} and {meta}: {_summary(message)}\n")
    return 1 if message.stop_reason in ("error", "aborted") else 0


# --- models ---------------------------------------------------------------------------------


def _tokens(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000:
        return f"{n / 1_000:.0f}k"
    return str(n)


def _usd(price: float | None) -> str:
    return "-" if price is None else f"{price:g}"


def _cmd_models(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    models = list_models(args.provider)
    if not models:
        known = sorted({m.provider for m in list_models()})
        return _usage_error(
            err, f"no models for provider {args.provider!r}; known: {', '.join(known)}"
        )
    head = ("ID", "API", "CONTEXT", "MAX OUT", "IN", "OUT", "CACHE R", "CACHE W", "REASON", "IMG")
    for provider in sorted({m.provider for m in models}):
        rows = [head]
        for m in (m for m in models if m.provider == provider):
            p = list_prices(m)
            rows.append(
                (
                    m.id,
                    ",".join(model_apis(m.provider, m.id)) or m.api,
                    _tokens(m.context_window),
                    _tokens(m.max_tokens),
                    _usd(p.input),
                    _usd(p.output),
                    _usd(p.cache_read),
                    _usd(p.cache_write),
                    "yes" if m.reasoning else "no",
                    "yes" if "image" in m.input else "no",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out.write(f"{provider} ({len(rows) - 1} models; prices in USD per million tokens)\n")
        for r in rows:
            out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
        out.write("\n")
    prices_version = prices_source()["genai_prices"]
    source = catalog_source()
    out.write(
        f"catalog: models.dev {source['revision'][:12]} ({source['licence']}); prices: "
        f"genai-prices {prices_version} where it knows the model, else the catalog's\n"
    )
    return 0


# --- entry point ----------------------------------------------------------------------------


def _silence(out: TextIO) -> None:
    """Point `out` at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
    except (OSError, ValueError):
        pass


def _usage_error(err: TextIO, text: str) -> int:
    err.write(f"error: {text}\n")
    err.flush()
    return 2


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _speed(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not n >= 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return n


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-core",
        description="Stream LLM vendor responses as one event sequence.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="replay the bundled recordings offline (no API key needed)",
        description="Replay the bundled, synthetic vendor recordings through the real "
        "provider code, drawn as they stream. Offline; no API key needed.",
    )
    demo.add_argument(
        "--speed",
        type=_speed,
        default=300.0,
        metavar="CHARS_PER_SEC",
        help="pace the replay at about this many characters per second "
        "(default: %(default)g; 0: no pauses)",
    )

    replay = sub.add_parser(
        "replay",
        help="run a recorded response body through its provider",
        description="Run a recorded response body through its provider, offline.",
    )
    replay.add_argument("file", metavar="FILE.body", help="the recorded HTTP response body")
    replay.add_argument(
        "--api", help='wire API of the recording (default: "api" in the sidecar FILE.json)'
    )
    replay.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="serve the body in chunks of N bytes (default: all at once)",
    )
    replay.add_argument(
        "--events", action="store_true", help="print each event as one JSON object per line"
    )
    replay.add_argument("--json", action="store_true", help="print the final message as JSON")

    chat = sub.add_parser(
        "chat",
        help="stream a live answer from any model",
        description="Stream a live answer: a catalog model, any model of a known provider "
        "(ollama/llama3.2, vllm/..., lmstudio/..., llama.cpp/...), or any OpenAI-compatible "
        "server with --base-url. Keys come from the provider's environment variable.",
    )
    chat.add_argument("model", metavar="PROVIDER/MODEL", help="e.g. anthropic/claude-sonnet-4-5")
    chat.add_argument("prompt", help="what to ask")
    chat.add_argument(
        "--base-url",
        metavar="URL",
        help="send the request here (a gateway, a proxy, a local server) instead of the "
        "provider's default",
    )
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--max-tokens", type=_positive_int, metavar="N", help="output limit")
    chat.add_argument(
        "--reasoning",
        choices=["minimal", "low", "medium", "high"],
        help="ask for thinking at this effort (reasoning models)",
    )
    serve = sub.add_parser(
        "serve",
        help="serve a folder of recordings as a fake vendor on loopback",
        description="Serve recordings (DIR/<api>/<model>.body with its .json) as a fake "
        "vendor: every API's path is answered, and the model the request names picks the "
        "recording by file name (unknown: the vendor's 404). Logs each request to stderr.",
    )
    serve.add_argument("dir", metavar="DIR", help="folder of recordings")
    serve.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8765, help="port (default: %(default)s)")
    serve.add_argument(
        "--chunk-size", type=_positive_int, metavar="N",
        help="send N bytes per chunk (default: one chunk per vendor event)",
    )  # fmt: skip
    serve.add_argument(
        "--delay", type=_speed, default=0.0, metavar="SECONDS", help="pause before each chunk"
    )

    rec = sub.add_parser(
        "record",
        help="make a live call and write it as a recording (NAME.body, NAME.json)",
        description="Make a live call and write the vendor's raw body as NAME.body and its "
        "metadata with `expect` as NAME.json, in the contract fixtures' format. Keys, auth "
        "values, account ids and cookies are scrubbed.",
    )
    rec.add_argument("model", metavar="PROVIDER/MODEL", help="e.g. anthropic/claude-sonnet-4-5")
    rec.add_argument("prompt", help="what to ask")
    rec.add_argument("-o", "--output", required=True, metavar="NAME", help="path without suffix")
    rec.add_argument("--base-url", metavar="URL", help="send the request here instead")
    rec.add_argument("--system", help="system prompt")
    rec.add_argument("--max-tokens", type=_positive_int, metavar="N", help="output limit")
    rec.add_argument(
        "--reasoning", choices=["minimal", "low", "medium", "high"], help="ask for thinking"
    )

    models = sub.add_parser(
        "models",
        help="list the catalog's models: window, prices, reasoning, images",
        description="List the catalog's models (from models.dev; prices from genai-prices "
        "where it knows the model, else the catalog's list price).",
    )
    models.add_argument("provider", nargs="?", metavar="PROVIDER", help="only this provider")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on bad arguments
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    out, err = sys.stdout, sys.stderr
    try:
        if args.command == "demo":
            return _cmd_demo(args, out)
        if args.command == "replay":
            return _cmd_replay(args, out, err)
        if args.command == "chat":
            return _cmd_chat(args, out, err)
        if args.command == "models":
            return _cmd_models(args, out, err)
        if args.command == "serve":
            return _cmd_serve(args, err)
        if args.command == "record":
            return _cmd_record(args, out, err)
    except KeyboardInterrupt:
        err.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        _silence(out)
        return 1
    parser.print_usage(err)
    return _usage_error(err, "choose a command: demo, replay, chat, models, serve or record")
