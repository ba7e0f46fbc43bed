"""`stream-core batch list|status|collect|cancel|results|recover STORE [NAME]`: the jobs
kept under a store directory (`stream_core.batch`), without writing Python.

`list` and `results` read the journal only; the others ask the vendors, with the keys the
environment holds (the journal never keeps one)."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

import anyio

from ._common import usage_error
from ._render import error

__all__ = ["add_parser", "run"]

_ACTIONS = ("list", "status", "collect", "cancel", "results", "recover")


def add_parser(sub: Any) -> None:
    """The `batch` command, on `sub` (argparse's subparsers of `stream-core`)."""
    p = sub.add_parser(
        "batch",
        help="see, collect or cancel vendor batch jobs kept under a store directory",
        description="Jobs submitted with stream_core.batch.submit(..., store=STORE): list "
        "them (journal only), poll their vendors (status), wait for and write their results "
        "(collect), cancel them, print their results, or finish the submissions a killed "
        "process left (recover). Keys come from the environment.",
    )
    p.add_argument("action", choices=_ACTIONS)
    p.add_argument("store", metavar="STORE", help="the jobs' directory")
    p.add_argument("name", nargs="?", metavar="NAME", help="the job's name")
    p.add_argument("--interval", type=float, default=30.0, help="collect: seconds between polls")
    p.add_argument("--timeout", type=float, default=None, help="collect: give up after SECONDS")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core.batch import BatchHTTPError

    if args.action not in ("list", "recover") and not args.name:
        return usage_error(err, f"batch {args.action} needs the job's NAME")
    try:
        return anyio.run(_run, args, out)
    except (FileNotFoundError, ValueError) as exc:
        error(err, str(exc))
    except BatchHTTPError as exc:
        error(err, f"{exc.kind}: {exc.message}")
    except TimeoutError as exc:
        error(err, str(exc))
    return 1


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    from stream_core.batch import list_jobs, open_job, recover

    if args.action == "list":
        jobs = list_jobs(args.store)
        if args.json:
            out.write(json.dumps([{"name": n, **_progress(p)} for n, p in jobs]) + "\n")
        for name, p in [] if args.json else jobs:
            out.write(f"{name}  {p.state}  {p.collected}/{p.total} collected  {_counts(p)}\n")
        return 0
    if args.action == "recover":
        for job in await recover(args.store):
            out.write(f"{job.name}: submitted ({', '.join(job.batch_ids)})\n")
        return 0
    job = open_job(args.store, args.name)
    if args.action == "status":
        p = await job.poll()
        if args.json:
            out.write(
                json.dumps({"name": job.name, **_progress(p), "batches": job.batch_ids}) + "\n"
            )
        else:
            out.write(f"{job.name}  {p.state}  {_counts(p)}  pending {p.pending}\n")
        return 0
    if args.action == "cancel":
        await job.cancel()
        out.write(f"{job.name}: cancel asked of {len(job.batch_ids)} batch(es)\n")
        return 0
    if args.action == "collect":
        results = await job.collect(interval=args.interval, timeout=args.timeout)
    else:
        results = job.stored_results()
    if args.json:
        for r in results:
            row = {"custom_id": r.custom_id, "outcome": r.outcome, "batch_id": r.batch_id}
            out.write(json.dumps({**row, "message": r.message.model_dump(mode="json")}) + "\n")
        return 0
    spend = sum(r.message.usage.cost.total for r in results if r.message.usage.cost is not None)
    outcomes = [r.outcome for r in results]
    counts = ", ".join(f"{o} {outcomes.count(o)}" for o in sorted(set(outcomes)))
    out.write(f"{job.name}: {len(results)} results ({counts}); ${spend:.6f} at the batch price\n")
    return 0


def _progress(p: Any) -> dict[str, Any]:
    return {
        "state": p.state,
        "total": p.total,
        "succeeded": p.succeeded,
        "errored": p.errored,
        "expired": p.expired,
        "cancelled": p.cancelled,
        "collected": p.collected,
    }


def _counts(p: Any) -> str:
    return (
        f"succeeded {p.succeeded} · errored {p.errored} · expired {p.expired} · "
        f"cancelled {p.cancelled}"
    )
