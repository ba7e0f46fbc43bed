"""Tallies (issue 37): counters every worker sharing a limit store adds to at once, for a
progress line across processes. The same answers from the in-process store, a file and a
real `redis-server`; four processes' tallies sum exactly; nothing is added when any
number is wrong; a store that cannot be reached never fails a `tally`."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import session_url

from stream_core import configure_limits, tallies, tally
from stream_core._limits import window

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture(params=["memory", "file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """The store, configured: None (in-process), a file or Redis under a fresh prefix."""
    found: str | None = None
    if request.param == "file":
        found = str(tmp_path / "limits.json")
    elif request.param == "redis":
        found = request.getfixturevalue("redis_url")
    configure_limits(store=found, prefix=f"t{uuid.uuid4().hex[:12]}")
    return found


async def test_a_tally_adds_each_field_at_once(store: str | None) -> None:
    assert await tallies("run-1") == {}
    await tally("run-1", done=1, usd=0.25)
    await tally("run-1", done=2, failed=1)
    await tally("run-1")  # nothing to add: nothing changes
    await tally("run-2", done=7)
    assert await tallies("run-1") == {"done": 3.0, "usd": 0.25, "failed": 1.0}
    assert await tallies("run-2") == {"done": 7.0}
    await tally("run-1", done=-3)  # a delta may be negative (a row taken back)
    assert (await tallies("run-1"))["done"] == 0.0


async def test_nothing_is_added_when_any_number_is_wrong(store: str | None) -> None:
    await tally("t", a=1, big=1e308)
    for bad in (math.nan, math.inf, -math.inf, "1", True, None, 10**400):
        with pytest.raises((TypeError, ValueError)):
            await tally("t", a=1, b=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        await tally("t", a=1, big=1e308)  # the sum would be an infinity
    assert await tallies("t") == {"a": 1.0, "big": 1e308}


async def test_a_tally_name_is_short_and_printable(store: str | None) -> None:
    await tally("n" * 200, a=1)
    assert await tallies("n" * 200) == {"a": 1.0}
    for bad in ("", "n" * 201, "line\nbreak", "\x1b[31mred"):
        with pytest.raises(ValueError, match="printable"):
            await tally(bad, a=1)
        with pytest.raises(ValueError, match="printable"):
            await tallies(bad)
    with pytest.raises(TypeError):
        await tally(7, a=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 64"):
        await tally("wide", **{f"f{i}": 1 for i in range(65)})


async def test_a_redis_tally_is_one_hash_kept_thirty_days(redis_url: str) -> None:
    import redis

    prefix = f"t{uuid.uuid4().hex[:12]}"
    configure_limits(store=redis_url, prefix=prefix)
    await tally("eval:7", done=1)
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"{prefix}:t:eval:7"
        assert client.type(key) == b"hash"
        assert window.TALLY_TTL - 60 < client.ttl(key) <= window.TALLY_TTL
        client.expire(key, 100)
        await tally("eval:7", done=1)  # a write refreshes it
        assert client.ttl(key) > 100
        # A field that is not the store's own number starts again from 0.
        client.hset(key, "junk", "0x1f")
        await tally("eval:7", junk=2)
        assert await tallies("eval:7") == {"done": 2.0, "junk": 2.0}
        # A key of another type under the name is replaced.
        client.delete(key)
        client.set(key, "not a hash")
        assert await tallies("eval:7") == {}
        await tally("eval:7", done=1)
        assert await tallies("eval:7") == {"done": 1.0}
    finally:
        client.close()


async def test_a_file_tally_outlives_its_process_and_expires(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    configure_limits(store=str(path))
    await tally("run", done=4)
    configure_limits(store=str(path))  # as another process would open it
    assert await tallies("run") == {"done": 4.0}
    data = json.loads(path.read_text())
    assert data["tallies"]["run"][1] == pytest.approx(time.time() + window.TALLY_TTL, abs=60)
    data["tallies"]["run"][1] = time.time() - 1  # its 30 days passed
    path.write_text(json.dumps(data))
    assert await tallies("run") == {}


async def test_a_store_that_cannot_be_reached_never_fails_a_tally(
    caplog: pytest.LogCaptureFixture,
) -> None:
    configure_limits(store="redis://user:hunter2@127.0.0.1:1/0", timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="stream_core"):
        await tally("run", done=1)
        await tally("run", done=1)
    said = [r.getMessage() for r in caplog.records]
    assert len([s for s in said if "limiting in this process" in s]) == 1, said
    assert "hunter2" not in "\n".join(said)
    with pytest.raises(ConnectionError) as caught:
        await tallies("run")
    assert "hunter2" not in str(caught.value) and "tally 'run' is kept there" in str(caught.value)


# --- four worker processes ---------------------------------------------------------------

WORKER = """
import asyncio, sys, time
from stream_core import configure_limits, tally
store, prefix, start = sys.argv[1], sys.argv[2], float(sys.argv[3])

async def main():
    configure_limits(store=store, prefix=prefix, timeout=5.0)
    await asyncio.sleep(max(start - time.time(), 0))
    await asyncio.gather(*(tally("fleet", done=1, usd=0.125, tokens=3) for _ in range(100)))

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["file", "redis"])
async def test_four_processes_tallies_sum_exactly(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = (
        str(tmp_path / "limits.json") if kind == "file" else request.getfixturevalue("redis_url")
    )
    prefix = f"t{uuid.uuid4().hex[:12]}"
    start = repr(time.time() + 1.0)  # all start together, after their imports
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, where, prefix, start], stderr=subprocess.PIPE, text=True
        )  # fmt: skip
        for _ in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        assert "limiting in this process" not in err  # every tally reached the store
    configure_limits(store=where, prefix=prefix)
    found: dict[str, Any] = await tallies("fleet")
    assert found == {"done": 400.0, "usd": 50.0, "tokens": 1200.0}
