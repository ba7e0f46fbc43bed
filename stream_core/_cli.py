"""The `stream-core` command: an offline demo, recording replay, and a live chat.

    stream-core demo [--speed CHARS_PER_SECOND]
    stream-core replay FILE.body [--api API] [--chunk-size N] [--events] [--json]
    stream-core chat PROVIDER/MODEL "prompt" [--system S] [--max-tokens N] [--reasoning E]

All three draw a stream with the one `Renderer`. `demo` and `replay` serve a recorded body
through an `httpx.MockTransport`, so the provider code that runs is the real one and nothing
leaves the machine.
"""

from __future__ import annotations

import argparse
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
from ._models import Model, get_model
from ._options import StreamOptions
from ._registry import api_key_env, get_provider, stream
from ._types import (
    AssistantMessage,
    Context,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
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


def _describe(block: TextContent | ThinkingContent | ToolCall) -> str:
    if isinstance(block, TextContent):
        return f"text ({len(block.text)} chars)"
    if isinstance(block, ThinkingContent):
        return f"thinking ({len(block.thinking)} chars)"
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
        "openai-responses-reasoning-tool.body",
        "OpenAI Responses: reasoning summary, a commentary message, then a function call",
        "openai",
        "gpt-5.1",
        "Can I walk out to Mont-Saint-Michel tomorrow morning?",
        (_tool("get_tides", "Tide times for a place", place="string", date="string"),),
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
        model = get_model(rec.provider, rec.model_id)
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
    return 0  # an error in the recording is output, not a failure of the command


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


def _cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    provider, _, model_id = args.model.partition("/")
    if not provider or not model_id:
        return _usage_error(
            err, f"expected PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5), got {args.model!r}"
        )
    try:
        model = get_model(provider, model_id)
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
    options = StreamOptions(max_tokens=args.max_tokens, reasoning=args.reasoning)
    renderer = Renderer(out, color=_use_color(out))
    message = anyio.run(_consume, model, context, options, renderer, 0.0)
    # Unlike replay, a live call that failed is a failed command.
    return 1 if message.stop_reason in ("error", "aborted") else 0


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
        help="stream a live answer from a catalog model",
        description="Stream a live answer from a catalog model (needs its API key).",
    )
    chat.add_argument("model", metavar="PROVIDER/MODEL", help="e.g. anthropic/claude-sonnet-4-5")
    chat.add_argument("prompt", help="what to ask")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--max-tokens", type=_positive_int, metavar="N", help="output limit")
    chat.add_argument(
        "--reasoning",
        choices=["minimal", "low", "medium", "high"],
        help="ask for thinking at this effort (reasoning models)",
    )
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
    except KeyboardInterrupt:
        err.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        _silence(out)
        return 1
    parser.print_usage(err)
    return _usage_error(err, "choose a command: demo, replay or chat")
