"""A process that submits and collects a batch job, to be killed (tests/batch/test_crash.py).

    python tests/batch/crash_child.py '<json>'

The JSON names the API (tests/batch/batch_apis.py), the fake vendor's URL, the job store
and name, the request count, the limit store (a file shared with the parent, holding the
budget), how to start (`submit`: the same `submit` by name; `recover`: `recover(store)`)
and where to stop for the parent's SIGKILL (`pause`, after writing `marker`):

- `upload` / `uploaded`: before its first PUT (an S3 object) is sent / once it is
  answered (where the fake vendor cannot hold the upload: it goes to an S3 server);
- `submitted`: `submit` returned (the journal says `submitted`), nothing collected;
- `results:K`: K result rows written to results.jsonl;
- `collected`: a part's results all written and recorded, its budget hold not settled;
- `settled`: its hold settled, its files not yet deleted.

Without a pause it runs to the end and prints one JSON line: the results' ids and cost,
and the job's batch ids.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from batch_apis import by_name  # noqa: E402

from stream_core import Context, UserMessage, configure_limits  # noqa: E402
from stream_core.batch import BatchJob, BatchRequest, recover, submit  # noqa: E402


def _stop(marker: str) -> None:
    """Say where we are, then wait for the kill (never return)."""
    Path(marker).write_text(str(os.getpid()))
    while True:
        time.sleep(3600)


def _pauses(pause: str, marker: str) -> None:
    from stream_core._limits import limiter
    from stream_core.batch import _job, _journal

    if pause.startswith("results:"):
        k = int(pause.split(":", 1)[1])
        write = _journal.Journal.write_result
        written = [0]

        def write_result(self: Any, row: dict[str, Any], *, sync: bool) -> None:
            write(self, row, sync=sync)
            written[0] += 1
            if written[0] >= k:
                _stop(marker)

        _journal.Journal.write_result = write_result  # type: ignore[method-assign]
    elif pause in ("upload", "uploaded"):
        from stream_core.batch._session import HttpSession

        send = HttpSession.send

        async def held_send(self: Any, method: str, url: str, **kw: Any) -> Any:
            if method == "PUT" and pause == "upload":
                _stop(marker)
            response = await send(self, method, url, **kw)
            if method == "PUT" and pause == "uploaded":
                _stop(marker)
            return response

        HttpSession.send = held_send  # type: ignore[method-assign]
    elif pause == "collected":
        settle_budget = limiter.settle_budget

        async def held(*args: Any, **kw: Any) -> Any:
            _stop(marker)
            return await settle_budget(*args, **kw)

        limiter.settle_budget = held
    elif pause == "settled":
        settle = _job.BatchJob._settle

        async def settled(self: Any, part: Any) -> None:
            await settle(self, part)
            _stop(marker)

        _job.BatchJob._settle = settled  # type: ignore[method-assign]


def requests(api_name: str, url: str, n: int) -> list[BatchRequest]:
    api = by_name(api_name)
    model = api.model()
    opts = api.options(url, max_tokens=200)
    return [
        BatchRequest(f"q{i}", model, Context(messages=[UserMessage(content=f"question {i}")]), opts)
        for i in range(n)
    ]


async def main(cfg: dict[str, Any]) -> None:
    api = by_name(cfg["api"])
    configure_limits(store=cfg["limits"], budget_usd=cfg["budget"])
    settings = api.settings(cfg["url"])
    pause = cfg.get("pause") or ""
    _pauses(pause, cfg.get("marker", ""))
    reqs = requests(cfg["api"], cfg["url"], cfg["n"])
    jobs: list[BatchJob]
    if cfg.get("start") == "recover":
        jobs = await recover(cfg["store"], settings=settings, options=api.options(cfg["url"]))
    else:
        jobs = [await submit(reqs, store=cfg["store"], name=cfg["name"], settings=settings)]
    if pause == "submitted":
        _stop(cfg["marker"])
    out: dict[str, Any] = {"ids": [], "cost": 0.0, "batch_ids": []}
    for job in jobs:
        results = await job.collect(interval=0.05, timeout=60)
        out["ids"] += [r.custom_id for r in results]
        out["cost"] += sum(r.message.usage.cost.total for r in results if r.message.usage.cost)
        out["batch_ids"] += job.batch_ids
        out["outcomes"] = sorted({r.outcome for r in results})
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
