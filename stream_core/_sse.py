"""Bytes to server-sent events, chunk-boundary invariant.

UTF-8 is decoded incrementally (a character split across chunks is kept whole), lines
split on CR, LF and CRLF only (httpx-sse's line decoder, not `str.splitlines`, which would
break a JSON string holding U+2028 or U+0085), and fields are read by httpx-sse's
`SSEDecoder` (comments and `retry:` ignored). An event the body does not finish with a
blank line is dropped, as the SSE spec says.
"""

from __future__ import annotations

import codecs

from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

__all__ = ["SSEBytesDecoder"]


class SSEBytesDecoder:
    __slots__ = ("_events", "_lines", "_started", "_text")

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
