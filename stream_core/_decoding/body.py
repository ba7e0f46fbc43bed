"""The body's bytes: content-decoded here, a bounded piece at a time, never by httpx.

Split from `_transport` (which re-exports `body_chunks`): a response body's decoding is a
stage of its own, below the pipeline that reads it.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx

from .._errors import ProtocolError

__all__ = ["body_chunks", "close_body", "is_decoded_body"]

_PIECE = 64 * 1024
"""The most one step of content decoding yields: a small compressed body that inflates to
gigabytes is decoded a bounded piece at a time, so whoever reads it can stop at its cap."""


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body's bytes, content-decoded here, never by httpx.

    httpx decodes a whole network read at once, with no bound on what it inflates to (1.8 KB
    of `gzip, gzip` is a gigabyte). We ask for `accept-encoding: identity`; a server that
    compresses anyway gets one layer of gzip or deflate (or br, with a `brotli` that can
    bound its output) decoded `_PIECE` bytes at a time. Stacked or unknown codings, which no
    vendor sends, raise `ProtocolError` without a byte decoded. A body already in memory (a
    mock's) is read as httpx has it.
    """
    header = response.headers.get("content-encoding", "")
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if response.is_stream_consumed or not codings:
        return response.aiter_bytes() if response.is_stream_consumed else response.aiter_raw()
    if len(codings) > 1 or _inflater(codings[0]) is None:
        raise ProtocolError(f"body in content-encoding {header[:80]!r}: not decoded")
    return _decoded(response, response.aiter_raw(), codings[0])


def _inflater(coding: str) -> Callable[[bytes, int], bytes] | None:
    """A bounded step `(data, max_out) -> out` for `coding`; None for one we don't decode.

    `data` is the input not consumed by the previous step, or b"" for more of its output."""
    if coding in ("gzip", "x-gzip", "deflate"):
        return _Inflate(coding).step
    if coding == "br":
        try:
            import brotli  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            return None
        dec = brotli.Decompressor()
        try:
            dec.process(b"", output_buffer_limit=1)
        except TypeError:  # an older brotli cannot bound its output
            return None

        def unbrotli(data: bytes, limit: int) -> bytes:
            if not data and dec.can_accept_more_data():
                return b""
            return bytes(dec.process(data, output_buffer_limit=limit))

        return unbrotli
    return None


class _Inflate:
    __slots__ = ("_d", "_first", "_raw_fallback")

    def __init__(self, coding: str) -> None:
        self._d = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS)
        self._first = True
        self._raw_fallback = coding == "deflate"

    def step(self, data: bytes, limit: int) -> bytes:
        d = self._d
        data = data or d.unconsumed_tail
        try:
            out = d.decompress(data, limit)
        except zlib.error:
            if not (self._raw_fallback and self._first):
                raise
            # Some servers send raw deflate, without the zlib wrapper.
            d = self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            out = d.decompress(data, limit)
        self._first = False
        return out


async def _decoded(
    response: httpx.Response, raw: AsyncIterator[bytes], coding: str
) -> AsyncIterator[bytes]:
    step = _inflater(coding)
    assert step is not None
    try:
        async for data in raw:
            out = step(data, _PIECE)
            while out:
                yield out
                # The rest of this input, or more output from it, a piece at a time.
                out = step(b"", _PIECE)
    except zlib.error as exc:
        raise ProtocolError(f"body in content-encoding {coding!r} is corrupt: {exc}") from None
    except Exception as exc:
        if type(exc).__name__ != "error":  # brotli.error
            raise
        raise ProtocolError(f"body in content-encoding {coding!r} is corrupt") from None
    finally:
        # Closed early, this generator stops here; the raw body under it is closed and run
        # out (not inflated on: what was received may inflate to gigabytes).
        await close_body(response, raw)


def is_decoded_body(chunks: object) -> bool:
    """Whether `chunks` is a body decoded here (it runs out the raw one under it itself)."""
    return getattr(chunks, "ag_code", None) is _decoded.__code__


_RUN_OUT_STEPS = 256
"""At most this many reads of what was already received when a body is closed early."""


async def close_body(response: httpx.Response | None, chunks: Any) -> None:
    """Close `response` and the iterator over its body, leaving nothing to the GC.

    httpx and httpcore nest five async generators under `Response.aiter_raw` (one per
    layer: client, transport, pool, connection, h11 reader). Closing the outer one before
    the body's end stops only that one: the inner ones stay suspended until the garbage
    collector finds them, and trio's finalizer warns for each (`ResourceWarning`, or an
    "Exception ignored" traceback under `-W error`). So the response is closed first (its
    connection too, when the body was not read to the end), then the chain is run on: the
    next read fails at once at the bottom, and that failure ends every generator on its way
    up. The reads run in a cancelled scope, so a body that is not a socket's (a mock's
    generator that sleeps) ends at its first wait instead of being waited for. An HTTP/2
    body is only closed: its connection is shared, and a read on it would wait for frames
    of other streams.
    """
    with anyio.CancelScope(shield=True):
        if response is not None:
            connection = _h11_connection(response)
            try:
                await response.aclose()
            except Exception:  # a closed client's pool, a custom transport: closed anyway
                pass
            if connection is not None:
                await _close_if_unread(connection)
        if chunks is None:
            return
        http2 = response is not None and response.http_version == "HTTP/2"
        # (A decoded body runs out the raw one under it itself, when closed.)
        decoded = is_decoded_body(chunks)
        if not (http2 or decoded) and getattr(chunks, "ag_frame", True) is not None:
            with anyio.CancelScope() as reads:
                reads.cancel()
                try:
                    for _ in range(_RUN_OUT_STEPS):
                        await chunks.__anext__()
                except Exception:  # StopAsyncIteration, or the closed connection's error
                    pass
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                pass


def _h11_connection(response: httpx.Response) -> Any:
    """The httpcore HTTP/1.1 connection under `response` (httpx's default transport, ours
    or a caller's client), else None. Read through private attributes, defensively: a
    transport of another shape is simply not checked."""
    stream: Any = response.stream
    for _ in range(6):
        if type(stream).__name__ == "HTTP11ConnectionByteStream":
            return getattr(stream, "_connection", None)
        stream = getattr(stream, "_stream", None) or getattr(stream, "_httpcore_stream", None)
        if stream is None:
            return None
    return None


async def _close_if_unread(connection: Any) -> None:
    """Close a connection that went back to the pool with bytes after its response (a
    server that wrote a second response, or anything, behind the first): reused, the next
    call would read those bytes as its own answer."""
    try:
        left, _ = connection._h11_state.trailing_data
        if not left or connection.is_closed():
            return
        await connection.aclose()  # the pool drops a closed connection
    except Exception:  # another httpcore: nothing to check
        pass
