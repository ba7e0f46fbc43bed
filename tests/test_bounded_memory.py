"""Bounded memory for any body (CONTRACT 5).

Peak memory is measured in a subprocess (`memory_probe.py`) against a loopback server: a
compression bomb on an error body or a stream, stacked codings, a non-streamed answer
that never ends, and a line that never ends, for every API the kit tests. The bounds are
generous (the cap is 8 MB; a call may add at most 80 MB to the peak), the failures they
catch are not (4 GB for the 1.8 KB bomb before this was fixed). The decoders' caps, their
linear cost and the bounded process-wide sets are tested in this process.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_growth import growth_ratio

import stream_core._cost as cost_module
import stream_core._pipeline.assembler as assembler_module
from stream_core import AssistantMessage, Model, StreamOptions
from stream_core._decoding.eventstream import EventStreamDecoder
from stream_core._decoding.sse import FramingError
from stream_core._errors import KEPT_LIMIT
from stream_core.contract_tests.kit import apis_under_test
from stream_core.provider import Assembler, NDJSONBytesDecoder, SSEBytesDecoder

APIS = apis_under_test()
PROBE = Path(__file__).with_name("memory_probe.py")
CAP = 8 * 1024 * 1024
GROWTH = 80.0  # MB a call may add to the peak: ten times the cap, a tenth of a bomb


def probe(case: str, api: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PROBE), case, api, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PROBE.parent.parent,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def grew(result: dict[str, Any]) -> float:
    return float(result["rss_peak_mb"] - result["rss_before_mb"])


# --- peak memory, in a subprocess, against a loopback server ------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_line_that_never_ends_stops_at_the_cap_keeping_content(api: str) -> None:
    result = probe("long-line", api)
    assert result["kind"] == "protocol"
    assert f"over {CAP} bytes" in result["message"]
    assert result["text"], "the content before the long line is kept"
    assert grew(result) < GROWTH, result


@pytest.mark.parametrize("api", ["openai-completions", "ollama-chat"])
def test_the_cap_is_an_option(api: str) -> None:
    result = probe("long-line", api, str(1024 * 1024))
    assert result["kind"] == "protocol"
    assert "over 1048576 bytes" in result["message"]


@pytest.mark.parametrize("api", APIS)
def test_a_compressed_stream_is_decoded_a_piece_at_a_time(api: str) -> None:
    # One layer of gzip (a server that compresses though we asked for identity) is
    # decoded, and the line cap stops a line that inflates to a gigabyte.
    result = probe("bomb-stream", api)
    assert result["kind"] == "protocol"
    assert f"over {CAP} bytes" in result["message"]
    assert result["text"]
    assert grew(result) < GROWTH, result


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_stacked_codings_on_a_stream_are_not_decoded(backend: str) -> None:
    result = probe("bomb-stream-2", "anthropic-messages", "", backend)
    assert result["kind"] == "protocol"
    assert "content-encoding 'gzip, gzip': not decoded" in result["message"]
    assert grew(result) < GROWTH, result


@pytest.mark.parametrize(
    ("case", "api", "kind", "said"),
    [
        ("long-line", "anthropic-messages", "protocol", f"over {CAP} bytes"),
        ("bomb-stream", "ollama-chat", "protocol", f"over {CAP} bytes"),
        ("bomb-error", "openai-completions", "server", "not decoded"),
        ("bomb-json", "openai-completions", "protocol", "over 33554432 bytes"),
    ],
)
def test_the_caps_hold_under_trio(case: str, api: str, kind: str, said: str) -> None:
    """The same bounds with trio's event loop (the probes above run under asyncio, one per
    API: a subprocess each, some 7 s, so trio gets one of each case, not every API)."""
    result = probe(case, api, "", "trio")
    assert result["kind"] == kind and said in result["message"], result
    assert grew(result) < GROWTH + (32 if case == "bomb-json" else 0), result


@pytest.mark.parametrize("api", ["openai-completions", "bedrock-converse-stream"])
def test_an_error_body_bomb_is_not_decoded(api: str) -> None:
    # 1.8 KB of `gzip, gzip` that inflates to 1 GB: the status decides the kind, the body
    # is not read (it once took 4 GB and 164 s).
    result = probe("bomb-error", api)
    assert result["kind"] == "server"
    assert "HTTP 500" in result["message"] and "not decoded" in result["message"]
    assert grew(result) < GROWTH, result


def test_an_error_body_cap_counts_decoded_bytes() -> None:
    result = probe("bomb-error-1", "google-generative-ai")
    assert result["kind"] == "server"
    assert grew(result) < GROWTH, result


def test_a_non_streamed_answer_is_capped_after_decoding() -> None:
    result = probe("bomb-json", "openai-completions")
    assert result["kind"] == "protocol"
    assert "over 33554432 bytes" in result["message"]
    assert grew(result) < GROWTH + 32, result  # the 32 MB answer cap itself, and one copy


# --- the decoders' caps -------------------------------------------------------------------


def _capped(decoder: Any, cap: int) -> Any:
    decoder.max_event_bytes = cap
    return decoder


def _feed(decoder: Any, body: bytes, chunk: int = 256) -> tuple[list[Any], FramingError]:
    got: list[Any] = []
    for i in range(0, len(body), chunk):
        try:
            got += decoder.decode(body[i : i + chunk])
        except FramingError as exc:
            return got + list(exc.frames), exc
    raise AssertionError("no FramingError")


@pytest.mark.parametrize("chunk", [1, 256, 70_000])
def test_sse_line_over_the_cap(chunk: int) -> None:
    body = b"data: a\n\n" + b"data: " + b"x" * 5000
    frames, exc = _feed(_capped(SSEBytesDecoder(), 1000), body, chunk)
    assert [f.data for f in frames] == ["a"]
    assert str(exc) == "SSE line over 1000 bytes"


def test_sse_event_of_many_short_lines_over_the_cap() -> None:
    body = b"data: a\n\n" + b"data: xx\n" * 1000
    frames, exc = _feed(_capped(SSEBytesDecoder(), 1000), body)
    assert [f.data for f in frames] == ["a"]
    assert str(exc) == "SSE event over 1000 bytes"


def test_sse_events_under_the_cap_pass_however_many() -> None:
    decoder = _capped(SSEBytesDecoder(), 100)
    events = decoder.decode(b"data: " + b"x" * 90 + b"\n\n" + b": ping\n\n" * 1000)
    assert len(events) == 1


def test_ndjson_line_over_the_cap() -> None:
    body = b'{"a": 1}\n' + b'{"x": "' + b"x" * 5000
    frames, exc = _feed(_capped(NDJSONBytesDecoder(), 1000), body)
    assert [f.data for f in frames] == ['{"a": 1}']
    assert str(exc) == "NDJSON line over 1000 bytes"


def test_event_stream_frame_over_the_cap_fails_at_its_prelude() -> None:
    import zlib

    prelude = (5000).to_bytes(4, "big") + (0).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    with pytest.raises(FramingError, match="event-stream frame over 1000 bytes"):
        _capped(EventStreamDecoder(), 1000).decode(prelude)


def _to_cap(make: Callable[[], Any], head: bytes) -> Callable[[int], Callable[[], None]]:
    def work(size: int) -> Callable[[], None]:
        body = head + b"x" * size
        chunks = [body[i : i + 256] for i in range(0, len(body), 256)]

        def step() -> None:
            decoder = _capped(make(), size)
            try:
                for c in chunks:
                    decoder.decode(c)
            except FramingError:
                return
            raise AssertionError("no cap")

        return step

    return work


@pytest.mark.parametrize(
    ("make", "head"), [(SSEBytesDecoder, b"data: "), (NDJSONBytesDecoder, b'{"x": "')]
)
def test_reaching_the_cap_costs_linear_time(make: Callable[[], Any], head: bytes) -> None:
    assert growth_ratio(_to_cap(make, head)) < 3


def test_max_event_bytes_is_checked_at_the_call() -> None:
    with pytest.raises((TypeError, ValueError)):
        StreamOptions(max_event_bytes=0)
    assert StreamOptions().max_event_bytes == CAP


# --- what is kept across calls ------------------------------------------------------------


def test_unknown_stop_reasons_are_kept_bounded_and_logged_short(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assembler_module, "_warned_unknown", set())
    model = Model(id="m", api="openai-completions", provider="x", base_url="http://127.0.0.1:9")
    with caplog.at_level(logging.WARNING, logger="stream_core"):
        for i in range(KEPT_LIMIT + 100):
            message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
            asm = Assembler(message, model, {"stop": "stop"}, deque())
            asm.set_stop_reason(f"{i:06d}" + "z" * 256 * 1024)
            asm.finalize()
    kept = assembler_module._warned_unknown
    assert len(kept) <= KEPT_LIMIT
    assert max(len(k) for key in kept for k in key) <= 64
    assert max(len(r.getMessage()) for r in caplog.records) < 300


def test_the_price_lookups_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cost_module, "_found", {})
    for i in range(KEPT_LIMIT * 5):
        model = Model(
            id=f"m{i}",
            api="openai-completions",
            provider="openai",
            base_url="https://api.openai.com/v1",
        )
        cost_module._genai_model(model)
    assert len(cost_module._found) <= KEPT_LIMIT * 4


# --- content codings and a plugin's decoder (mock transports: no memory measured) ----------


def _answer(api: str, body: bytes, coding: str) -> Any:
    import httpx

    from stream_core.contract_tests.kit import chunk_stream, framing

    headers = {"content-type": framing(api).media_type, "content-encoding": coding}
    return httpx.Response(200, headers=headers, content=chunk_stream([body]))


async def _run(api: str, response: Any, wire: Any = None, **opts: Any) -> AssistantMessage:
    import httpx

    from stream_core._pipeline.stream import AssistantStream
    from stream_core._registry import get_provider
    from stream_core.contract_tests.kit import contract_context, contract_model, options

    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: response))
    async with client:
        wire = wire or get_provider(api).wire
        stream = AssistantStream(
            wire, contract_model(api), contract_context(), options(client=client, **opts)
        )
        return await stream.result()


def _deflate(body: bytes, wbits: int) -> bytes:
    import zlib

    z = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return z.compress(body) + z.flush()


@pytest.mark.anyio
@pytest.mark.parametrize("wbits", [15, -15, 31], ids=["deflate", "raw-deflate", "gzip"])
async def test_one_layer_of_compression_is_decoded(wbits: int) -> None:
    from stream_core.contract_tests.kit import text_case

    api = "openai-completions"
    coding = "gzip" if wbits == 31 else "deflate"
    message = await _run(api, _answer(api, _deflate(text_case(api).body, wbits), coding))
    assert message.error is None and message.stop_reason == "stop"
    assert message.content


@pytest.mark.anyio
@pytest.mark.parametrize("coding", ["compress", "gzip, deflate", "zstd"])
async def test_unknown_or_stacked_codings_are_not_decoded(coding: str) -> None:
    api = "anthropic-messages"
    message = await _run(api, _answer(api, b"\x1f\x8b junk", coding))
    assert message.error is not None and message.error.kind == "protocol"
    assert "not decoded" in message.error.message


@pytest.mark.anyio
async def test_a_plugin_decoder_without_a_cap_is_bounded_by_the_stream() -> None:
    import dataclasses

    from stream_core._registry import get_provider

    class Swallow:
        """A decoder that buffers everything and never gives a frame."""

        media_types = ("text/event-stream",)

        def __init__(self) -> None:
            self.held: list[bytes] = []

        def decode(self, chunk: bytes) -> list[Any]:
            self.held.append(chunk)
            return []

        def flush(self) -> list[Any]:
            return []

    api = "openai-completions"
    wire = dataclasses.replace(get_provider(api).wire, decoder=Swallow)  # type: ignore[type-var]

    async def endless() -> Any:
        for _ in range(64):
            yield b"x" * 65536

    import httpx

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=endless())
    message = await _run(api, response, wire, max_event_bytes=1024 * 1024)
    assert message.error is not None and message.error.kind == "protocol"
    assert "over 1048576 bytes" in message.error.message


_HEAP_PROBE = """
import ctypes, sys
from stream_core._decoding.sse import SSEBytesDecoder

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
# 64 KB chunks of mostly ASCII text with Latin-1, CJK and emoji sprinkled in, as model
# output is: the UTF-8 decoder widens its buffer as it meets each.
line = 'data: {"t": "%s"}\\n\\n'
rare = {0: "\\U0001f600", 101: "\\u6f22", 37: "caf\\xe9"}
def word(i):
    return next((w for n, w in rare.items() if i % (n or 499) == 0), "word")
body = "".join(line % word(i) for i in range(120_000)).encode()
chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
# Freeing the whole body (a mapping of its own) raises glibc's mmap threshold, as a
# program's own big buffers do: decoded text then lands in the heap.
del body
before = libc.mallinfo2().fordblks
decoder = SSEBytesDecoder()
n = sum(len(decoder.decode(c)) for c in chunks)
print(n, (libc.mallinfo2().fordblks - before) / 2**20)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="reads glibc's heap statistics",
)
def test_big_chunks_do_not_fragment_the_heap() -> None:
    # 64 KB chunks decoded whole left the C heap fragmented: 0.9 MB here, 3.7-6.4 MB in a
    # 20,000-event replay (a fifth of a bare loop's whole process); in pieces, nothing.
    out = subprocess.run(
        [sys.executable, "-c", _HEAP_PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[0]) > 10_000
    assert float(out[1]) < 0.4, f"{out[1]} MB of the heap left free by the decoder"
