"""One codec per wire format (issue 36, "How to build it"): stop reasons, usage fields and
error words were written again, backwards, in `vendor_bytes`, in `serve` and in the
benchmarks' fake vendors. Now each API's bytes come from its codec (the dialect encoders,
`vendor_bytes`' writers, `_codec.http_error`), and these tests hold it:

1. no module under `benchmarks/` or `stream_core/testing/` but the codec and writer
   modules holds a vendor's stop word, stop-reason field, usage field or error word,
   read from the providers' own tables;
2. every error kind `vendor_bytes` writes after content, and as an HTTP error, reads back
   as itself in each of the 8 APIs (before content: tests/test_vendor_error_kinds.py),
   or as the nearest kind the tables below name;
3. every error kind a dialect's `error_body` answers reads back through that API's
   provider as itself or as the nearest kind named below;
4. a block scripted in N pieces is N deltas in every API (the benchmarks' workload), and
   the benchmarks' bodies replay to their scripts.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import sys
import typing
from pathlib import Path
from typing import Any

import anyio
import pytest

from stream_core import (
    AssistantMessage,
    Context,
    ErrorKind,
    Model,
    StopReason,
    StreamError,
    StreamOptions,
    TextContent,
    Usage,
    UserMessage,
    complete,
    stream,
)
from stream_core.provider import DIALECTS, dialect
from stream_core.testing import (
    FauxTurn,
    Synthesized,
    faux_error,
    faux_message,
    replay_client,
    vendor_bytes,
)
from stream_core.testing._codec import UNEXPRESSED, http_error

ROOT = Path(__file__).parents[1]
APIS = {
    "anthropic-messages": ("anthropic", "https://a.test"),
    "openai-completions": ("openai", "https://o.test/v1"),
    "mistral-conversations": ("mistral", "https://m.test/v1"),
    "openai-responses": ("openai", "https://r.test/v1"),
    "google-generative-ai": ("google", "https://g.test/v1beta"),
    "bedrock-converse-stream": (
        "amazon-bedrock",
        "https://bedrock-runtime.us-east-1.amazonaws.com",
    ),
    "ollama-chat": ("ollama", "http://localhost:11434"),
    "ollama-generate": ("ollama", "http://localhost:11434"),
}
KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)
CTX = Context(messages=[UserMessage(content="hi")])

# --- 1. no vendor table written a second time ------------------------------------------

CODEC_MODULES = {
    "stream_core/testing/_codec.py",
    "stream_core/testing/_write_sse.py",
    "stream_core/testing/_write_framed.py",
}
"""The writers of `vendor_bytes`, which say each API's words (read from its tables)."""

PENDING = {
    "benchmarks/gateway_vendor.py": "the gateway benchmark's Chat Completions upstream "
    "(issue 36, another change): its chunks and completion are still written by hand",
}
"""Modules not yet on the codecs, and why. Remove an entry once its module is."""

STOP_FIELDS = {"finish_reason", "finishReason", "stopReason", "done_reason", "stop_sequence"}
"""The fields a vendor's stream says its stop reason in (Chat, Gemini, Bedrock, Ollama;
Anthropic's `stop_sequence`): a module that names one writes a vendor stream."""

OUR_NAMES = {"input_tokens", "output_tokens"} | set(KINDS) | set(typing.get_args(StopReason))
OUR_NAMES |= set(Usage.model_fields)
"""Words that are stream-core's own too: the error kinds and stop reasons, `Usage`'s
fields (`total_tokens`), and the limiter's token dimensions (`configure_limits`), which
Anthropic's usage fields share."""


def _provider(name: str) -> Any:
    return importlib.import_module(f"stream_core.providers.{name}")


