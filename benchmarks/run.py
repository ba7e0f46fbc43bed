"""Replay large synthetic SSE bodies through stream-core and through a bare httpx-sse loop.

    python benchmarks/run.py [--mode inprocess|socket] [--repeat N] [--sizes 20000 ...]
                             [--only text|tool] [--json]
    python benchmarks/run.py --single PROVIDER KIND SIDE SIZE [--body FILE | --url URL]

Two stream kinds per wire format: `text` (SIZE text deltas) and `tool` (one tool call whose
~10*SIZE bytes of arguments arrive in SIZE fragments; Gemini's as Vertex AI `partialArgs`).
The bodies are `stream_core.testing.vendor_bytes` of a scripted turn cut into those deltas:
each API's own codec writes them (no stop word, usage field or event written here). Both
sides read the same bytes through the same kind of response: an `httpx.AsyncClient` on an
`httpx.MockTransport` that serves the body as 64 KiB chunks. The bare side is
`EventSource(response).aiter_sse()` plus `json.loads` per event; the stream-core side is
`stream_core.stream(...)` iterated to the end, then `await s.result()`. Times are best-of-N
with a warm-up; the unit is one SSE event of the body, so the ratio of per-event times is
the ratio of whole-replay times.

`--mode socket` serves the same bodies from a loopback server process (benchmarks/server.py,
127.0.0.1 only, one HTTP chunk per SSE event as the vendors write them): the bare side reads
through one reused `httpx.AsyncClient`, stream-core through its default shared client, idle
timeout on. It also runs each side once in a process of its own to report its peak RSS.

`--single` replays once with no warm-up and prints `{"events": ..., "rss_kb": ...}`: the
unit that benchmarks/cachegrind.py runs under valgrind (`--url` reads from a server).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import random
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
)

PROVIDERS = (
    "anthropic-messages",
    "openai-completions",
    "openai-responses",
    "google-generative-ai",
    "bedrock-converse-stream",
    "mistral-conversations",
    "ollama-chat",
)
KINDS = ("text", "tool")
# Ollama sends a tool call whole, on one line: there is no argument stream to measure.
_KINDS_OF: dict[str, tuple[str, ...]] = {"ollama-chat": ("text",)}


def kinds_for(provider: str, kinds: list[str]) -> list[str]:
    return [k for k in kinds if k in _KINDS_OF.get(provider, KINDS)]


SIDES = ("bare", "stream-core")
CHUNK_SIZE = 64 * 1024
BASE_URL = "https://bench.invalid"
ARG_BYTES_PER_FRAGMENT = 10  # 20,000 fragments -> ~200 KB of arguments
TEXT_TARGET = 1.2  # stream-core / bare, per event
TOOL_TARGET = 1.5  # stream-core tool stream / text stream, per event

_WORDS = (
    "the",
    "stream",
    "of",
    "tokens",
    "arrives",
    "in",
    "small",
    "pieces",
    "and",
    "each",
    "one",
    "becomes",
    "an",
    "event",
    "with",
    "its",
    "index",
    "café",
    "naïve",
    "—",
    "résumé",
    "数据",
    "流",
    "🙂",
    "parser",
    "buffer",
    "latency",
    "is",
    "measured",
    "here",
)


# --- bodies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    provider: str
    kind: str
    size: int
    """Deltas (text) or argument fragments (tool) in the body."""
    data: bytes
    events: int
    """SSE events in the body (terminal event and `[DONE]` included): the per-event unit."""
    text: str
    arguments: dict[str, Any] | None
    media: str = "text/event-stream"
    """The body's content type, as `vendor_bytes` labels it."""


def _dumps(obj: Any) -> str:
    # Vendors send compact JSON with raw UTF-8.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def text_deltas(size: int) -> list[str]:
    rng = random.Random(size)  # deterministic per size
    out = []
    for i in range(size):
        word = rng.choice(_WORDS)
        if i % 97 == 96:
            word += ".\n\n"
        elif i % 13 == 12:
            word += ","
        out.append(" " + word if i else word.capitalize())
    return out


