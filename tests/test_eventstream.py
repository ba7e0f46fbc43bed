"""AWS event-stream framing (Bedrock): split-invariant, and corrupt bytes are a protocol
error, never a hang, a wrong frame or another exception."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_core._decoding.sse import FramingError
from stream_core.contract_tests.kit import event_stream_frame, split_at
from stream_core.provider import EventStreamDecoder, ProtocolError

_events = st.lists(
    st.tuples(
        st.sampled_from(["messageStart", "contentBlockDelta", "metadata", "vendorFutureEvent"]),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
    ),
    min_size=1,
    max_size=8,
)


def _decode(chunks: list[bytes]) -> list[tuple[str, str, str]]:
    decoder = EventStreamDecoder()
    frames = [f for c in chunks for f in decoder.decode(c)] + list(decoder.flush())
    return [(f.event, f.data, f.message_type) for f in frames]


def _body(events: list[tuple[str, str]]) -> bytes:
    return b"".join(event_stream_frame(name, text.encode()) for name, text in events)


@given(_events, st.lists(st.integers(min_value=0, max_value=3000)))
def test_any_split_gives_the_same_frames(events: list[tuple[str, str]], cuts: list[int]) -> None:
    # Payload text is UTF-8 and may be cut mid-character by a chunk boundary.
    assert _decode(split_at(_body(events), cuts)) == [(n, t, "event") for n, t in events]


def test_one_byte_chunks_and_a_body_cut_mid_frame() -> None:
    body = _body([("messageStart", '{"role":"assistant"}'), ("metadata", "{}")])
    assert len(_decode([body[i : i + 1] for i in range(len(body))])) == 2
    # A cut inside the second frame: only the first is a frame; the stream then ends early.
    assert [f[0] for f in _decode([body[:-3]])] == ["messageStart"]


def test_exception_frames_carry_the_exception_type() -> None:
    frame = event_stream_frame("throttlingException", b"", message_type="exception")
    assert _decode([frame]) == [("throttlingException", "{}", "exception")]


def _mutations(body: bytes) -> st.SearchStrategy[bytes]:
    """The body with one byte changed, or a corrupt length field with a matching prelude CRC
    (so the lengths themselves are what must be refused)."""
    flips = st.tuples(st.integers(0, len(body) - 1), st.integers(1, 255)).map(
        lambda t: body[: t[0]] + bytes([body[t[0]] ^ t[1]]) + body[t[0] + 1 :]
    )

    def relength(values: tuple[int, int]) -> bytes:
        prelude = struct.pack(">II", *values)
        return prelude + struct.pack(">I", zlib.crc32(prelude)) + body[12:]

    lengths = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)).filter(
        lambda v: v != struct.unpack(">II", body[:8])
    )
    return flips | lengths.map(relength)


_BODY = event_stream_frame("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"hi"}}')


@settings(max_examples=300)
@given(_mutations(_BODY), st.lists(st.integers(min_value=0, max_value=200)))
def test_corruption_is_a_protocol_error_or_an_incomplete_frame(
    body: bytes, cuts: list[int]
) -> None:
    decoder = EventStreamDecoder()
    try:
        frames = [f for c in split_at(body, cuts) for f in decoder.decode(c)]
        frames += decoder.flush()
    except ProtocolError:
        return
    # Undetected only when a longer (valid-looking) length left the frame incomplete: then
    # nothing is emitted and the stream ends as one that stopped early.
    assert frames == []


@pytest.mark.parametrize(
    ("total", "headers"),
    [(0, 0), (15, 0), (17 * 1024 * 1024, 0), (100, 90), (100, 200 * 1024)],
)
def test_impossible_lengths_are_refused_before_waiting_for_them(total: int, headers: int) -> None:
    prelude = struct.pack(">II", total, headers)
    with pytest.raises(ProtocolError, match="impossible"):
        EventStreamDecoder().decode(prelude + struct.pack(">I", zlib.crc32(prelude)))


def test_bad_crcs_are_named() -> None:
    with pytest.raises(ProtocolError, match="prelude CRC"):
        EventStreamDecoder().decode(_BODY[:8] + b"\0\0\0\0" + _BODY[12:])
    with pytest.raises(ProtocolError, match="message CRC"):
        EventStreamDecoder().decode(_BODY[:-4] + b"\0\0\0\0")


def test_unknown_header_type_is_a_protocol_error() -> None:
    headers = b"\x01x\x0c"  # type 12 does not exist
    total = 12 + len(headers) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers
    with pytest.raises(ProtocolError, match="unknown type"):
        EventStreamDecoder().decode(head + struct.pack(">I", zlib.crc32(head)))


def test_buffer_stays_bounded_over_many_frames() -> None:
    """Consumed bytes are dropped: a long stream does not keep its whole body."""
    frame = event_stream_frame("contentBlockDelta", b"x" * 100)
    decoder = EventStreamDecoder()
    for _ in range(2000):
        assert len(decoder.decode(frame[:50])) == 0
        assert len(decoder.decode(frame[50:])) == 1
    assert len(decoder._buffer) < 4 * len(frame)


def test_frames_before_a_corrupt_one_are_kept_and_the_decoder_stays_failed() -> None:
    good = event_stream_frame("messageStart", b"{}")
    bad = bytearray(_BODY)
    bad[-1] ^= 1
    decoder = EventStreamDecoder()
    with pytest.raises(FramingError) as caught:
        decoder.decode(good + bytes(bad) + good)
    assert [f.event for f in caught.value.frames] == ["messageStart"]
    with pytest.raises(FramingError):
        decoder.decode(good)
    with pytest.raises(FramingError):
        decoder.flush()


def test_error_messages_carry_their_code_and_text() -> None:
    headers = b""
    for name, value in (
        (":message-type", "error"),
        (":error-code", "InternalFailure"),
        (":error-message", 'broke "badly"'),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    prelude = struct.pack(">II", 16 + len(headers), len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers
    frame = head + struct.pack(">I", zlib.crc32(head))
    ((event, data, kind),) = _decode([frame])
    assert (event, kind) == ("InternalFailureException", "error")
    assert json.loads(data) == {"message": 'broke "badly"'}


def test_a_large_message_in_small_chunks_is_kept_once_and_read_when_whole() -> None:
    payload = json.dumps({"delta": {"text": "y" * 200_000}}).encode()
    frame = event_stream_frame("contentBlockDelta", payload)
    decoder = EventStreamDecoder()
    for i in range(0, len(frame) - 1000, 1000):
        assert decoder.decode(frame[i : i + 1000]) == []
        assert len(decoder._buffer) <= len(frame)  # the message's bytes, nothing more
    (got,) = decoder.decode(frame[(len(frame) - 1) // 1000 * 1000 :])
    assert json.loads(got.data) == json.loads(payload)
    assert len(decoder._buffer) == 0


def test_an_impossible_length_trickled_byte_by_byte_fails_at_the_prelude() -> None:
    prelude = struct.pack(">II", 17 * 1024 * 1024, 0)
    head = prelude + struct.pack(">I", zlib.crc32(prelude))
    decoder = EventStreamDecoder()
    for byte in head[:-1]:
        assert decoder.decode(bytes([byte])) == []
    with pytest.raises(ProtocolError, match="impossible"):
        decoder.decode(head[-1:])


def test_bytearray_and_memoryview_chunks_read_like_bytes() -> None:
    body = _body([("messageStart", "{}"), ("metadata", '{"usage":{}}')])
    expected = _decode([body])
    for chunk in (bytearray(body), memoryview(body)):
        decoder = EventStreamDecoder()
        got = decoder.decode(chunk)  # type: ignore[arg-type]
        assert [(f.event, f.data, f.message_type) for f in got] == expected