def _vendor_words() -> tuple[set[str], set[str]]:
    """(stop words, words said anywhere) of the providers' own tables."""
    stops: set[str] = set()
    for module, wire in [
        ("anthropic", "WIRE"), ("openai_completions", "WIRE"), ("mistral", "WIRE"),
        ("openai_responses", "WIRE"), ("google", "WIRE"), ("bedrock", "WIRE"),
        ("ollama", "WIRE"), ("ollama", "GENERATE_WIRE"),
    ]:  # fmt: skip
        stops |= set(getattr(_provider(module), wire).stop_reasons)
    # Distinctive ones only: "end", "load" or "completed" are everyone's words.
    stops = {w for w in stops if "_" in w or w.isupper()}
    errors = set(importlib.import_module("stream_core._errors").VENDOR_ERROR_KINDS)
    errors |= set(_provider("anthropic").ERROR_TYPES) | set(_provider("google").ERROR_STATUSES)
    errors |= set(_provider("bedrock").EXCEPTION_KINDS)
    errors |= set(_provider("_anthropic_encode").STATUSES)
    for _status, word, code in _provider("_chat_encode").ERRORS.values():
        errors |= {word, code} - {None}
    usage = set(_provider("anthropic").USAGE_FIELDS.values())
    usage |= set(_provider("_bedrock_blocks").USAGE_FIELDS.values())
    usage |= set(_provider("ollama")._USAGE_FIELDS.values())
    for paths in _provider("_openai_chat")._USAGE_PATHS.values():
        usage |= {field for path in paths for field in path}
    for path in _provider("_responses_items").USAGE_PATHS.values():
        usage |= set(path)
    google = _provider("google")
    usage |= {google._PROMPT, google._CACHED, google._CANDIDATES, google._THOUGHTS}
    anywhere = (errors | usage | STOP_FIELDS) - OUR_NAMES
    return stops - OUR_NAMES, anywhere


