"""The gateway: Claude Code, Codex CLI and any OpenAI or Anthropic client reach every
vendor through stream-core.

    from stream_core.gateway import GatewayConfig, Upstream, create_app
    app = create_app(GatewayConfig(models={"claude-*": Upstream("google/gemini-2.5-pro")}))

`app` is an ASGI application: mount it in your own server, or serve it with `run(config)`
(uvicorn, the `gateway` extra) or `stream-core gateway`. See the gateway guide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._app import Gateway, create_app
from ._config import GatewayConfig, GatewayKey, Upstream, hash_key, load_config

if TYPE_CHECKING:
    from ._server import run

__all__ = [
    "Gateway",
    "GatewayConfig",
    "GatewayKey",
    "Upstream",
    "create_app",
    "hash_key",
    "load_config",
    "run",
]


def __getattr__(name: str) -> Any:
    # `run` needs uvicorn (the `gateway` extra): imported when asked for, so the ASGI app
    # can be mounted elsewhere without it.
    if name == "run":
        from ._server import run

        return run
    raise AttributeError(f"module 'stream_core.gateway' has no attribute {name!r}")
