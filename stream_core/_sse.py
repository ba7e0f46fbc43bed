"""Bytes to server-sent events, chunk-boundary invariant.

UTF-8 is decoded incrementally (a character split across chunks is kept whole), lines
split on CR, LF and CRLF only (httpx-sse's line decoder, not `str.splitlines`, which would
break a JSON string holding U+2028 or U+0085), and fields are read by httpx-sse's
`SSEDecoder` (comments and `retry:` ignored). An event the body does not finish with a
blank line is dropped, as the SSE spec says.

Every decoder here holds at most `max_event_bytes` of an unfinished line, event or frame
(`StreamOptions.max_event_bytes`, set by the stream): past it, `FramingError("... over N
bytes")` with the frames before it, so a server that never ends a line cannot grow memory
without limit. The check is a running count, so reaching the cap costs linear time.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from pydantic_core import from_json

from ._errors import ProtocolError

__all__ = ["Decoder", "Frame", "NDJSONBytesDecoder", "SSEBytesDecoder"]


class _Event(Protocol):
    @property
    def event(self) -> str: ...
    @property
    def data(self) -> str: ...


DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


class Decoder(Protocol):
    """Turns body bytes into events with `.event` and `.data`, whatever the chunking.

    A decoder with a `max_event_bytes` attribute gets `StreamOptions.max_event_bytes` in
    it and enforces it itself; for one without, the stream ends a body that gives no frame
    in more than that many bytes (`_stream`).
    """

    media_types: tuple[str, ...]
    """Content types that announce this framing; another 2xx answer is read whole."""

    def decode(self, chunk: bytes) -> Sequence[_Event]: ...
    def flush(self) -> Sequence[_Event]: ...


class FramingError(ProtocolError):
    """Raised by `Decoder.decode` for bytes that cannot be framed (a bad checksum, an
    impossible length), with the whole frames that came before them in the same chunk: the
    stream delivers those, then ends `protocol`."""

    def __init__(self, message: str, frames: Sequence[_Event] = ()) -> None:
        super().__init__(message)
        self.frames = frames


class SSEBytesDecoder:
    """Bytes to server-sent events (`text/event-stream`), the default `WireAPI.decoder`.

    The result is the same however the body is chunked: a UTF-8 character or a line split
    across chunks is kept whole, and a leading byte-order mark is dropped.
    """

    __slots__ = (
        "_event_size",
        "_events",
        "_held",
        "_lines",
        "_started",
        "_text",
        "max_event_bytes",
    )
    media_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = SSELineDecoder()
        self._events = SSEDecoder()
        self._started = False
        self._held = 0
        """Characters of the unfinished line held by `_lines`."""
        self._event_size = 0
        """Characters of the lines of the event not yet dispatched."""
        self.max_event_bytes = DEFAULT_MAX_EVENT_BYTES

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._text.decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return []
        lines = self._lines.decode(text)
        if lines:
            held = self._lines.buffer
            self._held = len(held[0]) if held else 0
        else:
            self._held += len(text)
        out = self._feed(lines)
        if self._held > self.max_event_bytes:
            raise FramingError(f"SSE line over {self.max_event_bytes} bytes", out)
        return out

    def flush(self) -> list[ServerSentEvent]:
        tail = self._text.decode(b"", final=True)
        lines = self._lines.decode(tail) if tail else []
        if self._lines.trailing_cr:
            # A held CR ends its line; an unterminated line is dropped with its event.
            lines += self._lines.flush()
        return self._feed(lines)

    def _feed(self, lines: list[str]) -> list[ServerSentEvent]:
        decode = self._events.decode
        out: list[ServerSentEvent] = []
        size = self._event_size
        for line in lines:
            if line:
                size += len(line)
                if size > self.max_event_bytes:
                    raise FramingError(f"SSE event over {self.max_event_bytes} bytes", out)
            else:
                size = 0  # a blank line ends the event, dispatched or not
            sse = decode(line)
            if sse is not None:
                out.append(sse)
        self._event_size = size
        return out


class Frame(NamedTuple):
    """One NDJSON line, shaped like an SSE event with no name."""

    event: str
    data: str


class NDJSONBytesDecoder:
    """Bytes to one frame per line, for vendors that stream newline-delimited JSON.

    Lines are split on LF at the byte level (a CRLF's CR is dropped), before decoding, so a
    multi-byte character or a U+2028 inside a JSON string never splits a line. A last line
    without its newline is kept only when it is complete JSON: a connection cut mid-line
    must read as a stream that ended early, not as a malformed record.
    """

    __slots__ = ("_held", "_parts", "max_event_bytes")
    media_types: tuple[str, ...] = (
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/json-lines",
    )

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        """The unfinished line, as the pieces that arrived: joined once, when it ends, so a
        long line in small chunks costs O(its length), not O(length x chunks)."""
        self._held = 0
        """Bytes in `_parts`."""
        self.max_event_bytes = DEFAULT_MAX_EVENT_BYTES

    def decode(self, chunk: bytes) -> list[Frame]:
        if b"\n" not in chunk:
            if chunk:
                self._parts.append(chunk)
                self._held += len(chunk)
                if self._held > self.max_event_bytes:
                    raise FramingError(f"NDJSON line over {self.max_event_bytes} bytes")
            return []
        lines = chunk.split(b"\n")
        if self._parts:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
        tail = lines.pop()
        self._parts = [tail] if tail else []
        self._held = len(tail)
        out = [self._frame(line) for line in lines if line and not line.isspace()]
        if self._held > self.max_event_bytes:
            raise FramingError(f"NDJSON line over {self.max_event_bytes} bytes", out)
        return out

    def flush(self) -> list[Frame]:
        tail = b"".join(self._parts)
        self._parts = []
        self._held = 0
        if not tail or tail.isspace():
            return []
        try:
            from_json(tail)
        except ValueError:
            return []
        return [self._frame(tail)]

    @staticmethod
    def _frame(line: bytes) -> Frame:
        return Frame("", line.rstrip(b"\r").decode("utf-8", "replace"))
