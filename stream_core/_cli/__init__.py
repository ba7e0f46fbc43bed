"""The `stream-core` command: an offline demo, recording replay, a live chat, the catalog,
and recording and serving vendor bodies.

    stream-core demo [--speed CHARS_PER_SECOND]
    stream-core replay FILE.body [--api API] [--chunk-size N] [--events] [--json]
    stream-core chat PROVIDER/MODEL "prompt" [--base-url URL] [--system S] [--max-tokens N]
                     [--reasoning E]
    stream-core models [PROVIDER]
    stream-core serve [DIR] [--scenario [MODEL=]PATH]... [--log-requests FILE.jsonl]
                     [--host H] [--port P] [--chunk-size N] [--delay SECONDS]
                     [--quota-requests N] [--quota-tokens N] [--quota-window SECONDS]
    stream-core record PROVIDER/MODEL "prompt" -o NAME [--base-url URL] [--api API]
                       [--system S] [--max-tokens N] [--reasoning E]
    stream-core synthesize SCRIPT --api API --out DIR [--model MODEL]
    stream-core gateway (--config FILE | --model [NAME=]PROVIDER/MODEL...) [--port P]
                        [--host H] [--workers N] [--base-url URL]; gateway hash-key
    stream-core progress NAME --store URL [--total N] [--watch SECONDS]
    stream-core cost RESULTS.jsonl [--json]
    stream-core batch list|status|collect|cancel|results|recover STORE [NAME]
    stream-core limits (show [--json] | clear [--model P/M] [--budgets | --budget NAME]
                       [--yes]) --store URL [--prefix P]
    stream-core --version

This module is the argument parser and `main` only; each command is its own module, and
everything drawn (colour, the stream, tables) comes from `_render`. `demo`, `replay` and
`chat` draw a stream with the one `Renderer`; `demo` and `replay` serve a recorded body
through an `httpx.MockTransport`, so the provider code that runs is the real one and nothing
leaves the machine. The library never imports this package.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TextIO

from .. import __version__
from ._common import positive_int as _positive_int
from ._common import seconds_or_none as _speed
from ._common import usage_error
from .batch import add_parser as _batch_parser
from .batch import run as _batch
from .chat import run as _chat
from .cost import add_parser as _cost_parser
from .cost import run as _cost
from .demo import run as _demo
from .gateway import add_parser as _gateway_parser
from .gateway import run as _gateway
from .limits import add_parser as _limits_parser
from .limits import run as _limits
from .models import run as _models
from .progress import add_parser as _progress_parser
from .progress import run as _progress
from .record import run as _record
from .replay import run as _replay
from .serve import add_quota_arguments as _quota_arguments
from .serve import run as _serve
from .synthesize import run as _synthesize

__all__ = ["main"]

_COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO, TextIO], int]] = {
    "demo": _demo,
    "replay": _replay,
    "chat": _chat,
    "models": _models,
    "serve": _serve,
    "record": _record,
    "synthesize": _synthesize,
    "gateway": _gateway,
    "progress": _progress,
    "cost": _cost,
    "limits": _limits,
    "batch": _batch,
}


def _silence(out: TextIO) -> None:
    """Point `out` at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
    except (OSError, ValueError):
        pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-core",
        description="Stream LLM vendor responses as one event sequence.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="replay the bundled recordings offline (no API key needed)",
        description="Replay the bundled, synthetic vendor recordings through the real "
        "provider code, drawn as they stream. Offline; no API key needed.",
    )
    demo.add_argument(
        "--speed",
        type=_speed,
        default=300.0,
        metavar="CHARS_PER_SEC",
        help="pace the replay at about this many characters per second "
        "(default: %(default)g; 0: no pauses)",
    )

    replay = sub.add_parser(
        "replay",
        help="run a recorded response body through its provider",
        description="Run a recorded response body through its provider, offline.",
    )
    replay.add_argument("file", metavar="FILE.body", help="the recorded HTTP response body")
    replay.add_argument(
        "--api", help='wire API of the recording (default: "api" in the sidecar FILE.json)'
    )
    replay.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="serve the body in chunks of N bytes (default: all at once)",
    )
    replay.add_argument(
        "--events", action="store_true", help="print each event as one JSON object per line"
    )
    replay.add_argument("--json", action="store_true", help="print the final message as JSON")

    chat = sub.add_parser(
        "chat",
        help="stream a live answer from any model",
        description="Stream a live answer: a catalog model, any model of a known provider "
        "(ollama/llama3.2, vllm/..., lmstudio/..., llama.cpp/...), or any OpenAI-compatible "
        "server with --base-url. Keys come from the provider's environment variable.",
    )
    _call_arguments(chat)
    serve = sub.add_parser(
        "serve",
        help="serve recordings as a fake vendor on loopback",
        description="Serve recordings (DIR/<api>/<model>.body with its .json) as a fake "
        "vendor: every API's path is answered, and the model the request names picks the "
        "recording by file name (unknown: the vendor's 404). A scenario answers a model "
        "with its recordings in turn, one per request (a tool loop). Logs each request to "
        "stderr.",
    )
    serve.add_argument("dir", nargs="?", metavar="DIR", help="folder of recordings")
    serve.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="[MODEL=]PATH",
        help="answer MODEL (without MODEL=: any model no recording names) with the "
        "recordings of PATH in turn: a folder of .body files (file-name order) or a file "
        "listing them, one path a line (repeatable)",
    )
    serve.add_argument(
        "--log-requests",
        metavar="FILE.jsonl",
        help="append each request (method, path, model, status, answer, JSON body) as "
        "one JSON line",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8765, help="port (default: %(default)s)")
    serve.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="answer requests naming this Host or Origin too (repeatable; '*': any); "
        "by default only loopback names and the --host address are answered",
    )  # fmt: skip
    serve.add_argument(
        "--chunk-size", type=_positive_int, metavar="N",
        help="send N bytes per chunk (default: one chunk per vendor event)",
    )  # fmt: skip
    serve.add_argument(
        "--delay", type=_speed, default=0.0, metavar="SECONDS", help="pause before each chunk"
    )
    _quota_arguments(serve)

    rec = sub.add_parser(
        "record",
        help="make a live call and write it as a recording (NAME.body, NAME.json)",
        description="Make a live call and write the vendor's raw body as NAME.body and its "
        "metadata with `expect` as NAME.json, in the contract fixtures' format. Keys, auth "
        "values, account ids and cookies are scrubbed.",
    )
    _call_arguments(rec)
    rec.add_argument("-o", "--output", required=True, metavar="NAME", help="path without suffix")
    rec.add_argument(
        "--api",
        metavar="API",
        help="wire API to record (default: the catalog's for the model), e.g. "
        "openai-responses for an OpenAI model the catalog maps to Chat Completions",
    )

    syn = sub.add_parser(
        "synthesize",
        help="write a script of turns as vendor recordings (DIR/1.body, 1.json, ...)",
        description="Write each turn of SCRIPT (JSON list or JSONL: a string is a text "
        "answer, an object an AssistantMessage) in the exact wire format of API, as "
        "recordings `serve --scenario` and `replay_sequence` play.",
    )
    syn.add_argument("script", metavar="SCRIPT", help="the turns, as JSON or JSONL")
    syn.add_argument("--api", required=True, metavar="API", help="e.g. anthropic-messages")
    syn.add_argument("--out", required=True, metavar="DIR", help="folder to write to")
    syn.add_argument(
        "--model", default="synthetic-model", metavar="MODEL", help="the model the bytes name"
    )

    models = sub.add_parser(
        "models",
        help="list the catalog's models: window, prices, reasoning, images",
        description="List the catalog's models (from models.dev; prices from genai-prices "
        "where it knows the model, else the catalog's list price).",
    )
    models.add_argument("provider", nargs="?", metavar="PROVIDER", help="only this provider")
    _gateway_parser(sub)
    _progress_parser(sub)
    _cost_parser(sub)
    _batch_parser(sub)
    _limits_parser(sub)
    return parser


def _call_arguments(parser: argparse.ArgumentParser) -> None:
    """What `chat` and `record` both take: the model, the prompt and the request's settings."""
    parser.add_argument("model", metavar="PROVIDER/MODEL", help="e.g. anthropic/claude-sonnet-4-5")
    parser.add_argument("prompt", help="what to ask")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="send the request here (a gateway, a proxy, a local server) instead of the "
        "provider's default",
    )
    parser.add_argument("--system", help="system prompt")
    parser.add_argument("--max-tokens", type=_positive_int, metavar="N", help="output limit")
    parser.add_argument(
        "--reasoning",
        choices=["minimal", "low", "medium", "high"],
        help="ask for thinking at this effort (reasoning models)",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on bad arguments
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    out, err = sys.stdout, sys.stderr
    try:
        command = _COMMANDS.get(args.command)
        if command is not None:
            return command(args, out, err)
    except KeyboardInterrupt:
        err.write("\ninterrupted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as other command-line tools do.
        _silence(out)
        return 1
    parser.print_usage(err)
    return usage_error(
        err,
        "choose a command: demo, replay, chat, models, serve, record, synthesize, gateway, "
        "progress, cost, limits or batch",
    )
