"""The gateway: Claude Code, Codex CLI and any OpenAI or Anthropic client reach every
vendor through stream-core.

    from stream_core.gateway import GatewayConfig, Upstream, create_app
    app = create_app(GatewayConfig(models={"claude-sonnet-4-5": Upstream("google/gemini-2.5-pro")}))

`app` is an ASGI application: mount it in your own server, or run `stream-core gateway`.
See the gateway guide.
"""

from ._app import Gateway, create_app
from ._config import GatewayConfig, GatewayKey, Upstream, hash_key, load_config

__all__ = [
    "Gateway",
    "GatewayConfig",
    "GatewayKey",
    "Upstream",
    "create_app",
    "hash_key",
    "load_config",
]
