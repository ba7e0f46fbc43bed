"""`stream-core serve [DIR] [--scenario [MODEL=]PATH]...`: recordings served as a fake
vendor on loopback, picked by model name or answered in turn per model."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TextIO

from ._common import usage_error
from ._render import error

__all__ = ["add_quota_arguments", "run"]


def add_quota_arguments(serve: argparse.ArgumentParser) -> None:
    """`--quota-requests`, `--quota-tokens`, `--quota-window`: a windowed quota for every
    model, answered with the vendor's rate-limit headers (`testing._serve_quota`); and
    `--batch-delay`, `--batch-expiry`: how the batch endpoints' batches run."""
    from ._common import positive_int, seconds_or_none

    serve.add_argument(
        "--quota-requests", type=positive_int, metavar="N",
        help="answer at most N requests per model in each window (then the vendor's 429)",
    )  # fmt: skip
    serve.add_argument(
        "--quota-tokens", type=positive_int, metavar="N",
        help="at most N tokens per model in each window (its text's characters / 4, plus "
        "the output it asks for)",
    )  # fmt: skip
    serve.add_argument(
        "--quota-window", type=seconds_or_none, default=60.0, metavar="SECONDS",
        help="the quota's window (default: %(default)g)",
    )  # fmt: skip
    serve.add_argument(
        "--batch-delay", type=seconds_or_none, default=0.0, metavar="SECONDS",
        help="a batch ends this long after it is created (default: %(default)g)",
    )  # fmt: skip
    serve.add_argument(
        "--batch-expiry", type=seconds_or_none, default=None, metavar="SECONDS",
        help="a batch's window: shorter than --batch-delay, its requests expire",
    )  # fmt: skip


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..testing._serve import PortInUse, ScenarioSource, load_scenario, serve

    root = Path(args.dir) if args.dir is not None else None
    if root is not None and not root.is_dir():
        return usage_error(err, f"{root} is not a folder of recordings")
    scenarios: dict[str, ScenarioSource] = {}
    for spec in args.scenario:
        model, path = _scenario(spec)
        if model in scenarios:
            return usage_error(err, f"two scenarios for model {model!r}")
        try:
            load_scenario(path)
        except ValueError as exc:
            return usage_error(err, str(exc))
        scenarios[model] = path
    if root is None and not scenarios:
        return usage_error(err, "give a folder of recordings (DIR) or --scenario")
    quota = None
    if args.quota_requests is not None or args.quota_tokens is not None:
        from ..testing._serve_quota import Quota

        if not args.quota_window > 0:
            return usage_error(err, "--quota-window: must be more than 0 seconds")
        quota = Quota(args.quota_requests, args.quota_tokens, args.quota_window)
    with contextlib.ExitStack() as stack:
        log = None
        if args.log_requests is not None:
            try:
                log = stack.enter_context(Path(args.log_requests).open("a", encoding="utf-8"))
            except OSError as exc:
                return usage_error(err, f"cannot write {args.log_requests}: {exc.strerror}")
        try:
            return serve(
                root, args.host, args.port, chunk_size=args.chunk_size, delay=args.delay,
                out=err, scenarios=scenarios, request_log=log, allow_hosts=args.allow_host,
                quota=quota, batch_delay=args.batch_delay, batch_expiry=args.batch_expiry,
            )  # fmt: skip
        except PortInUse as exc:
            error(err, str(exc.strerror))
        except OSError as exc:
            error(err, f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
        return 1


def _scenario(spec: str) -> tuple[str, Path]:
    """`MODEL=PATH` -> (MODEL, PATH); a bare PATH (or one that exists as written) answers
    any model: `*`."""
    from ..testing._serve import ANY_MODEL

    if Path(spec).exists() or "=" not in spec:
        return ANY_MODEL, Path(spec)
    model, _, path = spec.partition("=")
    return model or ANY_MODEL, Path(path)
