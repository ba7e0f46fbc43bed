"""SSE decoding is chunk-boundary invariant (CONTRACT 5).

Property: for any list of events, encoded with LF, CRLF or CR line ends, with comments and
`retry:` fields mixed in, split at any byte positions (inside multi-byte UTF-8 characters
too), `decode(chunk)` over the chunks plus `flush()` gives exactly those events. Data may
hold U+2028, U+0085 and friends, which are not line ends in SSE.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_core._decoding.sse import _PIECE, FramingError, SSEBytesDecoder
from stream_core.contract_tests.kit import one_byte, run_provider, split_at, sse_response

# Characters that other line splitters treat as line breaks, and multi-byte UTF-8.
SPECIAL = [
    "\u2028",
    "\u2029",
    "\u0085",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\ufeff",
    "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "漢字",
    "é",
    ":",
    " ",
]
PIECES = st.one_of(
    st.characters(codec="utf-8", exclude_characters="\r\n"),
    st.sampled_from(SPECIAL),
)
LINE = st.lists(PIECES, max_size=10).map("".join)
NAME = st.lists(PIECES, min_size=1, max_size=6).map("".join)
ENDINGS = ["\n", "\r\n", "\r"]


@dataclass(frozen=True)
class Event:
    name: str | None
    data_lines: tuple[str, ...]
    retry: int | None


@st.composite
def events(draw: st.DrawFn) -> Event:
    return Event(
        name=draw(st.none() | NAME),
        data_lines=tuple(draw(st.lists(LINE, min_size=1, max_size=4))),
        retry=draw(st.none() | st.integers(min_value=0, max_value=10**6)),
    )


@st.composite
def encoded(draw: st.DrawFn) -> tuple[list[Event], str]:
    """Events and an SSE text carrying them, with comments and retry fields interleaved."""
    evs = draw(st.lists(events(), max_size=6))
    eol = draw(st.sampled_from(ENDINGS))
    comment = st.sampled_from([": ping", ":", ":keep-alive", ": \u2028 note"])
    lines: list[str] = []
    for ev in evs:
        if draw(st.booleans()):  # a comment-only block between events dispatches nothing
            lines += [draw(comment), ""]
        fields = [] if ev.name is None else [f"event: {ev.name}"]
        fields += [f"data: {line}" for line in ev.data_lines]
        if ev.retry is not None:
            fields.insert(draw(st.integers(0, len(fields))), f"retry: {ev.retry}")
        for _ in range(draw(st.integers(0, 2))):
            fields.insert(draw(st.integers(0, len(fields))), draw(comment))
        lines += [*fields, ""]
    text = "".join(line + eol for line in lines)
    return evs, text


def expected(evs: Sequence[Event]) -> list[tuple[str, str, int | None]]:
    return [(ev.name or "message", "\n".join(ev.data_lines), ev.retry) for ev in evs]


def decode(chunks: Sequence[bytes]) -> list[tuple[str, str, int | None]]:
    decoder = SSEBytesDecoder()
    out = []
    for chunk in chunks:
        out += decoder.decode(chunk)
    out += decoder.flush()
    return [(e.event, e.data, e.retry) for e in out]


@st.composite
def splits(draw: st.DrawFn, body: bytes) -> list[bytes]:
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(body)), max_size=12))
    return split_at(body, cuts)


@settings(deadline=None)
@given(case=encoded(), data=st.data())
def test_any_split_of_any_encoding_gives_exactly_the_events(
    case: tuple[list[Event], str], data: st.DataObject
) -> None:
    evs, text = case
    body = text.encode("utf-8")

    chunks = data.draw(splits(body))

    assert decode(chunks) == expected(evs)


@settings(deadline=None)
@given(case=encoded())
def test_one_byte_at_a_time_gives_exactly_the_events(case: tuple[list[Event], str]) -> None:
    evs, text = case
    body = text.encode("utf-8")

    assert decode(one_byte(body)) == decode([body]) == expected(evs)


@settings(deadline=None)
@given(case=encoded(), tail=LINE, tail_eol=st.sampled_from(["", *ENDINGS]), data=st.data())
def test_an_unterminated_final_event_is_dropped(
    case: tuple[list[Event], str], tail: str, tail_eol: str, data: st.DataObject
) -> None:
    evs, text = case
    # The last event's lines arrive but the blank line that would dispatch it does not.
    body = (text + f"event: late{tail_eol or chr(10)}data: {tail}{tail_eol}").encode("utf-8")

    assert decode(data.draw(splits(body))) == expected(evs)


@settings(deadline=None)
@given(case=encoded(), data=st.data())
def test_a_byte_order_mark_at_the_start_is_ignored(
    case: tuple[list[Event], str], data: st.DataObject
) -> None:
    evs, text = case
    body = b"\xef\xbb\xbf" + text.encode("utf-8")

    assert decode(data.draw(splits(body))) == expected(evs)


@settings(deadline=None)
@given(case=encoded(), pad=st.integers(min_value=0, max_value=12), pieces=st.integers(1, 3))
def test_a_chunk_larger_than_a_decoding_piece_gives_exactly_the_events(
    case: tuple[list[Event], str], pad: int, pieces: int
) -> None:
    # A big chunk (an in-process mock's 64 KB) is decoded a piece at a time: a comment sized
    # so the events' bytes, multi-byte characters and CRLFs included, straddle the pieces.
    evs, text = case
    filler = ":" + "x" * (_PIECE * pieces - 2 - pad) + "\n"
    body = (filler + text).encode("utf-8")

    assert decode([body]) == decode(one_byte(body)) == expected(evs)


def test_a_framing_error_in_a_later_piece_keeps_the_events_before_it() -> None:
    decoder = SSEBytesDecoder()
    decoder.max_event_bytes = 100
    good = b"data: 1\n\n" * (2 * _PIECE // 9)
    with pytest.raises(FramingError) as caught:
        decoder.decode(good + b"data: " + b"x" * 200 + b"\n\n")

    assert [f.data for f in caught.value.frames] == ["1"] * (2 * _PIECE // 9)


def test_bom_inside_the_data_is_kept() -> None:
    body = "data: \ufeffx\n\n".encode()

    assert decode(one_byte(body)) == [("message", "\ufeffx", None)]


def test_a_split_multibyte_character_is_kept_whole() -> None:
    body = "data: 😀漢\n\n".encode()
    emoji_start = body.index("😀".encode())

    for cut in range(emoji_start + 1, emoji_start + 4):
        assert decode([body[:cut], body[cut:]]) == [("message", "😀漢", None)]


def test_invalid_utf8_does_not_crash_the_decoder() -> None:
    assert decode([b"data: a\xff\xfeb\n\n"]) == [("message", "a\ufffd\ufffdb", None)]


# --- through a provider ---------------------------------------------------------------------


def completion_chunk(text: str) -> bytes:
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


FINISH = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.mark.parametrize("chunking", ["whole", "one_byte", "crlf_one_byte", "cr"])
def test_line_separator_characters_inside_json_strings_reach_the_text(chunking: str) -> None:
    text = "a\u2028b\u0085c\u2029d\x0be 😀"
    body = completion_chunk(text) + FINISH
    if chunking.startswith("crlf"):
        body = body.replace(b"\n", b"\r\n")
    elif chunking == "cr":
        body = body.replace(b"\n", b"\r")
    chunks = [body] if chunking in ("whole", "cr") else one_byte(body)

    async def main() -> str:
        run = await run_provider("openai-completions", [sse_response(chunks)])
        assert run.message.error is None, run.message.error
        return run.message.text()

    assert anyio.run(main) == text


@pytest.mark.parametrize(
    "noise",
    [b": ping\n\n", b"retry: 3000\n\n", b"id: 7\n\n", b"event: ping\n\n", b"\n\n\n"],
    ids=["comment", "retry-only", "id-only", "event-without-data", "blank-lines"],
)
def test_blocks_without_data_produce_nothing_through_a_provider(noise: bytes) -> None:
    body = noise + completion_chunk("hel") + noise + completion_chunk("lo") + noise + FINISH

    async def main() -> tuple[str, str | None]:
        run = await run_provider("openai-completions", [sse_response(one_byte(body))])
        error = run.message.error
        return run.message.text(), None if error is None else error.message

    assert anyio.run(main) == ("hello", None)


def _httpx_sse_events(chunks: Sequence[bytes]) -> list[tuple[str, str, str, int | None]]:
    """The events httpx-sse's own line and field decoders give for the same bytes."""
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines, fields = SSELineDecoder(), SSEDecoder()
    out, started = [], False

    def feed(new: list[str]) -> None:
        for line in new:
            sse = fields.decode(line)
            if sse is not None:
                out.append((sse.event, sse.data, sse.id, sse.retry))

    for chunk in chunks:
        piece = text.decode(chunk)
        if piece and not started:
            started, piece = True, piece.removeprefix("\ufeff")
        if piece:
            feed(lines.decode(piece))
    tail = text.decode(b"", final=True)
    rest = lines.decode(tail) if tail else []
    if lines.trailing_cr:
        rest += lines.flush()
    feed(rest)
    return out


# Pieces that exercise every field, line end and edge: ids with NUL, retry that is no
# number, a field with no colon, CR held across chunks, a BOM, cut UTF-8.
RAW = st.lists(
    st.sampled_from(
        [
            "data",
            "event",
            "id",
            "retry",
            "x",
            ":",
            " ",
            "\r",
            "\n",
            "\r\n",
            "\x00",
            "7",
            "\ufeff",
            "é",
            "data: ",
            "event: a",
            "id: 1",
            "\n\n",
            "\u2028",
        ]
    ),
    max_size=30,
).map("".join)


@settings(deadline=None)
@given(text=RAW, cut=st.integers(0, 4), data=st.data())
def test_fields_and_lines_are_read_exactly_as_httpx_sse_reads_them(
    text: str, cut: int, data: st.DataObject
) -> None:
    body = text.encode("utf-8")
    body = body[: len(body) - cut]  # may cut a character or the last line short
    chunks = data.draw(splits(body))

    decoder = SSEBytesDecoder()
    got = [e for chunk in chunks for e in decoder.decode(chunk)] + decoder.flush()

    assert [(e.event, e.data, e.id, e.retry) for e in got] == _httpx_sse_events(chunks)
