"""Calling a provider module directly checks its arguments the same way, before any I/O."""

from __future__ import annotations

import pytest

from stream_core import Context, Model, StreamOptions, UserMessage
from stream_core.providers import anthropic

CONTEXT = Context(messages=[UserMessage(content="hi")])
MODEL = Model(id="m", api="anthropic-messages", provider="anthropic", base_url="https://x.test")


def test_a_provider_refuses_a_model_of_another_api() -> None:
    other = MODEL.model_copy(update={"api": "openai-completions"})
    with pytest.raises(ValueError, match="model.api is 'openai-completions'"):
        anthropic.stream(other, CONTEXT)


def test_a_provider_names_bad_argument_types() -> None:
    with pytest.raises(TypeError, match="model must be"):
        anthropic.stream("claude", CONTEXT)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context must be"):
        anthropic.stream(MODEL, ["hi"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options must be"):
        anthropic.stream(MODEL, CONTEXT, {"api_key": "k"})  # type: ignore[arg-type]


def test_a_message_that_is_not_a_message_is_named() -> None:
    context = Context(messages=[UserMessage(content="hi")])
    context.messages.append({"role": "note", "text": "kept from JSONL"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"context\.messages\[1\]"):
        anthropic.stream(MODEL, context)


def test_stream_repr_shows_no_secret() -> None:
    s = anthropic.stream(MODEL, CONTEXT, StreamOptions(api_key="sk-ant-secret-0123456789"))
    assert "secret" not in repr(s) and "anthropic-messages" in repr(s)
