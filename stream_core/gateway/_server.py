"""The gateway on a real ASGI server: `run(config, host, port, workers=...)` on uvicorn.

- One process (`workers=1`) serves the `GatewayConfig` it is given. Several workers share
  one listening socket; each imports `app_from_env`, which reads the config file named by
  `$STREAM_CORE_GATEWAY_CONFIG` (so several workers need a config *file*). The parent
  hands every worker the same carrier secret (a state carrier one worker signed is read
  by another) and, when keys have budgets and the config names no `limits_store`, one
  private file store (a budget is then one budget, not one per worker).
- Graceful shutdown (SIGTERM, SIGINT): the listener closes, `/health` answers 503, streams
  in flight go on; those still running one second before `graceful_timeout` are ended
  cleanly (the upstream call cancelled, the client's body closed by its dialect's end
  events), before uvicorn would cut them.
- Logging: uvicorn's own access log is off; the gateway writes one line per request to
  the `stream_core.gateway.access` logger (stdout): method, path, status, the key's
  *name*, the model name asked for, milliseconds, and usage. No key, no prompt.
- `http`: uvicorn's HTTP parser, "h11" (pure Python, what the `gateway` extra installs)
  or "httptools" (`pip install httptools`); the benchmarks measure both.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from ._app import Gateway, create_app
from ._config import GatewayConfig, load_config

__all__ = ["CONFIG_ENV", "DEFAULT_GRACE", "app_from_env", "log_config", "run"]

CONFIG_ENV = "STREAM_CORE_GATEWAY_CONFIG"
"""The config file each worker reads (`app_from_env`)."""

_SECRET_ENV = "STREAM_CORE_GATEWAY_WORKER_SECRET"
_STORE_ENV = "STREAM_CORE_GATEWAY_WORKER_STORE"
_GRACE_ENV = "STREAM_CORE_GATEWAY_WORKER_GRACE"
# Set by `run` for its own workers only: the parent's carrier secret (hex), the file store
# its workers share, the shutdown grace. Inherited by the worker processes, never logged.

DEFAULT_GRACE = 30.0
"""Seconds streams in flight are given to finish at shutdown (`graceful_timeout`)."""

logger = logging.getLogger("stream_core.gateway")

HttpParser = Literal["h11", "httptools"]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def app_from_env() -> ASGIApp:
    """The gateway of the config file `$STREAM_CORE_GATEWAY_CONFIG` names: uvicorn's
    factory for each worker (`stream_core.gateway._server:app_from_env`)."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(f"${CONFIG_ENV} names no gateway config file")
    config = load_config(path)
    secret = os.environ.get(_SECRET_ENV)
    if secret:
        config.secret = bytes.fromhex(secret)
    store = os.environ.get(_STORE_ENV)
    if store and config.limits_store is None:
        config.limits_store = store
    grace = float(os.environ.get(_GRACE_ENV) or DEFAULT_GRACE)
    return _Served(create_app(config), grace)


def log_config(access_log: bool = True) -> dict[str, Any]:
    """uvicorn's logging config, plus the gateway's: the access lines on stdout, the
    library's warnings and the gateway's own messages on stderr."""
    cfg = copy.deepcopy(LOGGING_CONFIG)
    cfg["formatters"]["gateway_access"] = {"format": "%(asctime)s %(message)s"}
    cfg["handlers"]["gateway_access"] = {
        "formatter": "gateway_access",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stdout",
    }
    cfg["loggers"]["stream_core"] = {
        "handlers": ["default"],
        "level": "WARNING",
        "propagate": False,
    }
    cfg["loggers"]["stream_core.gateway"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    cfg["loggers"]["stream_core.gateway.access"] = {
        "handlers": ["gateway_access"],
        "level": "INFO" if access_log else "WARNING",
        "propagate": False,
    }
    return cfg


class _Served:
    """The gateway as `run` serves it: at lifespan startup (in the server's main thread,
    its signal handlers in place) SIGTERM and SIGINT are also made to start the gateway's
    drain (`Gateway.drain`), so its streams end cleanly within `grace` seconds."""

    def __init__(self, gateway: Gateway, grace: float) -> None:
        self.gateway = gateway
        self.grace = grace
        self.app = gateway  # what a middleware-aware caller unwraps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            self._hook_signals()
        await self.gateway(scope, receive, send)

    def _hook_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only (a server run in a thread: tests)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            before = signal.getsignal(sig)

            def handler(signum: int, frame: FrameType | None, before: Any = before) -> None:
                loop.call_soon_threadsafe(self.gateway.drain, self.grace)
                if callable(before):
                    before(signum, frame)

            signal.signal(sig, handler)


@contextmanager
def _worker_env(config: GatewayConfig, path: Path, grace: float) -> Iterator[None]:
    """The environment `app_from_env` reads in each worker, for as long as they run."""
    saved = {k: os.environ.get(k) for k in (CONFIG_ENV, _SECRET_ENV, _STORE_ENV, _GRACE_ENV)}
    scratch = None
    os.environ[CONFIG_ENV] = str(path.resolve())
    os.environ[_SECRET_ENV] = config.secret.hex()
    os.environ[_GRACE_ENV] = repr(grace)
    budgets = any(k.budget_usd is not None for k in config.keys)
    if budgets and config.limits_store is None:
        scratch = tempfile.mkdtemp(prefix="stream-core-gateway-")
        os.environ[_STORE_ENV] = os.path.join(scratch, "limits.json")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def run(
    config: GatewayConfig | str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8080,
    workers: int = 1,
    *,
    http: HttpParser = "h11",
    graceful_timeout: float = DEFAULT_GRACE,
    access_log: bool = True,
    log_level: str = "info",
    backlog: int = 2048,
) -> None:
    """Serve the gateway on uvicorn until SIGTERM or SIGINT (see the module's docstring).

    `config`: a `GatewayConfig`, or the path of a TOML config file (needed for
    `workers` > 1: each worker reads it). Raises `OSError` when the address cannot be
    bound, `ValueError` for a config that cannot be read, `ImportError` without uvicorn
    (`pip install 'stream-core[gateway]'`)."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if http not in ("h11", "httptools"):
        raise ValueError(f"http must be 'h11' or 'httptools', not {http!r}")
    path: Path | None = None
    if not isinstance(config, GatewayConfig):
        path = Path(config)
        config = load_config(path)
    elif workers > 1:
        raise ValueError("workers > 1 needs the config as a file: each worker reads it")
    common: dict[str, Any] = dict(
        host=host,
        port=port,
        http=http,
        workers=workers,
        lifespan="on",
        access_log=False,
        log_config=log_config(access_log),
        log_level=log_level,
        timeout_graceful_shutdown=graceful_timeout,
        server_header=False,
        backlog=backlog,
    )
    if workers == 1:
        uvicorn.run(_Served(create_app(config), graceful_timeout), **common)
        return
    assert path is not None
    with _worker_env(config, path, graceful_timeout):
        uvicorn.run("stream_core.gateway._server:app_from_env", factory=True, **common)
