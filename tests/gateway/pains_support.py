"""The pieces the proxy-pain tests share (`test_pains.py`, `test_pains_peers.py`): the
fidelity matrix's gateway and SDK clients (`matrix_support`) as a module fixture, scripted
answers, and `converse`, a conversation through the gateway to one loopback vendor."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from matrix_clients import Ask, Failure, Reading
from matrix_scenarios import Skip
from matrix_support import (
    CLIENT_KEY,
    GUARD,
    VENDOR_ENV,
    VENDOR_KEY,
    Matrix,
    _same,
    oracle,
    render,
    upstream,
)
from matrix_vendors import problems

from stream_core import AssistantMessage, ToolCall, Usage
from stream_core.gateway import GatewayConfig, Upstream
from stream_core.testing import ANY_MODEL, Synthesized, fake_vendor

slow = pytest.mark.slow

DIALECTS = ("anthropic-messages", "openai-responses", "openai-completions")
SHORT = {"anthropic-messages": "anthropic", "openai-responses": "responses",
         "openai-completions": "chat"}  # fmt: skip
GEMINI_3 = "google/gemini-3-flash-preview"
CLAUDE_SIG = "EqQBCkYIBxgCKkDpainsThinkingSignature"
SIGNED = ("anthropic-messages", "bedrock-converse-stream")
USAGE = Usage(input=120, output=30, cache_read=40, cache_write=20)


UPSTREAMS = {
    "anthropic-messages": ("anthropic/claude-sonnet-4-5", None),
    "openai-responses": ("openai/gpt-5", "openai-responses"),
    "google-generative-ai": ("google/gemini-2.5-pro", None),
    "bedrock-converse-stream": (
        "amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        None,
    ),
    "openai-completions": ("openai/gpt-5", None),
    "mistral-conversations": ("mistral/magistral-medium-latest", None),
    "ollama-chat": ("ollama/qwen3", None),
    "ollama-generate": ("ollama/qwen3", "ollama-generate"),
}
"""One catalog model per wire API (the matrix's)."""


def gemini_usage_on_every_chunk(synth: Synthesized) -> Synthesized:
    """Gemini as it streams: `usageMetadata` on every chunk, the prompt's counts (cached
    ones included) from the first, the output's growing (`vendor_bytes` writes it once)."""
    frames = [f for f in synth.body.split(b"\n\n") if f.strip()]
    final = json.loads(frames[-1].removeprefix(b"data: "))["usageMetadata"]
    out = b""
    for n, frame in enumerate(frames, 1):
        chunk = json.loads(frame.removeprefix(b"data: "))
        prompt = {
            k: v for k, v in final.items() if k in ("promptTokenCount", "cachedContentTokenCount")
        }
        chunk.setdefault(
            "usageMetadata",
            {**prompt, "candidatesTokenCount": n, "totalTokenCount": final["promptTokenCount"] + n},
        )
        out += b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return Synthesized(out, synth.meta)  # fmt: skip


def edit_for(api: str) -> Callable[[Synthesized], Synthesized] | None:
    return gemini_usage_on_every_chunk if api == "google-generative-ai" else None


def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """The matrix's gateway and SDK clients, the vendors' keys (fakes) in the environment:
    each test module's `matrix` fixture."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in {**VENDOR_ENV, "DEEPSEEK_API_KEY": VENDOR_KEY}.items():
            env.setenv(name, value)
        folder = tmp_path_factory.mktemp("pains")
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-credentials"))
        env.setenv("AWS_CONFIG_FILE", str(folder / "no-config"))
        with Matrix(folder) as m:
            yield m


def msg(*blocks: Any, stop: str = "stop", usage: Usage = USAGE) -> AssistantMessage:
    return AssistantMessage.model_validate(
        {"api": "faux", "provider": "faux", "model": "m", "content": list(blocks),
         "stop_reason": stop, "usage": usage}
    )  # fmt: skip


def call(id_: str, city: str, **extra: Any) -> ToolCall:
    return ToolCall(id=id_, name="get_weather", arguments={"city": city}, **extra)


def vendor_says(turn: Any, model: Any, folder: Path) -> tuple[Path, Synthesized]:
    """`turn` in `model`'s vendor's bytes (skipped where that vendor cannot say it)."""
    try:
        return render(turn, model, folder, None)
    except Skip as e:
        pytest.skip(str(e))


def converse(
    m: Matrix,
    dialect: str,
    spec: str,
    turns: list[AssistantMessage],
    ask: Ask,
    *,
    api: str | None = None,
    convo: list[Any] | None = None,
    user: str | None = None,
    edit: Callable[[Synthesized], Synthesized] | None = None,
) -> tuple[list[Reading], list[Any]]:
    """A conversation of `len(turns)` requests: the `dialect` client asks, the upstream
    (`spec`, served by a loopback vendor playing `turns`) answers, the client answers the
    calls (or says `user`) and asks again. Each answer must be, in the SDK, what the
    upstream's bytes say (the matrix's projection); every request the vendor got must be
    one it accepts (`edit`: the vendor's bytes made more like the real vendor's). Returns
    the SDK's readings and the vendor's requests."""
    model = Upstream(spec, api=api).resolve()
    folder = m.folder / f"pain{m.n + 1}"
    rendered = [vendor_says(t, model, folder) for t in turns]
    if edit is not None:
        rendered = [(edit(s).write(p.with_name(p.stem + "-edited")), edit(s)) for p, s in rendered]
    client = m.clients[dialect]
    readings: list[Reading] = []
    with fake_vendor(scenarios={ANY_MODEL: [p for p, _ in rendered]}) as fake:
        name = m.name()
        m.serve(GatewayConfig(models={name: upstream(spec, api, fake.url)}))
        convo = convo if convo is not None else client.start()
        for n, (_, synth) in enumerate(rendered, 1):
            got = client.send(name, convo, ask)
            if isinstance(got, Failure):
                raise AssertionError(f"turn {n}: HTTP {got.status} {got.type}: {got.message}")
            _same(f"turn {n}", client.project(oracle(model, synth)), got.form)
            readings.append(got)
            if n < len(rendered):
                convo = client.follow(convo, got, user)
        sent = list(fake.requests)
    assert len(sent) == len(turns), f"the vendor got {len(sent)} requests"
    for n, r in enumerate(sent, 1):
        wrong = problems(model.api, r.body, r.headers, CLIENT_KEY)
        assert not wrong, f"request {n} to {model.api} would be refused: {wrong}"
    return readings, sent


def read_stream(client: Any, name: str, ask: Ask) -> tuple[list[str], Exception | None]:
    """The texts a client's SDK streams, and the error that ended the stream (None: it
    ended as a whole answer: `end_turn`, `response.completed`, a finish reason)."""
    kw = client._kwargs(name, client.start(), ask)
    texts: list[str] = []
    try:
        if client.api == "anthropic-messages":
            with client.sdk.messages.create(stream=True, **kw) as events:
                for e in events:
                    if e.type == "content_block_delta" and e.delta.type == "text_delta":
                        texts.append(e.delta.text)
        elif client.api == "openai-responses":
            with client.sdk.responses.create(stream=True, **kw) as events:
                for e in events:
                    if e.type == "response.output_text.delta":
                        texts.append(e.delta)
                    elif e.type in ("response.failed", "error"):
                        raise RuntimeError(e.type)
        else:
            with client.sdk.chat.completions.create(stream=True, **kw) as chunks:
                for chunk in chunks:
                    for ch in chunk.choices:
                        texts.append(ch.delta.content or "")
                        if ch.finish_reason not in (None, "error"):
                            return texts, None
    except (anthropic.APIError, openai.APIError, RuntimeError) as e:
        return texts, e
    return texts, None


def access_line(caplog: pytest.LogCaptureFixture, name: str) -> str:
    """The access line of model name `name` (written once the answer is sent: waited
    for, within the matrix's guard against hangs)."""
    deadline = time.monotonic() + GUARD
    while True:
        lines = [r.getMessage() for r in caplog.records if f" model={name} " in r.getMessage()]
        if lines or time.monotonic() > deadline:
            assert lines, f"no access line for {name}"
            return lines[-1]
        time.sleep(0.01)
