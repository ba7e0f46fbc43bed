"""Bytes to AWS event-stream messages (Bedrock's binary framing), chunk-boundary invariant.

One message:

    total length (u32) | headers length (u32) | prelude CRC32 (u32)
    headers (name len u8, name, type u8, value) ... | payload | message CRC32 (u32)

Both CRCs are checked (CRC32, as `zlib.crc32`, over the prelude and over everything before
the message CRC). A bad CRC, a length no message can have or a header of an unknown type
raises `FramingError` (a `ProtocolError` that carries the whole frames decoded before it):
past a corrupt prelude no later frame boundary can be trusted, so the stream cannot
resync, and every later call fails the same way. A body cut mid-message decodes to the
whole messages before the cut (the stream then ends as one that stopped early).

Whole messages are read in place from the chunk that holds them; the start of a message
cut by a chunk's end is kept, appended to until the message is whole, then read once, so
any chunking costs O(body size).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import NamedTuple

from .sse import FramingError

__all__ = ["EventStreamDecoder", "EventStreamFrame"]

_PRELUDE = 12
_MIN_MESSAGE = _PRELUDE + 4
_MAX_MESSAGE = 16 * 1024 * 1024  # the framing's documented limits
_MAX_HEADERS = 128 * 1024
_U32 = struct.Struct(">I")
_PRELUDE_FIELDS = struct.Struct(">III")

# Header value type -> fixed size in bytes (None: u16 length-prefixed bytes or string).
_HEADER_SIZES: dict[int, int | None] = {
    0: 0,  # bool true
    1: 0,  # bool false
    2: 1,  # byte
    3: 2,  # short
    4: 4,  # integer
    5: 8,  # long
    6: None,  # byte array
    7: None,  # string
    8: 8,  # timestamp
    9: 16,  # uuid
}
_STRING = 7


class EventStreamFrame(NamedTuple):
    """One message, shaped like an SSE event: `event` is its `:event-type`, or for an
    exception (`:message-type: exception`) its `:exception-type`, or for an error message its
    `:error-code` (with "Exception" appended when it lacks it: AWS exception types all end
    so, which is how a translator tells failures from events); `data` is the payload as
    text (an error message's `:error-message` as `{"message": ...}`)."""

    event: str
    data: str
    message_type: str


def _headers(raw: bytes) -> dict[str, str]:
    """The string headers of a message (the others are skipped: Bedrock sends none)."""
    out: dict[str, str] = {}
    i, end = 0, len(raw)
    while i < end:
        name_len = raw[i]
        i += 1
        name = raw[i : i + name_len]
        i += name_len
        if i >= end:
            raise FramingError("event-stream header cut short")
        kind = raw[i]
        i += 1
        if kind not in _HEADER_SIZES:
            raise FramingError(f"event-stream header of unknown type {kind}")
        size = _HEADER_SIZES[kind]
        if size is None:
            if i + 2 > end:
                raise FramingError("event-stream header cut short")
            size = int.from_bytes(raw[i : i + 2], "big")
            i += 2
        if i + size > end:
            raise FramingError("event-stream header cut short")
        if kind == _STRING:
            out[name.decode("utf-8", "replace")] = raw[i : i + size].decode("utf-8", "replace")
        i += size
    return out


class _Kind(NamedTuple):
    """What a message's headers say: its name, message type, and the text an error-type
    message carries in a header rather than in its payload."""

    event: str
    message_type: str
    fallback: str


def _kind(raw: bytes) -> _Kind:
    headers = _headers(raw)
    message_type = headers.get(":message-type", "event")
    if message_type == "event":
        return _Kind(headers.get(":event-type", ""), message_type, "")
    if message_type == "exception":
        # An exception with no payload still has to reach the translator.
        return _Kind(headers.get(":exception-type", "") or "exception", message_type, "{}")
    # `:message-type: error` carries its code and text in headers, not in the payload; the
    # name ends in "Exception" like an exception's, so a translator tells both from events.
    code = headers.get(":error-code", "") or "error"
    if not code.endswith("Exception"):
        code += "Exception"
    text = json.dumps({"message": headers.get(":error-message", "")})
    return _Kind(code, message_type, text)


_new_frame = tuple.__new__

# Header bytes -> their reading. A vendor repeats the same few header blocks (one per event
# type), so each is parsed once per process.
_KINDS: dict[bytes, _Kind] = {}
_KINDS_LIMIT = 256


class EventStreamDecoder:
    """Body bytes to `EventStreamFrame`s (the `Decoder` protocol of `stream_core._decoding.sse`)."""

    __slots__ = ("_buffer", "_error", "_last", "_need", "max_event_bytes")
    media_types: tuple[str, ...] = ("application/vnd.amazon.eventstream",)

    def __init__(self) -> None:
        self._buffer = bytearray()
        """The start of a message cut by a chunk's end (empty between messages)."""
        self._need = _PRELUDE
        """Bytes `_buffer` must hold before it is worth reading: a prelude, or once the
        prelude is read, the whole message (so a large message arriving in many small
        chunks is appended, not re-read, chunk by chunk)."""
        self._error: FramingError | None = None
        self._last: tuple[bytes, _Kind] = (b"", _Kind("", "", ""))
        """The last header block read and its reading: a stream repeats one (its delta
        event's), so comparing to it is cheaper than hashing it for `_KINDS`."""
        self.max_event_bytes = _MAX_MESSAGE
        """Set by the stream from `StreamOptions.max_event_bytes` (the format's own limit,
        16 MiB, holds whatever it says)."""

    def decode(self, chunk: bytes) -> list[EventStreamFrame]:
        if self._error is not None:
            raise self._error
        out: list[EventStreamFrame] = []
        buf = self._buffer
        if buf:
            buf += chunk
            if len(buf) < self._need:
                return out
            data = bytes(buf)  # one copy per cut message; whole ones are read from the chunk
            buf.clear()
        else:
            data = chunk if chunk.__class__ is bytes else bytes(chunk)
        # One loop, read in place from the chunk (a vendor sends about one message per
        # chunk): a Python-level call or a memoryview per message costs as much as the
        # rest of the framing.
        pos, size = 0, len(data)
        crc32, unpack, kinds = zlib.crc32, _PRELUDE_FIELDS.unpack_from, _KINDS
        need = _PRELUDE
        last_raw, last_kind = self._last
        try:
            while size - pos >= _PRELUDE:
                total, headers_len, prelude_crc = unpack(data, pos)
                if crc32(data[pos : pos + 8]) != prelude_crc:
                    raise FramingError("event-stream prelude CRC mismatch")
                if not _MIN_MESSAGE <= total <= _MAX_MESSAGE:
                    raise FramingError(f"event-stream message length {total} is impossible")
                if total > self.max_event_bytes:
                    raise FramingError(f"event-stream frame over {self.max_event_bytes} bytes")
                if headers_len > min(total - _MIN_MESSAGE, _MAX_HEADERS):
                    raise FramingError(f"event-stream headers length {headers_len} is impossible")
                if size - pos < total:
                    need = total
                    break
                end = pos + total - 4
                if crc32(data[pos:end]) != _U32.unpack_from(data, end)[0]:
                    raise FramingError("event-stream message CRC mismatch")
                body = pos + _PRELUDE + headers_len
                raw = data[pos + _PRELUDE : body]
                if raw == last_raw:
                    event, message_type, fallback = last_kind
                else:
                    kind = kinds.get(raw)
                    if kind is None:
                        kind = _kind(raw)
                        if len(kinds) < _KINDS_LIMIT:
                            kinds[raw] = kind
                    self._last = last_raw, last_kind = raw, kind
                    event, message_type, fallback = kind
                if end > body:
                    try:
                        text = data[body:end].decode()  # no arguments: the fast path
                    except UnicodeDecodeError:
                        text = data[body:end].decode("utf-8", "replace")
                else:
                    text = fallback
                # tuple.__new__: no Python-level call per frame (NamedTuple's own __new__ is one)
                out.append(_new_frame(EventStreamFrame, (event, text, message_type)))
                pos += total
        except FramingError as error:
            # Past a corrupt frame nothing can be trusted: every later call fails too.
            self._error = FramingError(str(error))
            error.frames = out
            raise
        if pos < size:
            buf += memoryview(data)[pos:]
            self._need = need
        return out

    def flush(self) -> list[EventStreamFrame]:
        if self._error is not None:
            raise self._error
        # A message cut by the end of the body is not a message.
        self._buffer = bytearray()
        self._need = _PRELUDE
        return []
