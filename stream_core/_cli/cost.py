"""`stream-core cost RESULTS.jsonl [--json]`: what the results of a `ResultLog` cost, by
provider and model (`stream_core.runs.cost_summary`)."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ._render import error

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The `cost` command, on `sub` (argparse's subparsers of `stream-core`)."""
    p = sub.add_parser(
        "cost",
        help="what a results log cost, by provider and model",
        description="Sum a ResultLog file (stream_core.runs) by provider and model: "
        "results, failures, the share priced at a batch price, tokens and USD. A line a "
        "killed writer cut is skipped.",
    )
    p.add_argument("file", metavar="RESULTS.jsonl", help="the ResultLog file")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core.runs import ResultLog, cost_summary

    try:
        summary = cost_summary(ResultLog.read(args.file))
    except OSError as exc:
        error(err, f"{args.file}: {exc.strerror or exc}")
        return 1
    except ValueError as exc:
        error(err, f"{args.file}: {exc}")
        return 1
    if args.json:
        out.write(json.dumps(summary.as_dict(), ensure_ascii=False) + "\n")
    else:
        out.write(summary.table())
    return 0
