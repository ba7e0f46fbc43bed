"""Model descriptions and the catalog.

A `Model` is plain data: which wire API speaks to it, where, and what it costs. Custom
models (a local vLLM, a fine-tune, a proxy) are ordinary constructors; the catalog only
saves typing for the common ones. It is `catalog.json`, generated from models.dev's data by
`scripts/generate_catalog.py` and read on first use.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import from_json

from ._checks import SECRET_HEADERS, base_url_problem, header_problem

if TYPE_CHECKING:
    from ._capabilities import Capabilities

__all__ = ["Model", "ModelPrices", "get_model", "list_models", "register_model"]


class ModelPrices(BaseModel):
    """USD per million tokens. A price left None is unknown, and so is the cost."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cache_read: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cache_write: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class Model(BaseModel):
    """A model as a call needs it: the `id` sent on the wire, the wire `api` that picks the
    provider, the `provider` that serves and bills it, its `base_url`, limits
    (`context_window`, `max_tokens`), `prices` and capabilities. `get_model` gives the
    catalog's; construct one for any other endpoint (a local server, a gateway) with the
    same fields.

    Re-point one (another base URL, id, provider or prices) with `model.replace(...)`: it
    checks the changes as the constructor does, so `replace(prices=None)` raises rather
    than leave a model that a budget cannot price, and so does an assigned field
    (`model.prices = None`). pydantic's `model_copy(update=...)` checks nothing: what it
    leaves is checked again at the call (base URL, headers), and a model whose prices are
    not prices is never admitted under a budget. The key is not part of a model: give it
    to the call (`StreamOptions(api_key=...)`) or in the provider's variable."""

    model_config = ConfigDict(extra="forbid", defer_build=True, validate_assignment=True)

    id: str = Field(min_length=1)
    """The id sent on the wire."""
    name: str = ""
    api: str = Field(min_length=1)
    """Wire API: selects the provider module (e.g. "anthropic-messages")."""
    provider: str = Field(min_length=1)
    """Who serves and bills it (e.g. "anthropic", "groq"); picks the API-key variable."""
    base_url: str = Field(min_length=1)
    reasoning: bool = False
    input: list[Literal["text", "image"]] = Field(default_factory=lambda: ["text"])  # type: ignore[arg-type]
    prices: ModelPrices = Field(default_factory=ModelPrices)
    context_window: int = 128_000
    max_tokens: int = 8_192
    headers: dict[str, str] = Field(default_factory=dict)
    compat: dict[str, Any] = Field(default_factory=dict)
    """Per-endpoint flags overriding the provider's detected defaults, field by field."""
    knowledge: str | None = None
    """Training-data cut-off ("YYYY-MM" or "YYYY-MM-DD"), when published."""
    structured_output: Literal["native", "tool"] | None = None
    """How `StreamOptions.output_schema` is asked of this model: the API's native mode, or
    one forced tool; None lets the provider decide from the model id."""

    def __repr__(self) -> str:
        return f"Model(provider={self.provider!r}, id={self.id!r}, api={self.api!r})"

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`, checked as the constructor checks them (a bad base URL,
        header or price raises `pydantic.ValidationError`, a `ValueError`):
        `get_model("openai", "gpt-4o").replace(base_url="https://gateway.example/v1",
        id="gpt-4o-team")`. Prices stay those of the model unless changed; a copy whose id
        the price table does not know is priced by them."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        checked = type(self).model_validate({**current, **changes})
        return self.model_copy(update={name: getattr(checked, name) for name in changes})

    def __replace__(self, **changes: Any) -> Self:
        # `copy.replace(model, ...)` (Python 3.13): validated too.
        return self.replace(**changes)

    def capabilities(self) -> Capabilities:
        """What this model takes, before the call: each control and how it is sent, the
        controls `stream()` refuses for it and why, its reasoning levels, output modes,
        image types, window, output limit, and whether it is priced. Read from the tables
        `stream()` checks, so the two always agree."""
        query = _capabilities_of
        if query is None:
            # Bound by `_registry` at its import (it sits above the catalog, so it is never
            # imported from here); the door's `stream`, `get_model` and `Model` import it.
            importlib.import_module("stream_core._registry")
            query = _capabilities_of
        assert query is not None
        return query(self)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        problem = base_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        problem = model_headers_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


def model_headers_problem(headers: dict[str, str]) -> str | None:
    for k, v in headers.items():
        problem = header_problem(k, v, secret=k.lower() in SECRET_HEADERS)
        if problem is not None:
            return problem
    return None


# A dated snapshot id: Anthropic's -20250929, OpenAI's -2024-08-06.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")

_registered: dict[tuple[str, str], Model] = {}


def package_data(name: str) -> bytes:
    """A data file shipped in this package, read by the package's own loader (zip imports
    too): `importlib.resources` would load its readers, ~0.4 MB a process keeps."""
    import pkgutil

    data = pkgutil.get_data(__package__ or "stream_core", name)
    if data is None:  # only a loader that cannot read files gives None
        raise FileNotFoundError(f"stream_core/{name}")
    return data


@functools.cache
def _catalog() -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """(provider rows, entries by (provider, id)), parsed once on first use."""
    data = from_json(package_data("catalog.json"))
    providers: dict[str, dict[str, Any]] = data["providers"]
    entries = {(m["provider"], m["id"]): m for m in data["models"]}
    _derive_claude_on_vertex(providers, entries)
    return providers, entries


_CLAUDE_VERTEX_BASE_URL = (
    "https://{host}/v1/projects/{project}/locations/{location}/publishers/anthropic"
)
_DATED = re.compile(r"^(.*)-(\d{8})$")


def _derive_claude_on_vertex(
    providers: dict[str, dict[str, Any]], entries: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """Claude on Vertex AI (`anthropic-vertex`): Anthropic's models, limits and list prices
    (Google bills Claude at Anthropic's), under Vertex's ids: a dated snapshot as
    `claude-sonnet-4-5@20250929`, an undated model by its id; the undated alias of a dated
    snapshot is left out (Vertex has none)."""
    if "anthropic" not in providers or "anthropic-vertex" in providers:
        return
    providers["anthropic-vertex"] = {
        "apis": ["anthropic-messages"],
        "base_url": _CLAUDE_VERTEX_BASE_URL,
        "env": ["GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS"],
        "name": "Claude on Vertex AI",
        "source": "anthropic (Vertex AI ids)",
    }
    claude = [e for (p, _), e in entries.items() if p == "anthropic"]
    dated_bases = {m.group(1) for e in claude if (m := _DATED.match(e["id"]))}
    for entry in claude:
        match = _DATED.match(entry["id"])
        if match is not None:
            model_id = f"{match.group(1)}@{match.group(2)}"
        elif entry["id"] in dated_bases or entry["id"].endswith(("-0", "-latest")):
            continue
        else:
            model_id = entry["id"]
        entries[("anthropic-vertex", model_id)] = {
            **entry,
            "provider": "anthropic-vertex",
            "id": model_id,
        }


def catalog_output_limit(provider: str, model_id: str) -> int | None:
    """The output limit the catalog publishes for `provider`/`model_id` (None: not a
    catalog model, or none published)."""
    entry = _catalog()[1].get((provider, model_id))
    limit = entry.get("max_tokens") if entry is not None else None
    return limit if isinstance(limit, int) and limit > 0 else None


def catalog_source() -> dict[str, str]:
    """Where the shipped catalog came from (models.dev URL, revision, licence)."""
    data = from_json(package_data("catalog.json"))
    source: dict[str, str] = data["source"]
    return source


def model_apis(provider: str, model_id: str) -> list[str]:
    """The wire APIs the catalog knows `provider`/`model_id` through, default first."""
    providers, entries = _catalog()
    entry = entries.get((provider, model_id))
    if entry is None:
        return []
    apis: list[str] = entry.get("apis") or providers[provider]["apis"]
    return apis


def _build(entry: dict[str, Any], api: str | None = None) -> Model:
    row = _catalog()[0][entry["provider"]]
    apis = entry.get("apis") or row["apis"]
    return Model(
        id=entry["id"],
        name=entry["name"],
        api=api or apis[0],
        provider=entry["provider"],
        base_url=row["base_url"],
        reasoning=entry["reasoning"],
        input=entry["input"],
        prices=ModelPrices(**entry.get("prices", {})),
        context_window=entry["context_window"],
        max_tokens=entry["max_tokens"],
        compat=dict(row.get("compat", {})),
        knowledge=entry.get("knowledge"),
    )


def _find(provider: str, model_id: str, api: str | None) -> Model | None:
    found = _registered.get((provider, model_id))
    if found is not None:
        return found if api is None or api == found.api else None
    entry = _catalog()[1].get((provider, model_id))
    if entry is None:
        return None
    if api is not None and api not in model_apis(provider, model_id):
        raise KeyError(
            f"{provider}/{model_id} is not served through {api!r} "
            f"(it is through: {', '.join(model_apis(provider, model_id))})"
        )
    return _build(entry, api)


def get_model(provider: str, model_id: str | None = None, *, api: str | None = None) -> Model:
    """The catalog entry for `provider`/`model_id` (or one "provider/model" string).

    A dated snapshot the catalog does not list resolves to its undated entry, keeping the
    dated id for the wire. `api` picks another wire API the model is served through (e.g.
    "openai-responses"). Provider `ollama` is a local Ollama server: any model id resolves,
    to Ollama's native API (`ollama-chat`; `api="ollama-generate"` or
    `"openai-completions"` for its other endpoints) at `OLLAMA_HOST` (as Ollama reads it:
    `host:port`, a host, or a URL), else `http://localhost:11434`. Models registered by
    plugins (`register_model` when their module is imported) are found too: a miss loads
    the installed plugins, once, and looks again. A miss raises `KeyError` naming the
    closest known ids.
    """
    if model_id is None:
        provider, _, model_id = provider.partition("/")
    model = _find(provider, model_id, api)
    if model is None:
        base = _SNAPSHOT.sub("", model_id)
        if base != model_id:
            found = _find(provider, base, api)
            if found is not None:
                model = found.model_copy(update={"id": model_id})
    if model is None:
        model = _local(provider, model_id, api)
    if model is None and _load_plugins():
        # A plugin registers its models when it is imported: loaded, once, on a miss.
        return get_model(provider, model_id, api=api)
    if model is not None:
        return model
    import difflib  # only for this error's suggestions

    known = sorted({p for p, _ in _catalog()[1]} | {p for p, _ in _registered} | {OLLAMA})
    if provider not in known:
        close = difflib.get_close_matches(provider, known, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
        raise KeyError(f"unknown provider {provider!r} ({hint})")
    ids = [m.id for m in list_models(provider)]
    close = difflib.get_close_matches(model_id, ids, n=5, cutoff=0.4)
    hint = f"close: {', '.join(close)}" if close else f"{len(ids)} known, see list_models()"
    raise KeyError(f"no model {model_id!r} for provider {provider!r} ({hint})")


OLLAMA = "ollama"
OLLAMA_DEFAULT_HOST = "http://localhost:11434"
_OLLAMA_APIS = {"ollama-chat": "", "ollama-generate": "", "openai-completions": "/v1"}


def ollama_host() -> str:
    """The local Ollama server's base URL: `OLLAMA_HOST` read as Ollama itself reads it
    (`host:port`, `host`, `:port` or a URL; without a scheme, http and port 11434), else
    `http://localhost:11434`."""
    value = os.environ.get("OLLAMA_HOST", "").strip().rstrip("/")
    if not value:
        return OLLAMA_DEFAULT_HOST
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "http", value
    hostport, slash, path = rest.partition("/")
    found = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d+))?", hostport)
    host, port = (found.group(1), found.group(2)) if found else (hostport, None)
    if host in ("", "0.0.0.0", "[::]"):  # a server's "listen everywhere": this machine
        host = "localhost"
    if port is None and not sep:
        port = "11434"  # a bare host is Ollama's port; a URL's scheme says its own
    url = f"{scheme}://{host}" + (f":{port}" if port else "")
    url = f"{url}/{path}" if slash and path else url
    # `unix://`, `file://`, a CR or LF: named here, not a `network` error at the first call.
    problem = base_url_problem(url)
    if problem is not None:
        raise ValueError(f"OLLAMA_HOST (from the environment): {problem}")
    return url


def _local(provider: str, model_id: str, api: str | None) -> Model | None:
    """A model of a local server that serves whatever it has pulled (Ollama)."""
    if provider != OLLAMA or not model_id:
        return None
    api = api or "ollama-chat"
    if api not in _OLLAMA_APIS:
        raise KeyError(
            f"ollama/{model_id} is not served through {api!r} "
            f"(it is through: {', '.join(_OLLAMA_APIS)})"
        )
    return Model(
        id=model_id,
        name=model_id,
        api=api,
        provider=OLLAMA,
        base_url=ollama_host() + _OLLAMA_APIS[api],
        # Unknown for a local model: thinking is asked for only when a call asks for it
        # (Ollama then says if the model cannot), and images are sent as given.
        reasoning=True,
        input=["text", "image"],
    )


def _no_plugin_loader() -> bool:
    return False


_load_plugins: Callable[[], bool] = _no_plugin_loader
"""Loads the installed plugins, once; True when it just did (their models may now be
registered). Handed down by `_registry` at its import (`bind_plugin_loader`): the
registry sits above the catalog, so it is never imported from here. `stream_core`'s
`get_model` is served through `_registry`, so the loader is always bound for callers."""


_capabilities_of: Callable[[Model], Capabilities] | None = None
"""`Model.capabilities`, handed down by `_registry` (`bind_capabilities`)."""


def bind_capabilities(query: Callable[[Model], Capabilities]) -> None:
    """Set what `Model.capabilities()` asks (called by `_registry` only)."""
    global _capabilities_of
    _capabilities_of = query


def bind_plugin_loader(load: Callable[[], bool]) -> None:
    """Set the loader `get_model` calls on a miss (called by `_registry` only)."""
    global _load_plugins
    _load_plugins = load


def list_models(provider: str | None = None) -> list[Model]:
    """Catalog and registered models (registered ones win), sorted by provider and id."""
    found = {
        key: entry for key, entry in _catalog()[1].items() if provider is None or key[0] == provider
    }
    models = {key: _build(e) for key, e in found.items() if key not in _registered}
    models.update(
        (key, m) for key, m in _registered.items() if provider is None or key[0] == provider
    )
    return [models[key] for key in sorted(models)]


def register_model(model: Model) -> None:
    """Add `model` to the catalog, or replace the entry of the same `provider` and `id`.

    `get_model(provider, id)` and `list_models` then return it (a registered model wins over
    the shipped catalog). For plugins and harnesses that serve models the catalog does not
    list; registration lasts for the process.
    """
    _registered[(model.provider, model.id)] = model
