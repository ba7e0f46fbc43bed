"""One worker of a route fleet: M concurrent callers calling a `Route([claude, openai])`
through a shared limit store for `--seconds`; prints a JSON summary (the route's
`stats()`, the longest cooldown seen, the unsent attempts, the fallback warnings logged).

    python tests/route_fleet_worker.py --claude URL --openai URL --store STORE
        [--seconds S] [--concurrency M] [--cooldown C] [--max-cooldown X]

Used by tests/test_review_routes_34.py (the eval-fleet scenario of issue 34).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from typing import Any


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from stream_core import (
        Context,
        Model,
        Route,
        StreamOptions,
        UserMessage,
        complete,
        configure_limits,
    )

    if args.report_every:
        from stream_core._routes import route as route_module

        route_module.REPORT_EVERY = args.report_every  # a short window for the test
    lines = _Lines()
    logging.getLogger("stream_core").addHandler(lines)
    configure_limits(store=None if args.store == "memory" else args.store, prefix=args.prefix)
    claude = Model(
        id="claude-m", api="anthropic-messages", provider="anthropic", base_url=args.claude,
        max_tokens=20,
    )  # fmt: skip
    openai = Model(
        id="gpt-m", api="openai-completions", provider="openai", base_url=args.openai,
        max_tokens=20,
    )  # fmt: skip
    route = Route([claude, openai], cooldown=args.cooldown, max_cooldown=args.max_cooldown)
    options = StreamOptions(api_key="fleet-key", max_retries=0)
    primary = route.deployments[0]
    out: dict[str, Any] = {"served": {}, "errors": {}, "cooling_max": 0.0, "strikes_max": 0}
    unsent: list[dict[str, Any]] = []
    sent_failed: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.seconds

    async def caller(i: int) -> None:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            context = Context(messages=[UserMessage(content=f"question {i} {n}")])
            m = await complete(route, context, options)
            who = m.error.kind if m.error else m.provider
            bucket = "errors" if m.error else "served"
            out[bucket][who] = out[bucket].get(who, 0) + 1
            for a in m.attempts or []:
                if a.kind is None:
                    continue
                rec = {"provider": a.provider, "kind": a.kind, "status": a.status_code,
                       "retry_after": a.retry_after}  # fmt: skip
                (sent_failed if a.sent else unsent).append(rec)
            out["cooling_max"] = max(out["cooling_max"], route.ready_in(primary))
            out["strikes_max"] = max(out["strikes_max"], primary.strikes)

    await asyncio.gather(*(caller(i) for i in range(args.concurrency)))
    out["stats"] = route.stats()
    out["unsent"] = unsent
    out["failed"] = sent_failed
    out["warnings"] = [line for line in lines.lines if "fallback" in line]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claude", required=True)
    parser.add_argument("--openai", required=True)
    parser.add_argument("--store", default="memory")
    parser.add_argument("--prefix", default="stream_core")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--cooldown", type=float, default=5.0)
    parser.add_argument("--max-cooldown", type=float, default=300.0)
    parser.add_argument("--report-every", type=float, default=0.0)
    parser.add_argument("--start-at", type=float, default=0.0)
    args = parser.parse_args()
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    result = asyncio.run(run(args))
    result["pid"] = os.getpid()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
