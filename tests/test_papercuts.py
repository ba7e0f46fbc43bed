"""Papercuts a harness author and a plugin author hit, each shown from the user's side
(public API only): local Ollama models by name, plugin models in `get_model`, usage that
adds, tool results given as a string, one meaning for `StreamOptions(base_url=...)`, stop
reasons that are errors, and a contract kit that says what is missing or wrong."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
import respx
from doc_pages import docs_text

import stream_core
import stream_core.provider
from stream_core import (
    AssistantMessage,
    Context,
    Cost,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    dump_messages,
    get_model,
    load_messages,
    register_model,
    total_usage,
)
from stream_core._cli import main as cli_main
from stream_core.contract_tests.kit import (
    contract_model,
    framing,
    options,
    text_case,
)

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
HELLO = Context(messages=[UserMessage(content="hi")])
OLLAMA_OK = (
    b'{"model":"llama3.2","message":{"role":"assistant","content":"hi there"},"done":false}\n'
    b'{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true,'
    b'"done_reason":"stop","prompt_eval_count":3,"eval_count":2}\n'
)


def _ndjson(body: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "application/x-ndjson"}, content=body)


# --- 1. local Ollama models ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "base_url"),
    [
        (None, "http://localhost:11434"),
        ("10.0.0.7:4000", "http://10.0.0.7:4000"),  # host:port, no scheme (Ollama's own form)
        ("gpu-box", "http://gpu-box:11434"),  # a host alone: Ollama's port
        ("https://ollama.example.com/base", "https://ollama.example.com/base"),  # a URL
        ("0.0.0.0", "http://localhost:11434"),  # the server's "listen everywhere"
    ],
)
def test_get_model_resolves_a_local_ollama_model(
    monkeypatch: pytest.MonkeyPatch, host: str | None, base_url: str
) -> None:
    if host is None:
        monkeypatch.delenv("OLLAMA_HOST", raising=False)
    else:
        monkeypatch.setenv("OLLAMA_HOST", host)

    model = get_model("ollama", "llama3.2")

    assert (model.api, model.provider, model.id, model.base_url) == (
        "ollama-chat", "ollama", "llama3.2", base_url,
    )  # fmt: skip
    assert get_model("ollama/qwen3:8b").id == "qwen3:8b"
    assert get_model("ollama", "llama3.2", api="ollama-generate").api == "ollama-generate"
    assert get_model("ollama", "x", api="openai-completions").base_url == base_url + "/v1"


def test_a_local_ollama_model_streams_from_the_native_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:5555")
    model = get_model("ollama", "llama3.2")

    async def main() -> AssistantMessage:
        with respx.mock(assert_all_mocked=True) as router:
            route = router.post("http://127.0.0.1:5555/api/chat").mock(
                return_value=_ndjson(OLLAMA_OK)
            )
            message = await stream_core.complete(model, HELLO)
        assert route.call_count == 1
        return message

    message = anyio.run(main)
    assert message.error is None, message.error
    assert message.text() == "hi there"


def test_unknown_providers_still_suggest_ollama() -> None:
    with pytest.raises(KeyError, match="did you mean ollama"):
        get_model("olama", "llama3.2")
    with pytest.raises(KeyError, match="not served through 'anthropic-messages'"):
        get_model("ollama", "llama3.2", api="anthropic-messages")


def test_the_cli_chats_with_a_local_ollama_model_natively(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:5555")
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post("http://127.0.0.1:5555/api/chat").mock(return_value=_ndjson(OLLAMA_OK))
        code = cli_main(["chat", "ollama/llama3.2", "hello"])
    out, err = capsys.readouterr()

    assert (code, err) == (0, ""), err
    assert "hi there" in out
    assert json.loads(route.calls.last.request.content)["model"] == "llama3.2"


# --- 2. plugin models ---------------------------------------------------------------------


class _EntryPoint:
    name = "pigeon"
    group = "stream_core.providers"
    value = "pigeon_provider"

    def __init__(self) -> None:
        self.loads = 0

    def load(self) -> ModuleType:
        """Importing the plugin registers its models, as a plugin's module does."""
        self.loads += 1
        register_model(
            Model(
                id="pigeon-1", api="pigeon-chat", provider="pigeon", base_url="https://pigeon.test"
            )  # fmt: skip
        )
        module = ModuleType("pigeon_provider")
        module.API = "pigeon-chat"  # type: ignore[attr-defined]
        module.stream = lambda model, context, options=None: None  # type: ignore[attr-defined]
        return module


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[_EntryPoint]:
    """One installed plugin, not loaded yet (as in a new process)."""
    from stream_core import _models, _registry

    stream_core.list_providers()  # built-ins in before the copy
    ep = _EntryPoint()
    monkeypatch.setattr(_registry, "_registry", dict(_registry._registry))
    monkeypatch.setattr(_registry, "_loaded_plugins", False)
    monkeypatch.setattr(_registry, "entry_points", lambda group: [ep] if group == ep.group else [])
    monkeypatch.setattr(_models, "_registered", dict(_models._registered))
    monkeypatch.delenv("STREAM_CORE_PLUGINS", raising=False)
    yield ep


