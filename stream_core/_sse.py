"""Bytes to server-sent events, chunk-boundary invariant.

UTF-8 is decoded incrementally (a character split across chunks is kept whole), lines
split on CR, LF and CRLF only (httpx-sse's line decoder, not `str.splitlines`, which would
break a JSON string holding U+2028 or U+0085), and fields are read by httpx-sse's
`SSEDecoder` (comments and `retry:` ignored). An event the body does not finish with a
blank line is dropped, as the SSE spec says.
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


class Decoder(Protocol):
    """Turns body bytes into events with `.event` and `.data`, whatever the chunking."""

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

    __slots__ = ("_events", "_lines", "_started", "_text")
    media_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = SSELineDecoder()
        self._events = SSEDecoder()
        self._started = False

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
        return self._feed(self._lines.decode(text))

    def flush(self) -> list[ServerSentEvent]:
        tail = self._text.decode(b"", final=True)
        lines = self._lines.decode(tail) if tail else []
        if self._lines.trailing_cr:
            # A held CR ends its line; an unterminated line is dropped with its event.
            lines += self._lines.flush()
        return self._feed(lines)

    def _feed(self, lines: list[str]) -> list[ServerSentEvent]:
        decode = self._events.decode
        out = []
        for line in lines:
            sse = decode(line)
            if sse is not None:
                out.append(sse)
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

    __slots__ = ("_parts",)
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

    def decode(self, chunk: bytes) -> list[Frame]:
        if b"\n" not in chunk:
            if chunk:
                self._parts.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._parts:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
        tail = lines.pop()
        self._parts = [tail] if tail else []
        return [self._frame(line) for line in lines if line and not line.isspace()]

    def flush(self) -> list[Frame]:
        tail = b"".join(self._parts)
        self._parts = []
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
