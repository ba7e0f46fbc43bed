"""The gateway's configuration: which upstream each model name goes to, who may call.

Read from a TOML file (`load_config`) or built in code (`GatewayConfig`). Vendor keys are
named by environment variable (`api_key_env`), never written in the file; gateway keys
are stored as their SHA-256 (`hash_key`), never in clear.

    [gateway]
    secret_env = "STREAM_CORE_GATEWAY_SECRET"  # signs state carriers; share it in a fleet
    limits_store = "redis://127.0.0.1:6379/0"   # quotas and budgets shared by processes

    [models]
    "claude-sonnet-4-5" = "google/gemini-2.5-pro"   # a catalog model
    "claude-*" = "route:fleet"                        # a glob, to a route
    "gpt-5" = { model = "openai/gpt-5", base_url = "http://127.0.0.1:9000/v1" }

    [routes.fleet]
    strategy = "order"
    deployments = ["anthropic/claude-sonnet-4-5", { model = "openai/gpt-5" }]

    [keys.alice]
    sha256 = "9f86d0..."   # stream-core gateway hash-key
    budget_usd = 25.0
    max_concurrent = 8
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stream_core import Model, Route, get_model

__all__ = ["GatewayConfig", "GatewayKey", "Upstream", "hash_key", "load_config"]


def hash_key(key: str) -> str:
    """The SHA-256 (hex) a config stores for gateway key `key`."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Upstream:
    """One catalog model a model name (or a route's deployment) goes to: `model` is
    "provider/model-id"; `api`, `base_url` and `api_key_env` override the catalog's."""

    model: str
    api: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None

    def resolve(self) -> Model:
        found = get_model(self.model, api=self.api) if self.api else get_model(self.model)
        changes: dict[str, Any] = {}
        if self.base_url:
            changes["base_url"] = self.base_url
        return found.model_copy(update=changes) if changes else found


@dataclass
class GatewayKey:
    """A client's key: its `name` (in logs), the `sha256` of the key, what it may spend
    (`budget_usd`, a named budget of the limit store: shared by every gateway process
    naming the same `limits_store`) and how many of its requests one gateway process
    serves at once (`max_concurrent`; more are refused with a 429)."""

    name: str
    sha256: str
    budget_usd: float | None = None
    max_concurrent: int | None = None


@dataclass
class GatewayConfig:
    """Everything the gateway needs. `models` maps a model name a client sends (exact, or
    a glob such as `claude-*`) to an `Upstream` or to `route:NAME`; `routes` holds the
    deployments of each route. With no `keys`, any client may call (loopback use)."""

    models: dict[str, Upstream | str] = field(default_factory=dict)
    routes: dict[str, list[Upstream]] = field(default_factory=dict)
    route_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: list[GatewayKey] = field(default_factory=list)
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    limits_store: str | None = None
    max_request_bytes: int = 32 << 20
    log_prompts: bool = False
    _built: dict[str, Model | Route] = field(default_factory=dict, init=False, repr=False)
    _key_envs: dict[int, str] = field(default_factory=dict, init=False, repr=False)

    def key_env_for(self, model: Model) -> str | None:
        """The environment variable the key of `model` (as this config built it) is in,
        when its upstream names one; None: the provider's own variable."""
        return self._key_envs.get(id(model))

    def target(self, name: str) -> Model | Route | None:
        """The model or route the model name `name` goes to (None: no mapping)."""
        built = self._built.get(name)
        if built is not None:
            return built
        entry = self.models.get(name)
        if entry is None:
            for pattern, candidate in self.models.items():
                if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern):
                    entry = candidate
                    break
        if entry is None:
            return None
        target: Model | Route
        if isinstance(entry, str) and entry.startswith("route:"):
            route = entry.removeprefix("route:")
            target = self._route(route)
        else:
            upstream = Upstream(entry) if isinstance(entry, str) else entry
            target = upstream.resolve()
            if upstream.api_key_env:
                self._key_envs[id(target)] = upstream.api_key_env
        self._built[name] = target
        return target

    def _route(self, name: str) -> Route:
        key = "route:" + name
        built = self._built.get(key)
        if isinstance(built, Route):
            return built
        if name not in self.routes:
            raise KeyError(f"model names a route {name!r} the config does not define")
        route = Route([u.resolve() for u in self.routes[name]], **self.route_options.get(name, {}))
        self._built[key] = route
        return route

    def model_names(self) -> list[str]:
        """The model names a client may send (globs left out), for `GET /v1/models`."""
        return [n for n in self.models if not any(c in n for c in "*?[")]


def _upstream(value: Any, where: str) -> Upstream | str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("model"), str):
        known = {"model", "api", "base_url", "api_key_env"}
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return Upstream(**dict(value))
    raise ValueError(f"{where}: a catalog model, route:NAME, or a table with `model`")


def load_config(path: str | os.PathLike[str]) -> GatewayConfig:
    """The configuration in the TOML file at `path` (see the module's docstring). Errors
    name the table and field."""
    data = tomllib.loads(Path(path).read_text())
    gateway = data.get("gateway", {})
    config = GatewayConfig()
    secret_env = gateway.get("secret_env")
    if secret_env:
        secret = os.environ.get(secret_env)
        if not secret:
            raise ValueError(f"gateway.secret_env: ${secret_env} is not set")
        config.secret = secret.encode()
    config.limits_store = gateway.get("limits_store")
    config.max_request_bytes = int(gateway.get("max_request_bytes", config.max_request_bytes))
    config.log_prompts = bool(gateway.get("log_prompts", False))
    for name, value in data.get("models", {}).items():
        config.models[name] = _upstream(value, f"models.{name!r}")
    for name, table in data.get("routes", {}).items():
        deployments = table.get("deployments")
        if not isinstance(deployments, list) or not deployments:
            raise ValueError(f"routes.{name}.deployments: a list of models")
        ups = []
        for i, d in enumerate(deployments):
            up = _upstream(d, f"routes.{name}.deployments[{i}]")
            ups.append(Upstream(up) if isinstance(up, str) else up)
        config.routes[name] = ups
        config.route_options[name] = {k: v for k, v in table.items() if k != "deployments"}
    for name, table in data.get("keys", {}).items():
        digest = table.get("sha256")
        if not isinstance(digest, str) or len(digest) != 64:
            raise ValueError(f"keys.{name}.sha256: the key's SHA-256 in hex (hash-key)")
        budget = table.get("budget_usd")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int | float) or not budget >= 0
        ):
            raise ValueError(f"keys.{name}.budget_usd: a number of USD, at least 0")
        most = table.get("max_concurrent")
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
            raise ValueError(f"keys.{name}.max_concurrent: a whole number of at least 1")
        config.keys.append(GatewayKey(name, digest.lower(), budget, most))
    return config
