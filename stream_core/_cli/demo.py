"""`stream-core demo`: the bundled recordings, replayed offline through the real provider
code and drawn as they stream."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from importlib.resources import files
from typing import TextIO

import anyio

from .._models import Model
from .._registry import get_model
from .._types import Context, Tool, UserMessage
from ._common import replay_body
from ._render import Renderer, use_color

__all__ = ["demo_body", "run"]


@dataclass(frozen=True)
class _Recording:
    file: str
    title: str
    provider: str
    model_id: str
    prompt: str
    tools: tuple[Tool, ...] = ()
    api: str | None = None
    """The wire API, where the catalog's default for the model is another."""
    base_url: str | None = None
    """A model outside the catalog (a local server): a plain `Model` at this URL."""


def _tool(name: str, description: str, **properties: str) -> Tool:
    return Tool(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: {"type": t} for k, t in properties.items()},
        },
    )


_DEMO: tuple[_Recording, ...] = (
    _Recording(
        "anthropic-thinking-tool.body",
        "Anthropic Messages: thinking, then text, then a streamed tool call",
        "anthropic",
        "claude-sonnet-4-5",
        "Should I take an umbrella in Paris tomorrow?",
        (
            _tool(
                "get_forecast",
                "Weather forecast for a city",
                city="string",
                country="string",
                day="string",
                fields="array",
                units="string",
            ),
        ),
    ),
    _Recording(
        "openai-parallel-tools.body",
        "OpenAI Chat Completions: two parallel tool calls, fragments interleaved",
        "openai",
        "gpt-4.1-mini",
        "What's the weather in Paris, and what time is it there?",
        (
            _tool("get_weather", "Current weather in a city", city="string"),
            _tool("get_time", "Current time in a time zone", tz="string"),
        ),
    ),
    _Recording(
        "gemini-parallel-tools.body",
        "Gemini: thought parts, text, then two function calls in one chunk",
        "google",
        "gemini-2.5-flash",
        "What's the weather in Paris, and what time is it there?",
        (
            _tool("get_weather", "Current weather in a city", city="string"),
            _tool("get_time", "Current time in a time zone", tz="string"),
        ),
    ),
    _Recording(
        "bedrock-reasoning-tool.body",
        "Amazon Bedrock Converse (binary event-stream): reasoning, text, a tool call",
        "amazon-bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "What is 17% of 2,340? Use the calculator.",
        (_tool("calculator", "Evaluate an arithmetic expression", expression="string"),),
    ),
    _Recording(
        "openai-responses-reasoning-tool.body",
        "OpenAI Responses: reasoning summary, a commentary message, then a function call",
        "openai",
        "gpt-5.1",
        "Can I walk out to Mont-Saint-Michel tomorrow morning?",
        (_tool("get_tides", "Tide times for a place", place="string", date="string"),),
        api="openai-responses",
    ),
    _Recording(
        "mistral-reasoning.body",
        "Mistral (Magistral): thinking parts inside the content array, then the answer",
        "mistral",
        "magistral-medium-latest",
        "What is 2+2?",
    ),
    _Recording(
        "ollama-chat-text.body",
        "Ollama's native /api/chat (newline-delimited JSON), a local model, no key",
        "ollama",
        "llama3.2",
        "Why is the sky blue? One sentence.",
        api="ollama-chat",
        base_url="http://localhost:11434",
    ),
    _Recording(
        "anthropic-overloaded.body",
        "Anthropic Messages: the vendor overloads mid-answer",
        "anthropic",
        "claude-sonnet-4-5",
        "Write me a long explanation of server-sent events.",
    ),
)


def demo_body(name: str) -> bytes:
    """A bundled demo recording (package data under `stream_core/demo/`)."""
    return (files("stream_core") / "demo" / name).read_bytes()


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    speed: float = args.speed
    renderer = Renderer(out, color=use_color(out))
    renderer.note(
        f"{len(_DEMO)} recorded vendor streams, replayed offline through the real "
        "provider code (no network, no API key)."
    )
    for n, rec in enumerate(_DEMO, 1):
        model = (
            get_model(rec.provider, rec.model_id, api=rec.api)
            if rec.base_url is None
            else Model(
                id=rec.model_id, api=rec.api or "", provider=rec.provider, base_url=rec.base_url
            )
        )
        context = Context(messages=[UserMessage(content=rec.prompt)], tools=list(rec.tools) or None)
        renderer.heading(f"=== {n}/{len(_DEMO)} {rec.title}")
        renderer.note(f"model {rec.provider}/{rec.model_id}, recording stream_core/demo/{rec.file}")
        renderer.prompt(rec.prompt)
        anyio.run(_demo_one, model, context, demo_body(rec.file), renderer, speed)
        if speed > 0 and n < len(_DEMO):
            time.sleep(60 / speed)  # a beat between recordings
    return 0


async def _demo_one(
    model: Model, context: Context, body: bytes, renderer: Renderer, speed: float
) -> None:
    await replay_body(
        model,
        context,
        body,
        api_key="demo-key-not-sent-anywhere",
        sink=renderer,
        chunk_size=64,
        pace=speed,
    )