def tool_arguments(size: int) -> tuple[dict[str, Any], list[str]]:
    """A `write_file` call's arguments and its JSON text cut into `size` fragments."""
    target = ARG_BYTES_PER_FRAGMENT * size
    lines: list[str] = []
    length, i = 0, 0
    while length < target:
        # Code-like content: quotes and newlines make the JSON text carry escapes.
        line = f'    result_{i} = compute("{_WORDS[i % len(_WORDS)]}", {i}) * 2  # step {i}'
        lines.append(line)
        length += len(line) + 3
        i += 1
    args = {"path": "src/generated/module.py", "content": "\n".join(lines) + "\n"}
    text = _dumps(args)
    n = len(text)
    cuts = [n * k // size for k in range(size + 1)]
    return args, [text[a:b] for a, b in pairwise(cuts)]


def bench_turn(kind: str, size: int) -> tuple[Any, str, dict[str, Any] | None]:
    """The scripted answer of a body: `size` text deltas, or one `write_file` call whose
    arguments come in `size` fragments; 25 tokens in, `size` out. Returns (turn, its text,
    its arguments). The block's frame is cut into one frame a delta, as `faux_model`'s
    `chunk_size` cuts it: `vendor_bytes` writes each as one delta of the API's stream."""
    from stream_core.testing import FauxTurn, faux_message  # see `make_body`

    arguments: dict[str, Any] | None = None
    block: TextContent | ToolCall
    if kind == "text":
        pieces = text_deltas(size)
        block = TextContent(text="".join(pieces))
    else:
        arguments, pieces = tool_arguments(size)
        block = ToolCall(id="call_bench", name="write_file", arguments=arguments)
    message = AssistantMessage(
        api="faux", provider="bench", model="bench", content=[block],
        usage=Usage(input=25, output=size),
    )  # fmt: skip
    first, *rest = faux_message(message).frames
    key = "text" if kind == "text" else "args"
    frames = [{**first, key: pieces[0]}, *({"b": first["b"], key: p} for p in pieces[1:])]
    text = block.text if isinstance(block, TextContent) else ""
    return FauxTurn(frames=(*frames, *rest)), text, arguments


def make_body(provider: str, kind: str, size: int) -> Body:
    """The body `provider`'s vendor streams for `bench_turn(kind, size)`: its bytes from
    `stream_core.testing.vendor_bytes`, the API's own codec (stop reasons, usage fields
    and events as the provider reads them), never written here a second time."""
    # Imported here: a `--single` replay measures a process that loads no codec.
    from stream_core.testing import vendor_bytes

    turn, text, arguments = bench_turn(kind, size)
    synth = vendor_bytes(turn, provider, model="bench")
    media = str(synth.meta["headers"]["content-type"])
    return Body(provider, kind, size, synth.body, count_events(synth.body), text, arguments, media)


def sniff_media(data: bytes) -> str:
    """The content type of a body `make_body` wrote, read back from its bytes (as
    `count_events` tells them apart)."""
    if data.startswith((b"event:", b"data:")):
        return "text/event-stream"
    return "application/x-ndjson" if data.startswith(b"{") else "application/vnd.amazon.eventstream"


def count_events(data: bytes) -> int:
    """Events in a body written by this module: SSE events (each ends with a blank line),
    NDJSON lines, or the messages of an AWS event-stream body."""
    if data.startswith((b"event:", b"data:")):
        return data.count(b"\n\n")
    if data.startswith(b"{"):
        return data.count(b"\n")
    n = pos = 0
    while pos < len(data):
        pos += struct.unpack_from(">I", data, pos)[0]
        n += 1
    return n


# --- the two sides ------------------------------------------------------------------------


def make_client(data: bytes, media: str = "text/event-stream") -> httpx.AsyncClient:
    """A client whose every request gets `data` (of type `media`) in 64 KiB chunks."""
    chunks = [data[i : i + CHUNK_SIZE] for i in range(0, len(data), CHUNK_SIZE)]

    async def serve() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": media}, content=serve())

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def bench_model(provider: str) -> Model:
    return Model(id="bench", api=provider, provider="bench", base_url=BASE_URL)


CONTEXT = Context(messages=[UserMessage(content="Write the file.")])
_BARE_PAYLOAD = {
    "model": "bench",
    "stream": True,
    "messages": [{"role": "user", "content": "Write the file."}],
}


async def run_bare(
    client: httpx.AsyncClient,
    provider: str = "anthropic-messages",
    url: str = BASE_URL + "/bench",
) -> int:
    """The floor: decode SSE and parse each event's JSON, nothing else. Returns SSE events."""
    if provider == "bedrock-converse-stream":
        return await run_bare_event_stream(client, url)
    if provider.startswith("ollama"):
        return await run_bare_ndjson(client, url)
    n = 0
    async with client.stream("POST", url, json=_BARE_PAYLOAD) as response:
        async for sse in EventSource(response).aiter_sse():
            n += 1
            if sse.data != "[DONE]":
                json.loads(sse.data)
    return n


async def run_bare_ndjson(client: httpx.AsyncClient, url: str) -> int:
    """The floor for newline-delimited JSON: split lines, parse each. Returns lines."""
    n = 0
    async with client.stream("POST", url, json=_BARE_PAYLOAD) as response:
        async for line in response.aiter_lines():
            if line:
                json.loads(line)
                n += 1
    return n


async def run_bare_event_stream(client: httpx.AsyncClient, url: str) -> int:
    """The floor for AWS event-stream: frame, check both CRCs, read the event type, parse the
    payload's JSON. Returns messages."""
    n = 0
    buf = bytearray()
    async with client.stream("POST", url, json=_BARE_PAYLOAD) as response:
        async for chunk in response.aiter_bytes():
            buf += chunk
            pos = 0
            while len(buf) - pos >= 12:
                total, hlen, crc = struct.unpack_from(">III", buf, pos)
                if len(buf) - pos < total:
                    break
                frame = bytes(buf[pos : pos + total])
                assert zlib.crc32(frame[:8]) == crc
                assert zlib.crc32(frame[:-4]) == struct.unpack_from(">I", frame, total - 4)[0]
                name_len = frame[12]
                value_len = struct.unpack_from(">H", frame, 14 + name_len)[0]
                start = 16 + name_len
                frame[start : start + value_len].decode()  # the first header: :event-type
                json.loads(frame[12 + hlen : total - 4])
                n += 1
                pos += total
            del buf[:pos]
    return n


async def run_core(client: httpx.AsyncClient | None, model: Model) -> tuple[int, Any]:
    """Every normalized event, then the final message. Returns (events, message).

    `client=None`: stream-core's own default (its shared keep-alive client)."""
    n = 0
    options = StreamOptions(client=client, api_key="bench", max_retries=0)
    async with stream_core.stream(model, CONTEXT, options) as s:
        async for _event in s:
            n += 1
        message = await s.result()
    return n, message


def check(body: Body, bare_events: int, core_events: int, message: Any) -> None:
    """The replay is right: every SSE event seen, every delta emitted, final content exact."""
    assert bare_events == body.events, (bare_events, body.events)
    # message_start, block start, one per delta, block end, message_end
    assert core_events == body.size + 4, (core_events, body.size + 4)
    assert message.error is None, message.error
    (block,) = message.content
    if body.kind == "text":
        assert message.stop_reason == "stop", message.stop_reason
        assert isinstance(block, TextContent) and block.text == body.text, "text differs"
    else:
        assert message.stop_reason == "tool_use", message.stop_reason
        assert isinstance(block, ToolCall) and not block.truncated, block
        assert block.name == "write_file" and block.arguments == body.arguments, "args differ"


# --- timing -------------------------------------------------------------------------------


@dataclass
class Row:
    provider: str
    kind: str
    size: int
    events: int
    bare_s: float
    core_s: float
    bare_rss_kb: int = 0
    """Peak RSS of a process replaying this side once (socket mode only)."""
    core_rss_kb: int = 0

    @property
    def bare_us(self) -> float:
        return self.bare_s / self.events * 1e6

    @property
    def core_us(self) -> float:
        return self.core_s / self.events * 1e6

    @property
    def ratio(self) -> float:
        return self.core_s / self.bare_s


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()  # start each run from the same heap state; collection is part of the run
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def measure(body: Body, repeat: int) -> Row:
    model = bench_model(body.provider)
    async with make_client(body.data, body.media) as client:
        # Warm-up, and the correctness check (once, outside the timing).
        bare_events = await run_bare(client, body.provider)
        core_events, message = await run_core(client, model)
        check(body, bare_events, core_events, message)
        del message
        bare_best = core_best = math.inf
        for _ in range(repeat):
            # Interleaved so a slow spell of the machine hits both sides alike.
            bare_best = min(bare_best, await _timed(lambda: run_bare(client, body.provider)))
            core_best = min(core_best, await _timed(lambda: run_core(client, model)))
    return Row(body.provider, body.kind, body.size, body.events, bare_best, core_best)


# --- the loopback server (socket mode) ----------------------------------------------------

SERVER = Path(__file__).resolve().parent / "server.py"


class Loopback:
    """benchmarks/server.py in a process of its own, serving bodies saved as files.

    Stops with this object (`close`), or by itself when this process is gone."""

    def __init__(self, bodies: dict[str, bytes] | None = None, folder: Path | None = None) -> None:
        self._tmp = (
            None if folder is not None else tempfile.TemporaryDirectory(prefix="stream-core-serve-")
        )
        self.folder = folder or Path(self._tmp.name)  # type: ignore[union-attr]
        for name, data in (bodies or {}).items():
            self.add(name, data)
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def add(self, name: str, data: bytes) -> None:
        (self.folder / f"{name}.sse").write_bytes(data)

    def base_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def body_name(body: Body) -> str:
    return f"{body.provider}-{body.kind}-{body.size}"


def socket_model(provider: str, url: str) -> Model:
    return Model(id="bench", api=provider, provider="bench", base_url=url)


async def measure_socket(body: Body, repeat: int, server: Loopback) -> Row:
    url = server.base_url(body_name(body))
    model = socket_model(body.provider, url)
    async with httpx.AsyncClient(timeout=None) as client:
        bare_events = await run_bare(client, body.provider, url + "/bench")
        core_events, message = await run_core(None, model)
        check(body, bare_events, core_events, message)
        del message
        bare_best = core_best = math.inf
        for _ in range(repeat):
            bare_best = min(
                bare_best, await _timed(lambda: run_bare(client, body.provider, url + "/bench"))
            )
            core_best = min(core_best, await _timed(lambda: run_core(None, model)))
    return Row(body.provider, body.kind, body.size, body.events, bare_best, core_best)


def peak_rss_self_kb() -> int:
    """This process's peak RSS. Not `getrusage`: Linux carries its `ru_maxrss` across
    exec, so a child would report its parent's peak; `VmHWM` starts afresh."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss_kb(body: Body, side: str, url: str) -> int:
    """One replay of `side` in a fresh process; its peak resident set (KiB)."""
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--single",
            body.provider,
            body.kind,
            side,
            str(body.size),
            "--url",
            url,
            "--events",
            str(body.events),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["rss_kb"])


def _mark(ratio: float, target: float) -> str:
    return "ok" if ratio <= target else "MISS"


def print_tables(rows: list[Row], repeat: int, mode: str = "inprocess") -> None:
    where = (
        "over a loopback socket, one HTTP chunk per event"
        if mode == "socket"
        else ("in-process (MockTransport, 64 KiB chunks)")
    )
    print(
        f"{where}; best of {repeat}, per SSE event of the body; ratio = stream-core / bare "
        f"(target <= {TEXT_TARGET}x)"
    )
    rss = any(r.bare_rss_kb for r in rows)
    head = (
        f"{'provider':<23} {'stream':<6} {'events':>7} {'bare µs/ev':>11} "
        f"{'stream-core µs/ev':>18} {'ratio':>7}  target"
    ) + (f"  {'bare RSS MiB':>12} {'core RSS MiB':>12} {'RSS ratio':>9}" if rss else "")
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (
            f"{r.provider:<23} {r.kind:<6} {r.events:>7} {r.bare_us:>11.3f} "
            f"{r.core_us:>18.3f} {r.ratio:>6.2f}x  {_mark(r.ratio, TEXT_TARGET):<6}"
        )
        if rss:
            line += (
                f"  {r.bare_rss_kb / 1024:>12.1f} {r.core_rss_kb / 1024:>12.1f} "
                f"{r.core_rss_kb / r.bare_rss_kb:>8.2f}x"
            )
        print(line)
    pairs = tool_text_pairs(rows)
    if not pairs:
        return
    print()
    print(f"stream-core tool stream / text stream, per event (target <= {TOOL_TARGET}x)")
    head = (
        f"{'provider':<23} {'size':>6} {'text µs/ev':>11} {'tool µs/ev':>11} "
        f"{'tool/text':>10}  target  {'(bare tool/text)':>16}"
    )
    print(head)
    print("-" * len(head))
    for text, tool in pairs:
        ratio = tool.core_us / text.core_us
        print(
            f"{text.provider:<23} {text.size:>6} {text.core_us:>11.3f} {tool.core_us:>11.3f} "
            f"{ratio:>9.2f}x  {_mark(ratio, TOOL_TARGET):<6}  "
            f"{tool.bare_us / text.bare_us:>15.2f}x"
        )


def tool_text_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    by_key = {(r.provider, r.kind, r.size): r for r in rows}
    return [
        (r, by_key[(r.provider, "tool", r.size)])
        for r in rows
        if r.kind == "text" and (r.provider, "tool", r.size) in by_key
    ]


def as_json(rows: list[Row], repeat: int, mode: str = "inprocess") -> dict[str, Any]:
    return {
        "mode": mode,
        "repeat": repeat,
        "targets": {"stream_core_over_bare": TEXT_TARGET, "tool_over_text": TOOL_TARGET},
        "rows": [
            {
                "provider": r.provider,
                "stream": r.kind,
                "size": r.size,
                "events": r.events,
                "bare_s": r.bare_s,
                "stream_core_s": r.core_s,
                "bare_us_per_event": r.bare_us,
                "stream_core_us_per_event": r.core_us,
                "ratio": r.ratio,
                "bare_peak_rss_kb": r.bare_rss_kb or None,
                "stream_core_peak_rss_kb": r.core_rss_kb or None,
            }
            for r in rows
        ],
        "tool_over_text": [
            {
                "provider": t.provider,
                "size": t.size,
                "ratio": u.core_us / t.core_us,
                "bare_ratio": u.bare_us / t.bare_us,
            }
            for t, u in tool_text_pairs(rows)
        ],
    }


# --- entry --------------------------------------------------------------------------------


async def run_single(
    provider: str,
    kind: str,
    side: str,
    size: int,
    body_file: Path | None,
    url: str | None,
    events: int | None = None,
) -> int:
    """One replay, no warm-up, no check beyond event counts: what cachegrind measures.
    `events`: the body's (the parent knows it); else a tiny body tells them."""
    if url is not None:
        # The server has the body; this process only counts what it reads. The events
        # around the deltas are a constant per provider and kind: a tiny body tells them
        # (generating the full one here would add work that grows with the size).
        if events is None:
            events = size + (make_body(provider, kind, 8).events - 8)
        if side == "bare":
            async with httpx.AsyncClient(timeout=None) as client:
                n = await run_bare(client, provider, url + "/bench")
        else:
            n, message = await run_core(None, socket_model(provider, url))
            assert message.error is None, (n, message.error)
            n = events
        return n
    if body_file is not None:
        # Read, not generated: generation grows with size and would not cancel out.
        data = body_file.read_bytes()
        events = count_events(data)
    else:
        body = make_body(provider, kind, size)
        data, events = body.data, body.events
    async with make_client(data, sniff_media(data)) as client:
        if side == "bare":
            n = await run_bare(client, provider)
            assert n == events, (n, events)
        else:
            n, message = await run_core(client, bench_model(provider))
            assert n == size + 4 and message.error is None, (n, message.error)
    return events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per side (best kept)")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[20000],
        help="deltas / argument fragments per stream",
    )
    parser.add_argument("--only", choices=KINDS, help="run one stream kind")
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument(
        "--single",
        nargs=4,
        metavar=("PROVIDER", "KIND", "SIDE", "SIZE"),
        help="replay once without warm-up (for cachegrind)",
    )
    parser.add_argument("--body", type=Path, help="with --single: read the body from FILE")
    parser.add_argument(
        "--url", help="with --single: read the body from a benchmarks/server.py base URL"
    )
    parser.add_argument("--events", type=int, help="with --url: the body's events")
    parser.add_argument(
        "--mode",
        choices=("inprocess", "socket"),
        default="inprocess",
        help="where the bytes come from (default: in-process)",
    )
    args = parser.parse_args(argv)

    if args.single:
        provider, kind, side, size = args.single
        if provider not in PROVIDERS or kind not in KINDS or side not in SIDES:
            parser.error(f"--single wants one of {PROVIDERS}, {KINDS}, {SIDES} and a size")
        events = asyncio.run(
            run_single(provider, kind, side, int(size), args.body, args.url, args.events)
        )
        print(json.dumps({"events": events, "rss_kb": peak_rss_self_kb()}))
        return 0

    kinds = [args.only] if args.only else list(KINDS)
    rows = []
    server = Loopback() if args.mode == "socket" else None
    try:
        for size in args.sizes:
            for provider in args.providers:
                for kind in kinds_for(provider, kinds):
                    body = make_body(provider, kind, size)
                    if server is None:
                        rows.append(asyncio.run(measure(body, args.repeat)))
                    else:
                        server.add(body_name(body), body.data)
                        row = asyncio.run(measure_socket(body, args.repeat, server))
                        url = server.base_url(body_name(body))
                        row.bare_rss_kb = peak_rss_kb(body, "bare", url)
                        row.core_rss_kb = peak_rss_kb(body, "stream-core", url)
                        rows.append(row)
                    if not args.json:
                        print(f"  measured {provider} {kind} {size}", file=sys.stderr)
    finally:
        if server is not None:
            server.close()
    if args.json:
        print(json.dumps(as_json(rows, args.repeat, args.mode), indent=2))
    else:
        print_tables(rows, args.repeat, args.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
