"""NDJSON framing (for vendors that stream one JSON object per line): split-invariant."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from stream_core.contract_tests.kit import split_at
from stream_core.provider import NDJSONBytesDecoder

_objects = st.lists(
    st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",))) | st.integers(),
        max_size=3,
    ),
    min_size=1,
    max_size=8,
)


def _decode(chunks: list[bytes]) -> list[object]:
    decoder = NDJSONBytesDecoder()
    frames = [f for c in chunks for f in decoder.decode(c)] + list(decoder.flush())
    assert all(f.event == "" for f in frames)
    return [json.loads(f.data) for f in frames]


@given(
    _objects, st.lists(st.integers(min_value=0, max_value=4000)), st.sampled_from(["\n", "\r\n"])
)
def test_any_split_gives_the_same_objects(objects: list[dict], cuts: list[int], end: str) -> None:
    # ensure_ascii=False puts raw U+2028 / multi-byte characters on the wire, as Go does.
    body = "".join(json.dumps(o, ensure_ascii=False) + end for o in objects).encode()
    assert _decode(split_at(body, cuts)) == objects


def test_line_separators_inside_strings_do_not_split() -> None:
    body = '{"a": "x\u2028y\u0085z"}\n'.encode()
    assert _decode([body[:3], body[3:]]) == [{"a": "x\u2028y\u0085z"}]


def test_last_line_without_newline_is_kept_only_when_complete() -> None:
    assert _decode([b'{"a": 1}\n{"done": true}']) == [{"a": 1}, {"done": True}]
    assert _decode([b'{"a": 1}\n{"done": tr']) == [{"a": 1}]


def test_blank_lines_are_skipped() -> None:
    assert _decode([b'\n\n{"a": 1}\n\r\n']) == [{"a": 1}]
