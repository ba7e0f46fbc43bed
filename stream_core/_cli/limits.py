"""`stream-core limits show|clear`: what the limiter holds in a shared store (pauses,
cooldowns, learned limits, budget spend and reservations, tallies), and forgetting it,
without reading Redis keys by hand.

    stream-core limits show --store URL [--prefix P] [--json]
    stream-core limits clear --store URL [--prefix P] [--model PROVIDER/MODEL]
                             [--budgets | --budget NAME] [--yes]

No credential is shown: a limit key holds a salted hash of its API key, and the store's
URL is shown without its password.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import anyio

from ._common import then_close_store, usage_error
from ._render import error, json_line, table

__all__ = ["add_parser", "run"]

_NO_STORE = (
    "name the store with --store: the workers' redis:// URL or file path (a process's "
    "own in-process store cannot be read from outside it)"
)


def add_parser(sub: Any) -> None:
    """The `limits` command and its `show` and `clear` subcommands, on `sub`."""
    limits = sub.add_parser(
        "limits",
        help="show or clear what the limiter holds in a shared store",
        description="Show or clear what the limiter holds in a shared limit store: each "
        "key's learned limits, 429 pauses, route cooldowns; budget spend and reservations; "
        "tallies. No credential is shown.",
    )
    lsub = limits.add_subparsers(dest="limits_command", metavar="SUBCOMMAND")
    show = lsub.add_parser("show", help="print what the store holds")
    clear = lsub.add_parser(
        "clear",
        help="forget learned limits, pauses and cooldowns (and budgets, if asked)",
        description="Forget every key's learned limits, pauses and cooldowns (or only "
        "those of --model), for every process sharing the store. Budgets are kept unless "
        "--budgets (every budget's spend and reservations) or --budget NAME.",
    )
    for p in (show, clear):
        p.add_argument("--store", metavar="URL", help="redis://host:port/db or a file path")
        p.add_argument(
            "--prefix", default="stream_core", help="its key prefix (default: %(default)s)"
        )
    show.add_argument("--json", action="store_true", help="print it as one JSON object")
    clear.add_argument(
        "--model", metavar="PROVIDER/MODEL", help="only this model's keys (every API key)"
    )
    which = clear.add_mutually_exclusive_group()
    which.add_argument(
        "--budgets", action="store_true", help="forget every budget's spend and reservations"
    )
    which.add_argument(
        "--budget", metavar="NAME", help='forget one budget ("budget_usd": the global one)'
    )
    clear.add_argument("--yes", action="store_true", help="do not ask before clearing")


class _Model:
    """What `clear_limits` reads of a model: its provider and id."""

    def __init__(self, provider: str, id: str) -> None:
        self.provider, self.id = provider, id


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core import configure_limits

    command = getattr(args, "limits_command", None)
    if command not in ("show", "clear"):
        return usage_error(err, "choose a subcommand: limits show or limits clear")
    if not args.store:
        return usage_error(err, _NO_STORE)
    model = getattr(args, "model", None)
    if command == "clear" and model is not None:
        provider, _, model_id = model.partition("/")
        if not provider or not model_id:  # said before a store is opened (or made)
            return usage_error(err, f"--model: {model!r} is not PROVIDER/MODEL")
    try:
        configure_limits(store=args.store, prefix=args.prefix, timeout=5.0)
    except (TypeError, ValueError, ImportError) as exc:
        return usage_error(err, f"--store: {str(exc).removeprefix('store: ')}")
    if command == "show":
        return anyio.run(then_close_store, lambda: _show(args, out, err))
    return _clear(args, out, err)


async def _show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core import inspect_limits

    try:
        view = await inspect_limits()
    except (ConnectionError, OSError) as exc:
        error(err, str(exc))
        return 1
    if args.json:
        json_line(out, view.to_dict())
        return 0
    now = view.now
    out.write(f"limit store: {_safe(view.store)} (its clock: {_time(now)})\n\n")
    rows = [("PROVIDER", "MODEL", "BASE URL", "KEY HASH", "PAUSED", "COOLING", "FAILS", "CAP")]
    limit_rows = [("PROVIDER", "MODEL", "KEY HASH", "LIMIT", "REMAINING", "OF", "RESETS")]
    for k in view.keys:
        who = (_safe(k.provider), _safe(k.model))
        rows.append(
            (
                *who,
                _safe(k.base_url),
                k.key_hash,
                _until(k.paused_until, now),
                _until(k.cooling_until, now),
                str(k.failures),
                "-" if k.concurrency_cap is None else f"{k.concurrency_cap:g}",
            )
        )
        for name, lim in sorted(k.limits.items()):
            limit_rows.append(
                (*who, k.key_hash, _safe(name), f"{lim.remaining:g}", f"{lim.limit:g}",
                 _until(lim.resets_at, now))
            )  # fmt: skip
    if len(rows) > 1:
        table(out, f"keys ({len(rows) - 1})", rows)
    else:
        out.write("keys: none\n\n")
    if len(limit_rows) > 1:
        table(out, "learned limits", limit_rows)
    budget_rows = [("BUDGET", "SPENT USD", "CAP USD", "HELD USD", "RESERVATIONS")]
    held_rows = [("BUDGET", "ID", "USD", "EXPIRES")]
    for b in view.budgets:
        held = sum(r.amount for r in b.reservations)
        budget_rows.append(
            (_safe(b.name), f"{b.spent:.6f}", "-" if b.cap is None else f"{b.cap:g}",
             f"{held:.6f}", str(len(b.reservations)))
        )  # fmt: skip
        for r in b.reservations:
            held_rows.append(
                (_safe(b.name), _safe(r.id), f"{r.amount:.6f}", _until(r.expires_at, now))
            )
    if len(budget_rows) > 1:
        table(out, "budgets (caps as this process configured them: -)", budget_rows)
    else:
        out.write("budgets: none\n\n")
    if len(held_rows) > 1:
        table(out, "reservations held", held_rows)
    names = ", ".join(_safe(t) for t in view.tallies) or "none"
    out.write(f"tallies: {names}\n")
    return 0


def _clear(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stream_core import clear_limits
    from stream_core._limits.limiter import config

    model = None
    if args.model is not None:
        provider, _, model_id = args.model.partition("/")
        if not provider or not model_id:
            return usage_error(err, f"--model: {args.model!r} is not PROVIDER/MODEL")
        model = _Model(provider, model_id)
    budgets: bool | str = True if args.budgets else (args.budget or False)
    what = "learned limits, pauses and cooldowns of " + (
        f"{args.model}'s keys" if model else "every key"
    )
    if budgets is True:
        what += ", and every budget's spend and reservations"
    elif budgets:
        what += f", and budget {budgets!r}'s spend and reservations"
    where = _safe(config.store.name)
    if not args.yes:
        if not sys.stdin.isatty():
            return usage_error(err, f"this forgets the {what} in {where}; add --yes to go on")
        out.write(f"Forget the {what} in {where}? [y/N] ")
        out.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            out.write("nothing cleared\n")
            return 1
    try:
        anyio.run(then_close_store, lambda: clear_limits(model, budgets=budgets))
    except (ConnectionError, OSError, TimeoutError) as exc:
        error(err, f"limit store {where} cannot be cleared ({type(exc).__name__})")
        return 1
    out.write(f"cleared the {what} in {where}\n")
    return 0


def _safe(text: str) -> str:
    """Text from a store, printable on a terminal (no escape sequences)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _until(at: float | None, now: float) -> str:
    """When, and how long from the store's `now`: '-' for none."""
    if at is None:
        return "-"
    left = max(at - now, 0.0)
    if left < 120:
        span = f"{left:.1f}s"
    elif left < 7200:
        span = f"{left / 60:.0f}m"
    else:
        span = f"{left / 3600:.1f}h"
    return f"in {span} ({_time(at)})"
