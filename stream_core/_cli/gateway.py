"""`stream-core gateway`: Claude Code, Codex CLI and any OpenAI or Anthropic client reach
every vendor through stream-core.

    stream-core gateway --config gateway.toml [--port 8080] [--workers 4]
    stream-core gateway --model claude-sonnet-4-5=google/gemini-2.5-pro --model '*=openai/gpt-5'
    stream-core gateway hash-key < key.txt     # the `sha256 = "..."` line of a [keys.NAME]

Quick flags (`--model`, `--base-url`, `--api`, `--api-key-env`) cover the one-model case
without a file; a config file (`--config`) holds routes, keys, budgets and a shared limit
store. The server is uvicorn (`pip install 'stream-core[gateway]'`).
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import json
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from ._common import positive_int, usage_error
from ._render import error

__all__ = ["add_parser", "run"]

INSTALL = "pip install 'stream-core[gateway]'"


def add_parser(sub: Any) -> None:
    """The `gateway` command and its `hash-key` subcommand, on `sub` (argparse's
    subparsers of `stream-core`)."""
    gw = sub.add_parser(
        "gateway",
        help="serve every vendor in the Anthropic, Responses and Chat Completions dialects",
        description="Serve /v1/messages (and count_tokens), /v1/responses, "
        "/v1/chat/completions and /v1/models: each model name a client sends goes to the "
        "catalog model or route the config maps it to, answered in the client's own "
        "dialect. Vendor keys come from the environment and never leave the gateway.",
    )
    gw.add_argument("--config", metavar="FILE", help="the gateway's TOML config")
    gw.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[NAME=]PROVIDER/MODEL",
        help="serve model name NAME (a glob such as 'claude-*'; without NAME=: any name) "
        "with a catalog model (repeatable; instead of --config)",
    )
    gw.add_argument("--base-url", metavar="URL", help="send the --model upstreams here")
    gw.add_argument("--api", metavar="API", help="the --model upstreams' wire API")
    gw.add_argument(
        "--api-key-env", metavar="VAR", help="the variable the --model upstreams' key is in"
    )
    gw.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    gw.add_argument("--port", type=_port, default=8080, help="port (default: %(default)s)")
    gw.add_argument(
        "--workers", type=positive_int, default=1, metavar="N", help="processes (default: 1)"
    )
    gw.add_argument(
        "--http",
        choices=["h11", "httptools"],
        default="h11",
        help="uvicorn's HTTP parser (default: %(default)s; httptools must be installed)",
    )
    gw.add_argument(
        "--graceful-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="at SIGTERM, how long streams in flight may finish (default: %(default)g)",
    )
    gw.add_argument("--no-access-log", action="store_true", help="no line per request on stdout")
    gsub = gw.add_subparsers(dest="gateway_command", metavar="SUBCOMMAND")
    gsub.add_parser(
        "hash-key",
        help="print the config line of a gateway key read from stdin",
        description="Read a gateway key from stdin (a prompt when it is a terminal) and "
        'print the `sha256 = "..."` line a [keys.NAME] table of the config takes. The '
        "config stores only this hash.",
    )


def _port(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {value!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"not a port: {n}")
    return n


def _seconds(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0 < n < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value}")
    return n


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.gateway_command == "hash-key":
        return _hash_key(out, err)
    if args.config and args.model:
        return usage_error(err, "give --config or --model, not both (put the models in the file)")
    if not args.config and not args.model:
        return usage_error(err, "give --config FILE or at least one --model NAME=PROVIDER/MODEL")
    if not args.model and (args.base_url or args.api or args.api_key_env):
        return usage_error(err, "--base-url, --api and --api-key-env go with --model")
    try:
        from ..gateway._server import run as serve
    except ImportError as exc:
        if getattr(exc, "name", None) in ("uvicorn", "httptools"):
            return usage_error(err, f"the gateway needs its ASGI server: {INSTALL}")
        raise
    if args.http == "httptools":
        try:
            import httptools  # noqa: F401
        except ImportError:
            return usage_error(err, "--http httptools: pip install httptools")
    # uvicorn shuts down gracefully at SIGTERM, then raises it again: it lands here, so the
    # scratch folder is removed and the exit is a normal one.
    if threading.current_thread() is not threading.main_thread():
        return _serve(serve, args, err)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _serve(serve, args, err)
    except _Terminated:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Terminated(Exception):
    pass


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _serve(serve: Callable[..., None], args: argparse.Namespace, err: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="stream-core-gateway-") as scratch:
        if args.config:
            path = Path(args.config)
            if not path.is_file():
                return usage_error(err, f"{path}: no such config file")
        else:
            try:
                text = _quick_config(args)
            except ValueError as exc:
                return usage_error(err, str(exc))
            path = Path(scratch) / "gateway.toml"
            path.write_text(text, encoding="utf-8")
        problem, open_to_all = _check(path)
        if problem is not None:
            return usage_error(err, problem)
        if open_to_all and not _loopback(args.host):
            err.write(
                f"warning: the config lists no [keys]: anyone who reaches {args.host} "
                "spends your vendor keys\n"
            )
        try:
            serve(
                path,
                args.host,
                args.port,
                args.workers,
                http=args.http,
                graceful_timeout=args.graceful_timeout,
                access_log=not args.no_access_log,
            )
        except OSError as exc:
            error(err, f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
            return 1
    return 0


def _quick_config(args: argparse.Namespace) -> str:
    """The TOML of the quick flags: one `[models]` entry per --model."""
    lines = ["[models]"]
    seen: set[str] = set()
    for spec in args.model:
        name, sep, target = spec.partition("=")
        if not sep:
            name, target = "*", spec
        if not name or "/" not in target or target.startswith("route:"):
            raise ValueError(f"--model {spec!r}: NAME=PROVIDER/MODEL, or PROVIDER/MODEL")
        if name in seen:
            raise ValueError(f"--model: model name {name!r} given twice")
        seen.add(name)
        fields = {"model": target, "base_url": args.base_url, "api": args.api}
        fields["api_key_env"] = args.api_key_env
        inline = ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items() if v)
        lines.append(f"{json.dumps(name)} = {{ {inline} }}")
    return "\n".join(lines) + "\n"


def _check(path: Path) -> tuple[str | None, bool]:
    """What is wrong with the config at `path`, found before serving (every model name
    resolves to its catalog model or route), or None; and whether it lists no keys."""
    from ..gateway import load_config

    try:
        config = load_config(path)
        for name in config.models:  # a glob resolves as its own name does
            config.target(name)
    except (ValueError, KeyError, OSError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return f"{path}: {message}", False
    return None, not config.keys


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _hash_key(out: TextIO, err: TextIO) -> int:
    from ..gateway import hash_key

    if sys.stdin is not None and sys.stdin.isatty():
        key = getpass.getpass("gateway key: ")
    else:
        key = sys.stdin.readline() if sys.stdin is not None else ""
    key = key.strip()
    if not key:
        return usage_error(err, "hash-key: no key on stdin")
    out.write(f'sha256 = "{hash_key(key)}"\n')
    return 0
