"""One worker of a fleet: M concurrent callers making calls to a vendor through a shared
limit store, until N calls are done (or `--seconds` pass); prints a JSON summary.

    python tests/fleet_worker.py --url URL --store STORE [--calls N] [--concurrency M]
        [--seconds S] [--budget USD] [--max-tokens T] [--prices IN OUT] [--side SIDE]

`--store`: `none` (limiter off), `memory`, a file path or a `redis://` URL. `--side
litellm` makes the same calls through LiteLLM's Router with its Redis-backed rpm/tpm
limits (the anchor in benchmarks/limits.py; `--rpm`, `--tpm` give it the limits).
Used by tests/test_limit_stores.py and benchmarks/limits.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any


async def run_stream_core(args: argparse.Namespace) -> dict[str, Any]:
    from stream_core import (
        Context,
        Model,
        ModelPrices,
        StreamOptions,
        UserMessage,
        complete,
        configure_limits,
    )

    if args.store == "none":
        configure_limits(enabled=False)
    else:
        configure_limits(
            store=None if args.store == "memory" else args.store,
            budget_usd=args.budget,
            prefix=args.prefix,
        )
    prices = ModelPrices(input=args.prices[0], output=args.prices[1]) if args.prices else None
    fields: dict[str, Any] = {"prices": prices} if prices else {}
    model = Model(
        id="m-1",
        api=args.api,
        provider="anthropic" if args.api == "anthropic-messages" else "openai",
        base_url=args.url,
        max_tokens=args.max_tokens,
        **fields,
    )
    options = StreamOptions(api_key="fleet-key", max_retries=args.retries)
    kinds: dict[str, int] = {}
    done = 0
    cost = 0.0
    deadline = time.monotonic() + args.seconds if args.seconds else None
    latencies: list[float] = []

    async def caller(i: int) -> None:
        nonlocal done, cost
        while done < args.calls and (deadline is None or time.monotonic() < deadline):
            done += 1
            context = Context(messages=[UserMessage(content=f"question {i} {done} " * 3)])
            t0 = time.monotonic()
            m = await complete(model, context, options)
            latencies.append(time.monotonic() - t0)
            kind = m.error.kind if m.error else "ok"
            kinds[kind] = kinds.get(kind, 0) + 1
            if m.usage.cost is not None and m.error is None:
                cost += m.usage.cost.total
            if kind == "budget":
                return

    await asyncio.gather(*(caller(i) for i in range(args.concurrency)))
    return {"kinds": kinds, "cost": cost, "latencies": latencies}


async def run_litellm(args: argparse.Namespace) -> dict[str, Any]:
    import litellm
    from litellm import Router

    litellm.suppress_debug_info = True
    host, _, port = args.store.removeprefix("redis://").partition(":")
    router = Router(
        model_list=[
            {
                "model_name": "m",
                "litellm_params": {
                    "model": "openai/m-1",
                    "api_base": args.url,
                    "api_key": "fleet-key",
                    "rpm": args.rpm,
                    "tpm": args.tpm,
                },
            }
        ],
        redis_host=host,
        redis_port=int(port.split("/")[0]),
        routing_strategy="usage-based-routing-v2",
        num_retries=args.retries,
    )
    kinds: dict[str, int] = {}
    done = 0
    deadline = time.monotonic() + args.seconds if args.seconds else None
    latencies: list[float] = []

    async def caller(i: int) -> None:
        nonlocal done
        while done < args.calls and (deadline is None or time.monotonic() < deadline):
            done += 1
            t0 = time.monotonic()
            try:
                response = await router.acompletion(
                    model="m",
                    messages=[{"role": "user", "content": f"question {i} {done} " * 3}],
                    max_tokens=args.max_tokens,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                async for _ in response:
                    pass
                kind = "ok"
            except Exception as exc:  # noqa: BLE001 - counted by type
                kind = type(exc).__name__
            latencies.append(time.monotonic() - t0)
            kinds[kind] = kinds.get(kind, 0) + 1

    await asyncio.gather(*(caller(i) for i in range(args.concurrency)))
    return {"kinds": kinds, "cost": 0.0, "latencies": latencies}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--api", default="openai-completions")
    parser.add_argument("--store", default="memory")
    parser.add_argument("--prefix", default="stream_core")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--budget", type=float)
    parser.add_argument("--max-tokens", type=int, default=50)
    parser.add_argument("--retries", type=int, default=2)
    parser.add_argument("--prices", type=float, nargs=2)
    parser.add_argument("--side", default="stream-core")
    parser.add_argument("--rpm", type=int)
    parser.add_argument("--tpm", type=int)
    parser.add_argument("--start-at", type=float, default=0.0)
    args = parser.parse_args()
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    started = time.time()
    run = run_litellm if args.side == "litellm" else run_stream_core
    result = asyncio.run(run(args))
    result["seconds"] = time.time() - started
    result["pid"] = os.getpid()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
