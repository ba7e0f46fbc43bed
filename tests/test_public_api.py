"""The public surface: exported names, typing marker, providers, argument checks, registry."""

from __future__ import annotations

import ast
import gc
import importlib
import inspect
import logging
import pkgutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
import respx

import stream_core
import stream_core.provider
import stream_core.providers as providers
from stream_core import (
    AssistantStream,
    Context,
    Model,
    StreamOptions,
    UserMessage,
)
from stream_core import _registry as registry
from stream_core.contract_tests.kit import contract_model, options, sse_response
from stream_core.providers import openai_completions

HELLO = Context(messages=[UserMessage(content="hi")])
OK_BODY = (
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}'
    b"\n\ndata: [DONE]\n\n"
)


# --- names --------------------------------------------------------------------------------


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's isort-style order for `__all__`: CONSTANTS, then Classes, then the rest."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_all_is_sorted() -> None:
    names = list(stream_core.__all__)

    assert names == sorted(names, key=_isort_key)
    assert len(names) == len(set(names))


def test_all_lists_exactly_the_public_non_module_names() -> None:
    for name in stream_core.__all__:  # loaded at first use: touch every one
        getattr(stream_core, name)
    public = {
        name
        for name, value in vars(stream_core).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }

    assert public == set(stream_core.__all__) - {"__version__"}
    for name in stream_core.__all__:
        assert getattr(stream_core, name) is not None, name


def test_import_loads_only_what_is_used() -> None:
    # A fresh interpreter: `import stream_core` pulls in neither pydantic nor httpx, and a
    # call's provider is imported alone, not every built-in.
    code = (
        "import sys, stream_core\n"
        "before = {m for m in sys.modules if m.split('.')[0] in ('pydantic', 'httpx')}\n"
        "from stream_core.provider import get_provider\n"
        "get_provider('anthropic-messages')\n"
        # Helper modules two APIs share (`_claude`, ...) may come along; no other API may.
        "loaded = sorted(m for m in sys.modules if m.startswith('stream_core.providers.')\n"
        "                and not m.rsplit('.', 1)[1].startswith('_'))\n"
        "print(sorted(before), loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd()
    ).stdout
    assert out.strip() == "[] ['stream_core.providers.anthropic']", out


@pytest.mark.parametrize(
    "code",
    [
        "from stream_core import provider; print(provider.__name__)",
        "import stream_core; print(stream_core.provider.__name__)",
        "import stream_core; print(hasattr(stream_core, 'no_such_name'))",
        "import stream_core; from stream_core import _cost; print(_cost.__name__)",
    ],
)
def test_the_package_door_answers_in_a_fresh_interpreter(code: str) -> None:
    # Each spelling once looped in the lazy `__getattr__` (RecursionError) when nothing
    # had imported `stream_core.provider` yet; a test session always had.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path.cwd()
    )
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split()[-1] in ("stream_core.provider", "False", "stream_core._cost")


def test_the_builtin_module_table_names_the_module_serving_each_api() -> None:
    served = {}
    for module in provider_modules():
        name = module.__name__.rsplit(".", 1)[1]
        served[module.API] = name
        for wire in getattr(module, "WIRES", ()):
            served[wire.api] = name
    # Only a shortcut: a new provider module missing from it is still found (on a miss), so
    # adding a provider touches nothing else; every entry it has must be right.
    assert {api: served.get(api) for api in registry._BUILTIN_MODULES} == registry._BUILTIN_MODULES


def test_package_is_marked_typed() -> None:
    assert (Path(stream_core.__file__).parent / "py.typed").is_file()


def provider_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"{providers.__name__}.{info.name}")
        for info in pkgutil.iter_modules(providers.__path__)
        if not info.name.startswith("_")
    ]


def test_every_provider_module_exports_api_and_stream() -> None:
    modules = provider_modules()
    assert {m.__name__.rsplit(".", 1)[1] for m in modules} >= {"anthropic", "openai_completions"}

    apis = []
    for module in modules:
        assert isinstance(module.API, str) and module.API, module.__name__
        assert callable(module.stream), module.__name__
        params = list(inspect.signature(module.stream).parameters.values())
        assert [p.name for p in params[:3]] == ["model", "context", "options"]
        assert params[2].default is None
        apis.append(module.API)
        # ...and the registry serves each of them with that module's function.
        assert stream_core.provider.get_provider(module.API).stream is module.stream
    assert len(apis) == len(set(apis))