def test_get_model_finds_a_plugins_model_before_anything_loaded_plugins(
    plugin: _EntryPoint,
) -> None:
    get_model("anthropic", "claude-sonnet-4-5")  # a hit loads nothing
    assert plugin.loads == 0

    model = get_model("pigeon", "pigeon-1")

    assert (model.api, model.base_url) == ("pigeon-chat", "https://pigeon.test")
    assert stream_core.provider.get_provider("pigeon-chat").source == "pigeon"
    with pytest.raises(KeyError, match="no model 'pigeon-2'"):
        get_model("pigeon", "pigeon-2")
    assert plugin.loads == 1  # once, however many misses


# --- 3. usage and cost add ----------------------------------------------------------------


def _reply(usage: Usage) -> AssistantMessage:
    return AssistantMessage(api="a", provider="p", model="m", usage=usage,
                            content=[TextContent(text="x")])  # fmt: skip


def test_usage_and_cost_add_and_sum() -> None:
    a = Usage(input=10, output=5, cache_read=2, reasoning=1, total_tokens=17,
              cost=Cost(input=0.1, output=0.2, cache_read=0.01, total=0.31))  # fmt: skip
    b = Usage(input=1, output=1, cache_write=3, total_tokens=5,
              cost=Cost(input=0.01, output=0.02, cache_write=0.03, total=0.06))  # fmt: skip

    total = a + b

    assert (total.input, total.output, total.cache_read, total.cache_write) == (11, 6, 2, 3)
    assert (total.reasoning, total.total_tokens) == (1, 22)
    assert total.cost is not None
    assert total.cost.total == pytest.approx(0.37)
    assert total.cost.cache_write == pytest.approx(0.03)
    assert sum([a, b]) == total
    assert sum([a.cost, b.cost]) == total.cost  # type: ignore[list-item]
    assert (a.input, a.cost.total) == (10, 0.31)  # the operands are left as they were


def test_an_unknown_cost_makes_the_total_cost_unknown() -> None:
    priced = Usage(input=10, total_tokens=10, cost=Cost(input=1.0, total=1.0))
    unpriced = Usage(input=10, total_tokens=10)  # a model nobody has prices for

    assert (priced + unpriced).cost is None
    assert (unpriced + priced).cost is None
    assert (priced + unpriced).total_tokens == 20


def test_total_usage_sums_a_conversation() -> None:
    history: list[Any] = [
        UserMessage(content="hi"),
        _reply(Usage(input=10, output=2, total_tokens=12, cost=Cost(total=0.5))),
        ToolResultMessage(tool_call_id="c", tool_name="t", content="ok"),
        {"role": "bookkeeping", "note": "a record load_messages kept as a dict"},
        _reply(Usage(input=20, output=3, total_tokens=23, cost=Cost(total=0.25))),
    ]

    total = total_usage(history)

    assert (total.input, total.output, total.total_tokens) == (30, 5, 35)
    assert total.cost is not None and total.cost.total == pytest.approx(0.75)
    assert total_usage([*history, _reply(Usage(input=1, total_tokens=1))]).cost is None
    assert total_usage([]) == Usage(cost=Cost())


def test_the_readme_says_cost_is_a_cost_object() -> None:
    text = docs_text()
    assert "`cost` is in USD" not in text
    assert "`cost` is a `Cost`" in text
    # The quick start's print shows a number, not an object.
    assert "answer.usage.cost)" not in text


