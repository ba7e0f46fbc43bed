"""Bytes to server-sent events, chunk-boundary invariant.

UTF-8 is decoded incrementally (a character split across chunks is kept whole), lines
split on CR, LF and CRLF only (as httpx-sse splits them, not `str.splitlines`, which would
break a JSON string holding U+2028 or U+0085), and fields are read as httpx-sse's
`SSEDecoder` reads them (comments ignored), in one loop per chunk. An event the body does
not finish with a blank line is dropped, as the SSE spec says.

Every decoder here holds at most `max_event_bytes` of an unfinished line, event or frame
(`StreamOptions.max_event_bytes`, set by the stream): past it, `FramingError("... over N
bytes")` with the frames before it, so a server that never ends a line cannot grow memory
without limit. The check is a running count, so reaching the cap costs linear time.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from pydantic_core import from_json

from .._errors import ProtocolError

__all__ = ["Decoder", "Frame", "NDJSONBytesDecoder", "SSEBytesDecoder", "SSEEvent"]


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
    in more than that many bytes (`_pipeline.stream`).
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


class SSEEvent(NamedTuple):
    """One server-sent event: its name (`message` when the event named none), its data
    lines joined by LF, and the last event id and `retry` seen, as in httpx-sse's
    `ServerSentEvent` (a tuple: built and read without a Python-level call per event)."""

    event: str
    data: str
    id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        return json.loads(self.data)


_new_event = tuple.__new__

_PIECE = 4096
"""A larger chunk (a mock transport's, a proxy's buffer) is decoded this many bytes at a
time. Decoded whole, a 64 KB chunk with one astral character is a 256 KB string: chunks of
varying widths, allocated and freed in turn, fragmented the C heap by up to 6 MB in a
20,000-event replay; pieces this size do not."""


class SSEBytesDecoder:
    """Bytes to server-sent events (`text/event-stream`), the default `WireAPI.decoder`.

    The result is the same however the body is chunked: a UTF-8 character or a line split
    across chunks is kept whole, and a leading byte-order mark is dropped. Lines and fields
    are read as httpx-sse reads them (`SSELineDecoder` and `SSEDecoder`), in one loop per
    chunk rather than one call per line.
    """

    __slots__ = (
        "_cr",
        "_data",
        "_event",
        "_event_size",
        "_held",
        "_id",
        "_parts",
        "_retry",
        "_started",
        "_text",
        "max_event_bytes",
    )
    media_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._parts: list[str] = []
        """The unfinished line, as the pieces that arrived (joined once, when it ends)."""
        self._cr = False
        """The text so far ended with a CR: the next text's LF, if it starts with one,
        belongs to the same line end."""
        self._event = ""
        self._data: list[str] = []
        self._id = ""
        self._retry: int | None = None
        self._started = False
        self._held = 0
        """Characters of the unfinished line held in `_parts`."""
        self._event_size = 0
        """Characters of the lines of the event not yet dispatched."""
        self.max_event_bytes = DEFAULT_MAX_EVENT_BYTES

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        if len(chunk) <= _PIECE:  # every chunk off a socket, in practice
            return self._decode(chunk)
        out: list[SSEEvent] = []
        for start in range(0, len(chunk), _PIECE):
            try:
                out += self._decode(chunk[start : start + _PIECE])
            except FramingError as exc:
                exc.frames = [*out, *exc.frames]
                raise
        return out

    def _decode(self, chunk: bytes) -> list[SSEEvent]:
        text = self._text(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return []
        lines = self._split(text)
        if not lines:
            if self._held > self.max_event_bytes:
                raise FramingError(f"SSE line over {self.max_event_bytes} bytes")
            return []
        out = self._feed(lines)
        if self._held > self.max_event_bytes:
            raise FramingError(f"SSE line over {self.max_event_bytes} bytes", out)
        return out

    def flush(self) -> list[SSEEvent]:
        tail = self._text(b"", final=True)
        lines = self._split(tail) if tail else []
        if self._cr:
            # A held CR ends its line; an unterminated line is dropped with its event.
            lines.append("".join(self._parts))
            self._parts, self._held, self._cr = [], 0, False
        return self._feed(lines)

    def _split(self, text: str) -> list[str]:
        """The lines `text` completes (CR, LF and CRLF end a line; nothing else does)."""
        if self._cr:
            text = "\r" + text
            self._cr = False
        if "\r" in text:
            if text[-1] == "\r":
                self._cr = True
                text = text[:-1]
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        tail = lines.pop()
        parts = self._parts
        if not lines:
            if tail:
                parts.append(tail)
                self._held += len(tail)
            return lines
        if parts:
            parts.append(lines[0])
            lines[0] = "".join(parts)
        if tail:
            self._parts, self._held = [tail], len(tail)
        elif parts:
            self._parts, self._held = [], 0
        return lines

    def _feed(self, lines: list[str]) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        cap = self.max_event_bytes
        size = self._event_size
        event, data, last_id, retry = self._event, self._data, self._id, self._retry
        try:
            for line in lines:
                if line:
                    size += len(line)
                    if size > cap:
                        raise FramingError(f"SSE event over {cap} bytes", out)
                    name, _, value = line.partition(":")
                    if value[:1] == " ":
                        value = value[1:]
                    if name == "data":
                        data.append(value)
                    elif name == "event":
                        event = value
                    elif name == "id":
                        if "\0" not in value:
                            last_id = value
                    elif name == "retry":
                        try:
                            retry = int(value)
                        except ValueError:
                            pass
                    # Other fields, and comments (an empty name), are ignored.
                else:
                    size = 0  # a blank line ends the event, dispatched or not
                    if data or event or last_id or retry is not None:
                        item = (event or "message", "\n".join(data), last_id, retry)
                        out.append(_new_event(SSEEvent, item))
                        event, retry = "", None
                        data.clear()
        finally:
            self._event_size = size
            self._event, self._id, self._retry = event, last_id, retry
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
        out: list[Frame] = []
        for line in lines:  # a loop, not a call per line: this runs once per event
            if line and not line.isspace():
                text = line.rstrip(b"\r").decode("utf-8", "replace")
                out.append(_new_event(Frame, ("", text)))
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