# --- secrets ------------------------------------------------------------------------------


def test_stream_options_repr_never_shows_a_secret() -> None:
    opts = StreamOptions(
        api_key="sk-secret-123456789",
        headers={"Authorization": "Bearer sk-secret-123456789", "X-Trace": "visible"},
    )

    for text in (repr(opts), str(opts), f"{opts}"):
        assert "sk-secret" not in text
        assert "123456789" not in text
        assert "visible" in text  # non-secret headers still help debugging


@pytest.mark.parametrize("header", ["x-api-key", "API-Key", "proxy-authorization"])
def test_stream_options_repr_hides_other_auth_headers(header: str) -> None:
    opts = StreamOptions(headers={header: "sk-secret-123456789"})

    assert "sk-secret-123456789" not in repr(opts)


# --- argument checks, before any I/O ------------------------------------------------------


@pytest.fixture
def no_io() -> Iterator[respx.Route]:
    """A mocked network that must not be touched."""
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        route = router.route().mock(return_value=sse_response([OK_BODY]))
        yield route
    assert route.call_count == 0


MODEL = contract_model("openai-completions")


def test_a_model_that_is_not_a_model_is_a_type_error(no_io: respx.Route) -> None:
    with pytest.raises(TypeError, match="model"):
        stream_core.stream({"id": "gpt-x", "api": "openai-completions"}, HELLO)  # type: ignore[arg-type]


def test_options_of_the_wrong_type_are_a_type_error(no_io: respx.Route) -> None:
    with pytest.raises(TypeError, match="options"):
        stream_core.stream(MODEL, HELLO, {"api_key": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ([{"role": "user"}], r"context\.messages\.0\.content: Field required"),
        (
            [{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}],
            r"context\.messages\.1",
        ),
        (
            [{"role": "assistant", "content": [], "api": "a", "provider": "p"}],
            r"context\.messages\.0\..*model",
        ),
    ],
)
def test_a_context_dict_with_a_bad_message_names_the_field(
    messages: list[dict[str, Any]], where: str, no_io: respx.Route
) -> None:
    with pytest.raises(ValueError, match=where):
        stream_core.stream(MODEL, {"messages": messages})


def test_an_unknown_context_field_is_named(no_io: respx.Route) -> None:
    with pytest.raises(ValueError, match=r"context\.system\b"):
        stream_core.stream(MODEL, {"system": "Be brief.", "messages": []})


def test_a_valid_context_dict_is_accepted(no_io: respx.Route) -> None:
    s = stream_core.stream(
        MODEL, {"system_prompt": "x", "messages": [{"role": "user", "content": "hi"}]}
    )

    assert isinstance(s, AssistantStream)