# --- 4. a tool result given as a string ---------------------------------------------------


def test_a_tool_result_takes_a_string_like_a_user_message() -> None:
    result = ToolResultMessage(tool_call_id="c1", tool_name="get_weather", content="18°C")

    assert result.content == [TextContent(text="18°C")]


def test_a_string_tool_result_is_sent_as_its_text() -> None:
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    context = Context(messages=[
        UserMessage(content="Weather?"),
        AssistantMessage(api="openai-completions", provider="openai", model="m",
                         content=[call], stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c1", tool_name="get_weather", content="18°C"),
    ])  # fmt: skip
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(404, json={"error": {"message": "not here"}})

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            model = contract_model("openai-completions")
            await stream_core.complete(model, context, options(client=client))

    anyio.run(main)
    tool = [m for m in sent[0]["messages"] if m["role"] == "tool"]
    assert tool == [{"role": "tool", "tool_call_id": "c1", "content": "18°C"}]


def test_jsonl_keeps_each_tool_result_in_the_form_it_had() -> None:
    lines = (
        '{"role":"tool_result","tool_call_id":"a","tool_name":"t","content":"plain",'
        '"is_error":false,"details":null,"timestamp":1}\n'
        '{"role":"tool_result","tool_call_id":"b","tool_name":"t","content":[{"type":"text",'
        '"text":"plain","text_signature":null}],"is_error":false,"details":null,"timestamp":2}\n'
    )

    records = load_messages(io.StringIO(lines))
    out = io.StringIO()
    dump_messages(records, out)

    assert out.getvalue() == lines
    assert [r.content for r in records] == [[TextContent(text="plain")]] * 2  # type: ignore[union-attr]


# --- 5. one meaning for StreamOptions(base_url=...) ---------------------------------------


def _base_url_table() -> dict[str, str]:
    """API -> path appended, from the README's table."""
    text = docs_text()
    start = text.index("<!-- base_url table")
    end = text.index("<!-- end base_url table -->")
    rows = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            path = re.match(r"`([^`]+)`", cells[2])
            assert path, line
            rows[cells[0].strip("`")] = path.group(1)
    return rows


def test_the_base_url_table_names_every_built_in_api() -> None:
    builtin = {e.api for e in stream_core.list_providers() if e.source == "builtin"}
    assert set(_base_url_table()) == builtin


@pytest.mark.parametrize("api", sorted(_base_url_table()))
def test_a_per_call_base_url_is_the_base_of_the_apis_own_path(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OLLAMA_HOST", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    path = _base_url_table()[api]
    model = contract_model(api)
    expected = "http://127.0.0.1:9/prefix" + path.replace("{model}", model.id)
    fixture = text_case(api)
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(
            200, headers={"content-type": framing(api).media_type}, content=fixture.body
        )

    async def main() -> AssistantMessage:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            opts = options(client=client, base_url="http://127.0.0.1:9/prefix")
            return await stream_core.complete(model, HELLO, opts)

    message = anyio.run(main)
    assert sent == [expected]
    assert message.error is None, message.error


# --- 6. a stop reason that is an error ----------------------------------------------------

TINY = "tiny-chat"


def _tiny_translator(asm: stream_core.provider.Assembler) -> stream_core.provider.Translator:
    def translate(event: str, data: str) -> None:
        obj = stream_core.provider.as_object(stream_core.provider.parse_json(data, event), "line")
        text = stream_core.provider.optional_field(obj, "text", str, "line")
        if text:
            asm.text("text", text)
        reason = stream_core.provider.optional_field(obj, "finish", str, "line")
        if reason is not None:
            asm.set_stop_reason(reason)
            asm.finished = True

    return translate


TINY_WIRE = stream_core.provider.WireAPI(
    api=TINY,
    terminal_event="a line with finish",
    stop_reasons={
        "COMPLETE": "stop",
        "MAX_TOKENS": "length",
        "ERROR": "server",  # the vendor failed the call, said through its stop reason
        "TIMEOUT": "timeout",
        "BUSY": "overloaded",
        "UNSAFE": "content_filter",
    },
    build_request=lambda model, context, opts: stream_core.provider.WireRequest(
        url=model.base_url + "/chat", payload={"model": model.id}
    ),
    auth_headers=lambda model, key: {"authorization": f"Bearer {key}"},
    translator=_tiny_translator,
    api_key_env=lambda model: None,
    key_required=lambda model: False,
    decoder=stream_core.provider.NDJSONBytesDecoder,
)


@pytest.fixture
def tiny() -> Iterator[Model]:
    stream_core.provider.register_provider(TINY, TINY_WIRE.open, source="papercuts",
                                           wire=TINY_WIRE)  # fmt: skip
    yield Model(id="tiny-1", api=TINY, provider="tiny", base_url="https://tiny.test")
    stream_core.provider.unregister_providers("papercuts")


def _finish(model: Model, reason: str) -> AssistantMessage:
    body = b'{"text":"partial answer"}\n' + json.dumps({"finish": reason}).encode() + b"\n"

    async def main() -> AssistantMessage:
        with respx.mock(assert_all_mocked=True) as router:
            router.post("https://tiny.test/chat").mock(return_value=_ndjson(body))
            return await stream_core.complete(model, HELLO, StreamOptions(max_retries=0))

    return anyio.run(main)


@pytest.mark.parametrize(
    ("reason", "kind", "retryable"),
    [("ERROR", "server", True), ("TIMEOUT", "timeout", True), ("BUSY", "overloaded", True),
     ("UNSAFE", "content_filter", False)],
)  # fmt: skip
def test_a_stop_reason_mapped_to_an_error_kind_ends_the_message_so(
    tiny: Model, reason: str, kind: str, retryable: bool
) -> None:
    message = _finish(tiny, reason)

    assert message.stop_reason == "error"
    assert message.error is not None
    assert (message.error.kind, message.error.retryable) == (kind, retryable)
    assert reason in message.error.message  # names the vendor's own value
    assert message.raw_stop_reason == reason
    assert message.text() == "partial answer"  # what arrived is kept


def test_normal_stop_rules_are_unchanged(tiny: Model) -> None:
    assert _finish(tiny, "COMPLETE").stop_reason == "stop"
    assert _finish(tiny, "MAX_TOKENS").stop_reason == "length"


def test_a_stop_rule_that_is_no_rule_raises_at_the_call() -> None:
    import dataclasses

    wire = dataclasses.replace(TINY_WIRE, stop_reasons={"ERROR": "servre"})  # type: ignore[dict-item]
    model = Model(id="tiny-1", api=TINY, provider="tiny", base_url="https://tiny.test")
    with pytest.raises(ValueError, match="'ERROR': 'servre'.*maps to no StopRule"):
        wire.open(model, HELLO)


# --- 7 and 8. the contract kit on a plugin ------------------------------------------------

ACME = ROOT / "examples" / "acme_provider"
UNFINISHED = """
import dataclasses
from acme_provider import WIRE as _GOOD, translator as _good_translator

API = _GOOD.api

def _translator(asm):
    good = _good_translator(asm)
    def translate(event, data):
        good(event, data)
        asm.finished = False  # the defect: the terminal event never finishes the message
    return translate

WIRE = dataclasses.replace(_GOOD, translator=_translator)

def stream(model, context, options=None):
    return WIRE.open(model, context, options)
"""


def _kit(tmp_path: Path, module: str, *args: str) -> str:
    (tmp_path / "acme_unfinished.py").write_text(textwrap.dedent(UNFINISHED))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join([str(ACME), str(tmp_path)])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--tb=line", *args,
         f"--stream-core-provider={module}",
         f"--stream-core-fixtures={ACME / 'recordings'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def test_a_kit_test_without_recordings_names_the_one_to_add(tmp_path: Path) -> None:
    out = _kit(tmp_path, "acme_provider", "-rs", "-k", "test_answers")
    assert out.startswith("exit 0\n"), out
    assert "got empty parameter set" not in out, out
    assert "acme-chat: WireAPI.parse_response is not set" in out, out
    assert f"add {ACME / 'recordings'}/acme-chat/<name>.body + .json" in out, out


def test_the_kit_names_a_translator_that_never_finishes_first(tmp_path: Path) -> None:
    out = _kit(tmp_path, "acme_unfinished", "-x")
    assert out.startswith("exit 1\n"), out
    assert "1 failed" in out, out
    assert "test_the_terminal_event_finishes_the_message[acme-chat]" in out, out
    assert "never set `assembler.finished = True` on the vendor's terminal event (finish)" in out
