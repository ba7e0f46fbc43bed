"""Every error has a message (issue point: `vendor_error_fields("")`, `{"error": ""}` and
`{"error": "", "error_type": "x"}` gave an empty one, so a stream ended with
`StreamError(message='')`; Anthropic's `{"type": "error", "error": ""}` too)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_core import Context, Model, StreamOptions, UserMessage, complete
from stream_core.provider import vendor_error_fields
from stream_core.testing import replay_client

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_blank = st.sampled_from(["", " ", "\n", "\t "])
_error_shapes = st.one_of(
    _json,
    _blank,
    st.builds(lambda m: {"error": m}, _blank | _json),
    st.builds(lambda m, t: {"error": m, "error_type": t}, _blank, st.text(max_size=8)),
    st.builds(lambda m, t: {"type": "error", "error": m}, _blank, st.text(max_size=8)),
    st.builds(
        lambda m, t: {"error": {"message": m, "type": t}}, _blank | st.none(), _blank | st.none()
    ),
)


@pytest.mark.parametrize(
    "data",
    [
        "",
        {"error": ""},
        {"error": "", "error_type": "x"},
        {"type": "error", "error": ""},
        {"error": " "},
        {"error": {"message": "  ", "type": ""}},
    ],
)
def test_the_reported_shapes_give_a_message(data: Any) -> None:
    vendor_type, message = vendor_error_fields(data)
    assert message.strip(), (data, message)
    if isinstance(data, dict) and data.get("error_type"):
        assert data["error_type"] in message  # the message names what the vendor did say


@given(_error_shapes)
def test_any_error_shape_gives_a_message(data: Any) -> None:
    vendor_type, message = vendor_error_fields(data)
    assert isinstance(message, str) and message.strip()
    assert vendor_type is None or (isinstance(vendor_type, str) and vendor_type)


def _sse(*events: str) -> bytes:
    return b"".join(e.encode() + b"\n\n" for e in events)


CASES = {
    "anthropic-messages": (
        "anthropic",
        "https://a.test",
        _sse('event: error\ndata: {"type": "error", "error": ""}'),
        "text/event-stream",
    ),
    "openai-completions": (
        "openai",
        "https://o.test/v1",
        _sse('data: {"error": ""}'),
        "text/event-stream",
    ),
    "ollama-chat": (
        "ollama",
        "http://localhost:11434",
        b'{"error": "", "error_type": "x"}\n',
        "application/x-ndjson",
    ),
}


@pytest.mark.parametrize("api", list(CASES))
def test_a_stream_ending_in_an_empty_error_says_something(api: str) -> None:
    provider, base, body, content_type = CASES[api]
    model = Model(id="m", api=api, provider=provider, base_url=base)
    client = replay_client(body, headers={"content-type": content_type})
    options = StreamOptions(api_key="k", client=client, max_retries=0)
    m = anyio.run(complete, model, Context(messages=[UserMessage(content="hi")]), options)
    assert m.stop_reason == "error" and m.error is not None
    assert m.error.message.strip(), m.error
