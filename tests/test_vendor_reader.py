"""One reader of untrusted vendor JSON (issue 24): `shape` reads many fields in one call with
exactly the rules and messages of `optional_field`, and on every API the text of the
commonest delta, sent as another JSON type, ends the stream `protocol` naming the field,
with the text before it kept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract_tests.kit import event_stream_frame, options, run_provider, vendor_response
from stream_core.provider import ANY, First, Inner, ProtocolError, optional_field, shape

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
KINDS: list[Any] = [str, int, float, bool, dict, list]


def _by_hand(obj: Any, fields: dict[str, Any], where: str) -> tuple[Any, ...] | str:
    """What reading each field with `optional_field` gives: the values, or the message."""
    try:
        if type(obj) is not dict:
            raise ProtocolError(f"{where}: expected an object")
        out = []
        for key, kind in fields.items():
            if kind is ANY:
                out.append(obj.get(key))
            elif isinstance(kind, tuple):
                value = obj.get(key)
                if value is not None and type(value) not in kind:
                    optional_field(obj, key, kind[0], where)  # raises for the first
                out.append(value)
            else:
                out.append(optional_field(obj, key, kind, where))
        return tuple(out)
    except ProtocolError as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(
    obj=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), JSON) | JSON,
    kinds=st.lists(st.sampled_from([*KINDS, ANY]), min_size=4, max_size=4),
)
def test_a_shape_reads_exactly_as_the_field_helpers_do(obj: Any, kinds: list[Any]) -> None:
    fields = dict(zip("abcd", kinds, strict=True))
    read = shape("event", **fields)
    try:
        got: tuple[Any, ...] | str = read(obj)
    except ProtocolError as e:
        got = str(e)
    want = _by_hand(obj, fields, "event")
    if isinstance(want, str):
        # Same field named; the shape's message says what it expected and what came.
        assert isinstance(got, str) and got.split(":")[0] == want.split(":")[0], (got, want)
    else:
        assert got == want
        assert all(a is b for a, b in zip(got, want, strict=True))  # no copies


@settings(max_examples=300, deadline=None)
@given(obj=JSON | st.fixed_dictionaries({"list": st.lists(JSON, max_size=2)}))
def test_nested_shapes_never_raise_anything_but_a_protocol_error(obj: Any) -> None:
    inner = shape("x", text=str, n=int)
    read = shape("e", list=First(inner), obj=Inner(inner), raw=ANY)
    try:
        values = read(obj)
    except ProtocolError as e:
        assert str(e).startswith("e")
    else:
        assert len(values) == 6


def test_nested_fields_are_named_from_the_outer_name_and_absent_parents_give_none() -> None:
    delta = shape("d", content=(str, list), refusal=str)
    chunk = shape("chunk", choices=First(shape("c", delta=delta)), usage=dict)
    # choices, then the first choice's delta, content and refusal, then usage
    assert chunk({}) == (None, None, None, None, None)
    assert chunk({"choices": []}) == ([], None, None, None, None)
    assert chunk({"choices": [{"delta": {"content": "hi"}}]})[2] == "hi"
    cases = [
        ({"choices": [{"delta": {"content": 5}}]}, "where.choices[0].delta.content"),
        ({"choices": [7]}, "where.choices[0]: expected an object"),
        ({"choices": [{"delta": []}]}, "where.choices[0].delta: expected an object"),
        ({"usage": "9"}, "where.usage: expected an object, got a string"),
        ("text", "where: expected an object"),
    ]
    for obj, message in cases:
        with pytest.raises(ProtocolError, match=message.replace("[", r"\[").replace("]", r"\]")):
            chunk(obj, "where")


def test_a_shape_refuses_what_is_not_a_json_type_or_a_plain_name() -> None:
    with pytest.raises(ValueError, match="not a JSON type"):
        shape("e", a=set)
    with pytest.raises(ValueError, match="plain name"):
        shape("e", **{"a-b": str})
    with pytest.raises(ValueError, match="at least one"):
        shape("e")


# --- every API ---------------------------------------------------------------------------


def _sse(*events: tuple[str | None, Any]) -> bytes:
    out = ""
    for name, data in events:
        out += (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
    return out.encode()


def _chat(bad: Any) -> bytes:
    return _sse(
        (None, {"id": "c", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        (None, {"id": "c", "choices": [{"index": 0, "delta": {"content": bad}}]}),
    )


def _anthropic(bad: Any) -> bytes:
    def delta(text: Any) -> tuple[str, Any]:
        event = {"type": "content_block_delta", "index": 0}
        return "content_block_delta", {**event, "delta": {"type": "text_delta", "text": text}}

    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    return _sse(
        ("message_start", {"type": "message_start", "message": {"id": "m"}}),
        ("content_block_start", start),
        delta("Hel"),
        delta(bad),
    )


def _responses(bad: Any) -> bytes:
    def delta(text: Any) -> tuple[str, Any]:
        kind = "response.output_text.delta"
        return kind, {"type": kind, "output_index": 0, "content_index": 0, "delta": text}

    return _sse(delta("Hel"), delta(bad))


def _google(bad: Any) -> bytes:
    def chunk(text: Any) -> tuple[None, Any]:
        return None, {"candidates": [{"content": {"parts": [{"text": text}]}}]}

    return _sse(chunk("Hel"), chunk(bad))


def _ollama(bad: Any) -> bytes:
    lines = [{"message": {"role": "assistant", "content": t}, "done": False} for t in ("Hel", bad)]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _bedrock(bad: Any) -> bytes:
    return b"".join(
        event_stream_frame(
            "contentBlockDelta",
            json.dumps({"contentBlockIndex": 0, "delta": {"text": text}}).encode(),
        )
        for text in ("Hel", bad)
    )


BODIES = {
    "anthropic-messages": (_anthropic, "text"),
    "openai-completions": (_chat, "content"),
    "mistral-conversations": (_chat, "content"),
    "openai-responses": (_responses, "delta"),
    "google-generative-ai": (_google, "text"),
    "ollama-chat": (_ollama, "content"),
    "bedrock-converse-stream": (_bedrock, "text"),
}


@pytest.mark.parametrize("api", list(BODIES))
@pytest.mark.parametrize("bad", [7, 1.5, True, {"t": "x"}], ids=["int", "float", "bool", "obj"])
def test_the_commonest_delta_of_another_type_ends_protocol_on_every_api(api: str, bad: Any) -> None:
    body, field = BODIES[api]

    async def main() -> Any:
        return await run_provider(api, [vendor_response(api, [body(bad)])], opts=options())

    message = anyio.run(main).message
    assert message.error is not None and message.error.kind == "protocol", (api, message.error)
    assert field in message.error.message, message.error.message
    assert message.text() == "Hel"  # what came before is kept


def test_the_provider_guides_example_reads_a_chunk() -> None:
    guide = (Path(__file__).parents[1] / "docs" / "guides" / "providers.md").read_text("utf-8")
    found = re.search(r"### Reading the vendor's JSON\n.*?```python\n(.*?)```", guide, re.S)
    assert found is not None
    namespace: dict[str, Any] = {"chunk": {"choices": [{"delta": {"content": "hi"}}]}}
    exec("from stream_core.provider import First, shape\n" + found.group(1), namespace)
    assert (namespace["content"], namespace["usage"], namespace["refusal"]) == ("hi", None, None)
