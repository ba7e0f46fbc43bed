"""`stream-core progress NAME --store URL [--total N] [--watch SECONDS]`: a run's progress
line, as the workers sharing the limiter's store counted it (`stream_core.runs.Progress`)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

import anyio

from ._common import positive_int, then_close_store, usage_error
from ._render import error

__all__ = ["add_parser", "run"]


def _interval(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not n > 0 or n == float("inf"):  # also rejects NaN
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value}")
    return n


def add_parser(sub: Any) -> None:
    """The `progress` command, on `sub` (argparse's subparsers of `stream-core`)."""
    p = sub.add_parser(
        "progress",
        help="a run's progress line from the limiter's shared store",
        description="Print the progress line of run NAME (stream_core.runs.Progress): "
        "results done and failed, spend, rate and ETA, as every worker sharing the store "
        "counted them.",
    )
    p.add_argument("name", metavar="NAME", help="the run's name (Progress(NAME, ...))")
    p.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="the workers' limit store: redis://host:port/db or a file path",
    )
    p.add_argument("--prefix", default="stream_core", help="its key prefix (default: %(default)s)")
    p.add_argument("--total", type=positive_int, metavar="N", help="results expected (for the ETA)")
    p.add_argument(
        "--watch",
        type=_interval,
        metavar="SECONDS",
        help="print a line every SECONDS until the total is done (Ctrl-C stops)",
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core import configure_limits
    from stream_core.runs import Progress

    try:
        configure_limits(store=args.store, prefix=args.prefix, timeout=5.0)
    except (TypeError, ValueError, ImportError) as exc:
        return usage_error(err, f"--store: {str(exc).removeprefix('store: ')}")
    progress = Progress(args.name, args.total)

    async def show() -> int:
        while True:
            try:
                view = await progress.read()
            except (ConnectionError, OSError) as exc:
                error(err, str(exc))
                return 1
            out.write(progress.line(view) + "\n")
            out.flush()
            finished = args.total is not None and view.done >= args.total
            if args.watch is None or finished:
                return 0
            await anyio.sleep(args.watch)

    return anyio.run(then_close_store, show)
