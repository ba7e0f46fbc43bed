"""Which module serves which wire API.

Built-ins register through the same call as plugins. Plugins are modules named by the
entry-point group `stream_core.providers` (`name = "package.module"`); each such module
exports `API` and `stream`. They load lazily, once, on the first lookup that misses;
`STREAM_CORE_PLUGINS` (comma-separated entry-point names, empty for none) limits which.

Who serves an API, whatever was called first: an explicit `register_provider` call wins,
then the built-in, then a plugin. A plugin naming an API that is already served is logged
and ignored: merely installing a package must never reroute a built-in API (and the key
sent with it); to replace a built-in, call `register_provider` yourself.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, overload

from ._models import Model, bind_capabilities, bind_plugin_loader, get_model
from ._options import StreamOptions
from ._pipeline.stream import AssistantStream
from ._types import AssistantMessage, Context
from ._wire import WireAPI

if TYPE_CHECKING:
    from ._capabilities import Capabilities
    from ._routes.route import Route
    from ._routes.stream import RouteStream

__all__ = [
    "ProviderEntry",
    "StreamFunction",
    "api_key_env",
    "complete",
    "get_model",
    "get_provider",
    "list_providers",
    "register_provider",
    "stream",
    "unregister_providers",
]

logger = logging.getLogger("stream_core")


class StreamFunction(Protocol):
    """A provider's `stream`: validates at the call, then returns the stream unstarted."""

    def __call__(
        self,
        model: Model,
        context: Context | dict[str, Any],
        options: StreamOptions | None = None,
    ) -> AssistantStream: ...


_BUILTIN_PACKAGE = "stream_core.providers"
_BUILTIN = "builtin"


@dataclass(frozen=True)
class ProviderEntry:
    """One registered provider: the wire `api` it serves, its `stream` function, who
    registered it (`source`) and, for providers built on the shared pipeline, its `wire`."""

    api: str
    stream: StreamFunction
    source: str
    """Who registered it ("builtin", or the plugin's entry-point name)."""
    wire: WireAPI | None = None
    """The module's `WIRE`, when it is built on the shared pipeline."""


_registry: dict[str, ProviderEntry] = {}
_loaded_builtins = False
_loaded_plugins = False


def register_provider(
    api: str, stream: StreamFunction, *, source: str = "user", wire: WireAPI | None = None
) -> None:
    """Serve `api` with `stream`, replacing any earlier registration for it; a built-in or
    plugin loaded later does not take it back."""
    _registry[api] = ProviderEntry(api, stream, source, wire)


def register_module(module: ModuleType, *, source: str) -> None:
    """Register a built-in or plugin module, unless its API is already served (see the
    module docstring for the order). A module may serve several APIs (a vendor's two
    endpoints) by exporting `WIRES`; its own `stream` serves its main `API`."""
    api = getattr(module, "API", None)
    fn = getattr(module, "stream", None)
    if not isinstance(api, str) or not callable(fn):
        raise TypeError(f"{module.__name__} must export API: str and stream()")
    wire = getattr(module, "WIRE", None)
    served: list[tuple[str, StreamFunction, WireAPI | None]] = [
        (api, fn, wire if isinstance(wire, WireAPI) else None)
    ]
    for other in getattr(module, "WIRES", ()):
        if not isinstance(other, WireAPI):
            raise TypeError(f"{module.__name__}.WIRES must hold WireAPI values")
        if other.api != api:
            served.append((other.api, other.open, other))
    for name, stream_fn, wire_api in served:
        held = _registry.get(name)
        if held is not None:
            if source != _BUILTIN:
                logger.warning(
                    "stream_core: plugin %r also serves %r, which %s serves: plugin ignored "
                    "(call register_provider to replace it)",
                    source,
                    name,
                    "the built-in" if held.source == _BUILTIN else repr(held.source),
                )
            continue
        register_provider(name, stream_fn, source=source, wire=wire_api)


def unregister_providers(source: str) -> None:
    """Remove everything one source registered."""
    for api in [a for a, e in _registry.items() if e.source == source]:
        del _registry[api]


def _load_builtins() -> None:
    global _loaded_builtins
    if _loaded_builtins:
        return
    _loaded_builtins = True
    # Every module in `providers/` that exports API and stream() is a built-in: adding a
    # provider is adding a module, nothing else.
    package = importlib.import_module(_BUILTIN_PACKAGE)
    import pkgutil  # only when every built-in is loaded (a name no table knows)

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_BUILTIN_PACKAGE}.{info.name}")
        if hasattr(module, "API") and hasattr(module, "stream"):
            register_module(module, source=_BUILTIN)