def test_an_api_no_provider_serves_is_named(
    no_io: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    monkeypatch.setattr(registry, "_loaded_plugins", False)
    model = MODEL.model_copy(update={"api": "carrier-pigeon-v1"})

    with pytest.raises(ValueError, match="carrier-pigeon-v1"):
        stream_core.stream(model, HELLO)


# --- registry -----------------------------------------------------------------------------


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A private copy of the registry (built-ins loaded), restored after the test."""
    stream_core.provider.get_provider("anthropic-messages")  # built-ins are in before the copy
    table = dict(registry._registry)
    monkeypatch.setattr(registry, "_registry", table)
    monkeypatch.setattr(registry, "_loaded_plugins", False)
    monkeypatch.delenv("STREAM_CORE_PLUGINS", raising=False)
    return table


def fake_provider_module(api: str, host: str) -> ModuleType:
    """A provider module serving `api` by speaking Chat Completions to `host`."""
    module = ModuleType(f"fake_{api.replace('-', '_')}")

    def stream(model: Model, context: Any, options: StreamOptions | None = None) -> AssistantStream:
        if model.api != api:
            raise ValueError(f"{api} cannot serve {model.api}")
        wire_model = model.model_copy(
            update={"api": openai_completions.API, "base_url": f"https://{host}/v1"}
        )
        return openai_completions.stream(wire_model, context, options)

    module.API = api  # type: ignore[attr-defined]
    module.stream = stream  # type: ignore[attr-defined]
    return module


async def _complete_via(api: str, host: str) -> str:
    model = contract_model("openai-completions").model_copy(update={"api": api})
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(f"https://{host}/v1/chat/completions").mock(
            return_value=sse_response([OK_BODY])
        )
        message = await stream_core.complete(model, HELLO, options())
    assert route.call_count == 1
    assert message.error is None, message.error
    return message.text()


def test_register_and_unregister_a_provider(isolated_registry: dict[str, Any]) -> None:
    fake = fake_provider_module("fake-chat", "fake.test")

    stream_core.provider.register_provider(fake.API, fake.stream, source="my-app")

    entry = stream_core.provider.get_provider("fake-chat")
    assert (entry.api, entry.stream, entry.source) == ("fake-chat", fake.stream, "my-app")
    assert "fake-chat" in [e.api for e in stream_core.list_providers()]
    assert anyio.run(_complete_via, "fake-chat", "fake.test") == "ok"

    stream_core.provider.unregister_providers("my-app")

    with pytest.raises(ValueError, match="fake-chat"):
        stream_core.provider.get_provider("fake-chat")
    # Only that source's entries went away.
    assert stream_core.provider.get_provider("anthropic-messages").source == "builtin"


@dataclass
class FakeEntryPoint:
    name: str
    module: ModuleType | None
    loads: list[str] = field(default_factory=list)
    group: str = "stream_core.providers"
    value: str = "fake.module"

    def load(self) -> ModuleType:
        self.loads.append(self.name)
        if self.module is None:
            raise ImportError(f"no module for {self.name}")
        return self.module


def install_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(registry, "entry_points", entry_points)


def test_a_plugin_is_loaded_from_its_entry_point_on_first_miss(
    isolated_registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = FakeEntryPoint("pigeon", fake_provider_module("pigeon-chat", "pigeon.test"))
    install_entry_points(monkeypatch, ep)

    stream_core.provider.get_provider("anthropic-messages")  # a hit loads nothing
    assert ep.loads == []

    entry = stream_core.provider.get_provider("pigeon-chat")

    assert entry.source == "pigeon"
    assert ep.loads == ["pigeon"]
    assert anyio.run(_complete_via, "pigeon-chat", "pigeon.test") == "ok"
    stream_core.provider.get_provider("pigeon-chat")
    assert ep.loads == ["pigeon"]  # loaded once


def test_plugins_allowlist_is_honoured(
    isolated_registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = FakeEntryPoint("wanted", fake_provider_module("wanted-chat", "wanted.test"))
    unwanted = FakeEntryPoint("unwanted", fake_provider_module("unwanted-chat", "unwanted.test"))
    install_entry_points(monkeypatch, wanted, unwanted)
    monkeypatch.setenv("STREAM_CORE_PLUGINS", " wanted , other")

    assert stream_core.provider.get_provider("wanted-chat").source == "wanted"
    with pytest.raises(ValueError, match="unwanted-chat"):
        stream_core.provider.get_provider("unwanted-chat")
    assert unwanted.loads == []  # not even imported


def test_an_empty_allowlist_loads_no_plugin(
    isolated_registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = FakeEntryPoint("pigeon", fake_provider_module("pigeon-chat", "pigeon.test"))
    install_entry_points(monkeypatch, ep)
    monkeypatch.setenv("STREAM_CORE_PLUGINS", "")

    with pytest.raises(ValueError, match="pigeon-chat"):
        stream_core.provider.get_provider("pigeon-chat")
    assert ep.loads == []
    assert stream_core.provider.get_provider("openai-completions").source == "builtin"


def test_a_broken_plugin_is_logged_and_does_not_block_the_others(
    isolated_registry: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = FakeEntryPoint("broken", None)
    not_a_provider = FakeEntryPoint("empty", ModuleType("empty"))
    good = FakeEntryPoint("good", fake_provider_module("good-chat", "good.test"))
    install_entry_points(monkeypatch, broken, not_a_provider, good)
    caplog.set_level(logging.ERROR, logger="stream_core")

    assert stream_core.provider.get_provider("good-chat").source == "good"
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "broken" in logged and "empty" in logged


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An empty registry, as in a new process: nothing loaded yet."""
    table: dict[str, Any] = {}
    monkeypatch.setattr(registry, "_registry", table)
    monkeypatch.setattr(registry, "_loaded_builtins", False)
    monkeypatch.setattr(registry, "_loaded_plugins", False)
    monkeypatch.delenv("STREAM_CORE_PLUGINS", raising=False)
    return table


FIRST_CALLS = {
    "get_provider": lambda: stream_core.provider.get_provider("openai-completions"),
    "get_provider_miss": lambda: pytest.raises(
        ValueError, stream_core.provider.get_provider, "nope"
    ),
    "list_providers": stream_core.list_providers,
}


@pytest.mark.parametrize("first", FIRST_CALLS)
def test_a_plugin_never_takes_a_builtin_api_whatever_is_called_first(
    fresh_registry: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    first: str,
) -> None:
    clash = FakeEntryPoint("hijack", fake_provider_module("openai-completions", "evil.test"))
    install_entry_points(monkeypatch, clash)
    caplog.set_level(logging.WARNING, logger="stream_core")

    FIRST_CALLS[first]()
    stream_core.list_providers()

    assert stream_core.provider.get_provider("openai-completions").source == "builtin"
    assert [e.source for e in stream_core.list_providers() if e.api == "openai-completions"] == [
        "builtin"
    ]
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "'hijack'" in logged and "ignored" in logged


@pytest.mark.parametrize("first", FIRST_CALLS)
@pytest.mark.parametrize("register_before", [True, False], ids=["before", "after"])
def test_an_explicit_registration_wins_whatever_is_called_first(
    fresh_registry: dict[str, Any], monkeypatch: pytest.MonkeyPatch, first: str,
    register_before: bool,
) -> None:  # fmt: skip
    plugin = FakeEntryPoint("plug", fake_provider_module("anthropic-messages", "plug.test"))
    install_entry_points(monkeypatch, plugin)
    mine = fake_provider_module("anthropic-messages", "mine.test")

    if register_before:
        stream_core.provider.register_provider(mine.API, mine.stream, source="my-app")
    FIRST_CALLS[first]()
    if not register_before:
        stream_core.provider.register_provider(mine.API, mine.stream, source="my-app")
    stream_core.list_providers()

    entry = stream_core.provider.get_provider("anthropic-messages")
    assert (entry.source, entry.stream) == ("my-app", mine.stream)


# --- trio ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_finished_stream_leaves_no_abandoned_generator(backend: str) -> None:
    async def main() -> str:
        with respx.mock(assert_all_mocked=True) as router:
            router.route().mock(return_value=sse_response([OK_BODY]))
            message = await stream_core.complete(MODEL, HELLO, options())
        gc.collect()
        await anyio.sleep(0)  # let the event loop run any finalizers it scheduled
        return message.text()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert anyio.run(main, backend=backend) == "ok"

    abandoned = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    # httpx's body generators nest (aiter_raw over the client's, the transport's, ...):
    # none is left to trio's finalizer, ours or httpx's (see tests/test_body_hygiene.py).
    assert abandoned == []


def test_the_lazy_table_names_what_type_checkers_see() -> None:
    # `stream_core/__init__.py` lists each public name three times: imports for type
    # checkers, the lazy table the runtime reads, `__all__`. They must agree name for name
    # and module for module, or mypy and the running program disagree about the package.
    tree = ast.parse(Path(stream_core.__file__).read_text())
    checked = {
        (node.module, alias.name)
        for block in tree.body
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    lazy = {(module, name) for module, names in stream_core._LAZY.items() for name in names}

    assert {(m.lstrip("."), n) for m, n in checked} == lazy
    assert {name for _, name in lazy} == set(stream_core.__all__) - {"__version__"}