def _a_name(node: ast.Constant, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a string constant names a field (a dict key, a subscript, `.get(...)`'s
    argument) rather than being a value: `max_tokens` is a request field and a stop."""
    parent = parents.get(node)
    if isinstance(parent, ast.Dict):
        return node in parent.keys
    if isinstance(parent, ast.Subscript):
        return parent.slice is node
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute):
        return parent.func.attr in ("get", "pop", "setdefault")
    return False


def _words_written(path: Path, stops: set[str], anywhere: set[str]) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or type(node.value) is not str:
            continue
        word = node.value
        if word in anywhere or (word in stops and not _a_name(node, parents)):
            found.append(f"{path.name}:{node.lineno}: {word!r}")
    return found


def test_no_vendor_word_is_written_outside_the_codecs() -> None:
    stops, anywhere = _vendor_words()
    assert {"end_turn", "max_tokens", "tool_calls", "STOP"} <= stops  # the tables were read
    assert {"finish_reason", "overloaded_error", "prompt_tokens"} <= anywhere
    modules = sorted(ROOT.glob("benchmarks/*.py")) + sorted(ROOT.glob("stream_core/testing/*.py"))
    found = []
    for path in modules:
        name = path.relative_to(ROOT).as_posix()
        if name not in CODEC_MODULES and name not in PENDING:
            found += [
                f"{name.rsplit('/', 1)[0]}/{w}" for w in _words_written(path, stops, anywhere)
            ]
    assert found == [], "vendor words written outside the codecs:\n" + "\n".join(found)
    for name in PENDING:
        assert (ROOT / name).is_file(), f"{name} is gone: drop it from PENDING"


def test_the_scan_finds_a_hand_written_stream(tmp_path: Path) -> None:
    hand = tmp_path / "vendor.py"
    hand.write_text(
        'DELTA = {"delta": {"stop_reason": "end_turn"}, "usage": {"prompt_tokens": 3}}\n'
        'ERROR = {"type": "error", "error": {"type": "overloaded_error"}}\n'
        'REQUEST = {"max_tokens": 10, "stop": "end"}\n'
        'STOP = "max_tokens"\n'
    )
    found = sorted(w.split(":", 2)[1:] for w in _words_written(hand, *_vendor_words()))
    assert found == [
        ["1", " 'end_turn'"], ["1", " 'prompt_tokens'"], ["2", " 'overloaded_error'"],
        ["4", " 'max_tokens'"],
    ]  # fmt: skip


# --- 2, 3. error kinds read back as themselves, or as the nearest kind named --------------

_CLIENT_FOUND: dict[ErrorKind, ErrorKind] = {
    "network": "server",
    "aborted": "server",
    "protocol": "server",
    "invalid_output": "server",
    "expired": "server",
}
"""Kinds only a client finds (a dropped connection, a cancel, a broken stream, an answer
failing its schema): over HTTP each is said as the server error its status is."""

NEAREST_OVER_HTTP: dict[str, dict[ErrorKind, ErrorKind]] = {
    "anthropic-messages": {
        **_CLIENT_FOUND,
        "budget": "rate_limit",  # rate_limit_error, 429
        "refusal": "invalid_request",  # invalid_request_error, 400
        "content_filter": "invalid_request",
    },
    "openai": {
        **_CLIENT_FOUND,
        "budget": "rate_limit",  # insufficient_quota, 429: OpenAI's spent quota
        "refusal": "invalid_request",  # 400; `content_filter` is a type the client reads
    },
    # No error words over HTTP: the status alone, 500 where none means the kind.
    "status": {
        **_CLIENT_FOUND,
        "budget": "server",
        "refusal": "server",
        "content_filter": "server",
    },
}
"""An error kind an HTTP error cannot say -> the kind it reads back as, per API family.
Every other kind reads back as itself."""

FAMILY = {
    "anthropic-messages": "anthropic-messages",
    "openai-completions": "openai",
    "openai-responses": "openai",
    "mistral-conversations": "openai",
    "google-generative-ai": "status",
    "bedrock-converse-stream": "status",
    "ollama-chat": "status",
    "ollama-generate": "status",
}


def _replay(api: str, recording: Synthesized) -> AssistantMessage:
    provider, base = APIS[api]
    model = Model(id="synthetic-model", api=api, provider=provider, base_url=base)
    options = StreamOptions(api_key="k", client=replay_client(recording), max_retries=0)
    return anyio.run(complete, model, CTX, options)


def _kind(message: AssistantMessage) -> ErrorKind | None:
    return message.error.kind if message.error is not None else None


@pytest.mark.parametrize("api", list(APIS))
def test_every_kind_after_content_comes_back_as_itself(api: str) -> None:
    # Before content: tests/test_vendor_error_kinds.py.
    back = {}
    for kind in KINDS:
        script = AssistantMessage(
            api="faux", provider="faux", model="m", content=[TextContent(text="partial")],
            stop_reason="error", error=StreamError(kind=kind, message="it went wrong"),
        )  # fmt: skip
        m = _replay(api, vendor_bytes(faux_message(script), api))
        assert m.text() == "partial", (api, kind)
        back[kind] = _kind(m)
    unsaid = UNEXPRESSED.get(api, frozenset())
    assert back == {k: "server" if k in unsaid else k for k in KINDS}


@pytest.mark.parametrize("api", list(APIS))
def test_every_kind_as_an_http_error_comes_back_as_the_table_says(api: str) -> None:
    nearest = NEAREST_OVER_HTTP[FAMILY[api]]
    back = {}
    for kind in KINDS:
        status = http_error(api, kind, "it went wrong")[0]
        synth = vendor_bytes(faux_error(kind, "it went wrong", status=status), api)
        assert synth.meta["status"] == status
        back[kind] = _kind(_replay(api, synth))
    assert back == {k: nearest.get(k, k) for k in KINDS}


@pytest.mark.parametrize("api", list(DIALECTS))
def test_every_kind_a_dialect_answers_comes_back_as_the_table_says(api: str) -> None:
    nearest = NEAREST_OVER_HTTP[FAMILY[api]]
    back = {}
    for kind in KINDS:
        status, body = dialect(api).error_body(kind, "it went wrong")
        meta = {"status": status, "headers": {"content-type": "application/json"}}
        back[kind] = _kind(_replay(api, Synthesized(json.dumps(body).encode(), meta)))
    assert back == {k: nearest.get(k, k) for k in KINDS}


def test_serve_answers_in_the_vendor_s_own_error_bodies() -> None:
    # The fake vendor's own 404 (a model it has nothing for) and 400 (a scenario played
    # out), in each API's body: read back as `not_found` and `invalid_request`.
    from stream_core.testing import fake_vendor

    with fake_vendor(scenarios={f"once-{api}": ["Hi."] for api in APIS}) as server:
        options = StreamOptions(base_url=server.url, api_key="k", max_retries=0)
        for api, (provider, _) in APIS.items():
            back = []
            for name in ("nobody", f"once-{api}", f"once-{api}"):
                model = Model(id=name, api=api, provider=provider, base_url=server.url)
                back.append(_kind(anyio.run(complete, model, CTX, options)))
            assert back == ["not_found", None, "invalid_request"], api


# --- 4. N pieces are N deltas: the benchmarks' workload ----------------------------------

_ARGS = {"path": "src/a.py", "content": 'x = "quoted"\n' * 8, "n": 3, "ok": True}


def _pieces_turn(texts: list[str], fragments: list[str]) -> FauxTurn:
    """A text in `texts` and a call whose arguments come in `fragments`, one frame each."""
    frames: list[dict[str, Any]] = [{"b": 0, "text": t} for t in texts]
    frames.append({"end": 0})
    frames.append({"b": 1, "tool": {"id": "call_1", "name": "write"}, "args": fragments[0]})
    frames += [{"b": 1, "args": f} for f in fragments[1:]]
    frames += [{"end": 1}, {"done": {"stop": "tool_use", "usage": {"input": 5, "output": 9}}}]
    return FauxTurn(frames=tuple(frames))


async def _deltas(api: str, turn: FauxTurn) -> tuple[dict[int, int], AssistantMessage]:
    provider, base = APIS[api]
    model = Model(id="synthetic-model", api=api, provider=provider, base_url=base)
    options = StreamOptions(api_key="k", client=replay_client(vendor_bytes(turn, api)))
    counts: dict[int, int] = {}
    async with stream(model, CTX, options) as s:
        async for event in s:
            delta = getattr(event, "delta", None)
            if delta is not None and delta.type.endswith("_delta"):
                counts[delta.content_index] = counts.get(delta.content_index, 0) + 1
        return counts, await s.result()


@pytest.mark.parametrize("api", [a for a in APIS if a != "ollama-generate"])
def test_a_block_in_n_pieces_is_n_deltas(api: str) -> None:
    texts = ["Hel", "lo ", "the", "re."]
    whole = json.dumps(_ARGS)
    cuts = [0, 7, 30, 61, 90, len(whole)]
    fragments = [whole[a:z] for a, z in zip(cuts, cuts[1:], strict=False)]
    counts, m = asyncio.run(_deltas(api, _pieces_turn(texts, fragments)))
    assert m.error is None and m.text() == "Hello there."
    assert m.content[1].arguments == _ARGS  # type: ignore[union-attr]
    # Ollama sends a call whole; Gemini streams one as Vertex AI's partialArgs (a part per
    # argument value, 4 here, the longest string cut to fill the rest, one closing it).
    calls = 1 if api == "ollama-chat" else len(fragments)
    assert counts == {0: len(texts), 1: calls}


def test_the_benchmarks_bodies_replay_to_their_scripts() -> None:
    # benchmarks/run.py's own check: every delta an event, the final content exact.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        run: Any = importlib.import_module("run")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    for provider in run.PROVIDERS:
        for kind in run.kinds_for(provider, list(run.KINDS)):
            body = run.make_body(provider, kind, 40)
            asyncio.run(run.measure(body, 0))  # its check raises if the replay differs