_BUILTIN_MODULES = {
    "anthropic-messages": "anthropic",
    "bedrock-converse-stream": "bedrock",
    "google-generative-ai": "google",
    "mistral-conversations": "mistral",
    "ollama-chat": "ollama",
    "ollama-generate": "ollama",
    "openai-completions": "openai_completions",
    "openai-responses": "openai_responses",
}
"""Which module of `providers/` serves each built-in API, so a call imports its own provider
and no other (importing all eight costs a first call more than the rest of its work). Only
a shortcut: a module missing here (a newcomer's) is still found by `_load_builtins`, on a
miss, so adding a provider needs no entry (tests/test_public_api.py checks the entries)."""


def _load_builtin(api: str) -> None:
    name = _BUILTIN_MODULES.get(api)
    if name is not None and not _loaded_builtins:
        register_module(importlib.import_module(f"{_BUILTIN_PACKAGE}.{name}"), source=_BUILTIN)


def _load_plugins() -> None:
    global _loaded_plugins
    if _loaded_plugins:
        return
    _load_builtins()  # built-ins take their names first, whoever asked
    _loaded_plugins = True
    allow = os.environ.get("STREAM_CORE_PLUGINS")
    allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
    for ep in entry_points(group="stream_core.providers"):
        if allowed is not None and ep.name not in allowed:
            continue
        try:
            loaded = ep.load()
            register_module(loaded, source=ep.name)
        except Exception:
            logger.exception("stream_core: plugin %r failed to load", ep.name)


def plugins_loaded() -> bool:
    """Whether the installed plugins were loaded (`load_plugins` has run)."""
    return _loaded_plugins


def _load_plugins_once() -> bool:
    """`load_plugins` for the catalog's lookup: True when it ran now, False when it had."""
    if _loaded_plugins:
        return False
    _load_plugins()
    return True


bind_plugin_loader(_load_plugins_once)


def _capabilities(model: Model) -> Capabilities:
    from ._capabilities import capabilities  # its pydantic model: built when first asked

    return capabilities(model, get_provider)


bind_capabilities(_capabilities)


def load_plugins() -> None:
    """Import every installed plugin (and the built-ins) now, once: their `register_model`
    calls at import then put their models in the catalog. `get_model` calls it on a miss."""
    _load_plugins()


def get_provider(api: str) -> ProviderEntry:
    """The provider serving the wire API `api`, loading built-ins and then plugins as
    needed. Raises `ValueError` naming the known APIs when none serves it."""
    entry = _registry.get(api)
    if entry is None:
        _load_builtin(api)
        entry = _registry.get(api)
    if entry is None:
        _load_plugins()  # all the built-ins first, then the plugins
        entry = _registry.get(api)
    if entry is None:
        raise ValueError(
            f"model.api {api!r} is served by no provider (known: {', '.join(sorted(_registry))})"
        )
    return entry


def api_key_env(model: Model) -> tuple[str | None, bool]:
    """(environment variable the model's key is read from, whether a key is required),
    so a tool can tell a person what to set before making any request."""
    wire = get_provider(model.api).wire
    if wire is None:
        return None, False
    return wire.api_key_env(model), wire.key_required(model)


def list_providers() -> list[ProviderEntry]:
    """Every registered provider, built-ins and plugins (entry-point group
    `stream_core.providers`, limited by `STREAM_CORE_PLUGINS`), sorted by API."""
    _load_builtins()
    _load_plugins()
    return sorted(_registry.values(), key=lambda e: e.api)


@overload
def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream: ...


@overload
def stream(
    model: Route, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> RouteStream: ...


def stream(
    model: Model | Route, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream | RouteStream:
    """Stream one assistant message from `model`, dispatching on `model.api` (or over the
    deployments of a `Route`)."""
    if not isinstance(model, Model):
        # Loaded at the first route call: a program that never routes never imports it.
        from ._routes.route import Route
        from ._routes.stream import RouteStream

        if isinstance(model, Route):
            if not isinstance(context, Context):
                context = Context.model_validate(context)
            return RouteStream(model, context, options, stream)
        raise TypeError(f"model must be a stream_core.Model or Route, not {type(model).__name__}")
    return get_provider(model.api).stream(model, context, options)


async def complete(
    model: Model | Route, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantMessage:
    """The final message of `stream(...)`."""
    return await stream(model, context, options).result()
