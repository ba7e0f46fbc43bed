"""The file limit store on a host shared with other users: a path planted by another user
(a symlink, a file it owns, a file it can write) is refused at `configure_limits`, naming
the path and the problem; a file that is not a store (`limits.yaml` passed by mistake) is
refused, never overwritten; the store's files are private (0600), so no other user can read
its keys, write its budgets or hold its lock; and a write cut by a full disk or a kill
leaves the store as it was, budgets kept.

"Another user" is a real unprivileged process (uid 65534) in a sticky, world-writable
directory like /tmp; these tests need root to start one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from limited_vendor import LimitedVendor

from stream_core import configure_limits

NOBODY = 65534
HERE = Path(__file__).parent

as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as another user"
)


def _drop() -> None:  # pragma: no cover - runs in the child
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _nobodys_python() -> str:
    """A Python another user can run (a virtualenv under /root is not one)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            subprocess.run([candidate, "-I", "-c", "pass"], preexec_fn=_drop, check=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    pytest.skip("no Python another user can run")


def _as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (the standard library only) as another local user (nobody)."""
    return subprocess.run(
        [_nobodys_python(), "-I", "-c", code],
        preexec_fn=_drop,
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory like /tmp: world-writable with the sticky bit."""
    path = Path(tempfile.mkdtemp(prefix="sc-shared-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


WORKER = r"""
import asyncio, json, os, resource, signal, sys
from stream_core import (
    Context, Model, ModelPrices, StreamOptions, UserMessage, budget_spent, complete,
    configure_limits,
)
a = json.loads(sys.argv[1])

async def main():
    try:
        configure_limits(store=a["store"], budget_usd=a.get("budget"))
    except (ValueError, OSError) as exc:
        print(json.dumps({"refused": str(exc)}))
        return
    if a.get("kill"):  # killed by the write past `fsize` (Python ignores SIGXFSZ)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    if a.get("fsize"):  # the disk takes no more than this many bytes of a file
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (a["fsize"], hard))
    model = Model(
        id="m-1", api="openai-completions", provider="openai", base_url=a["url"],
        max_tokens=30, prices=ModelPrices(input=1000, output=2000),
    )
    kinds = {}
    for i in range(a["calls"]):
        m = await complete(
            model, Context(messages=[UserMessage(content=f"question {i}")]),
            StreamOptions(api_key="fleet-key", max_retries=0),
        )
        k = m.error.kind if m.error else "ok"
        kinds[k] = kinds.get(k, 0) + 1
    print(json.dumps({"kinds": kinds, "spent": await budget_spent()}))

asyncio.run(main())
"""


def _worker(**args: Any) -> tuple[int, dict[str, Any]]:
    """A worker process of the host: (its exit code, what it printed)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parent,
        env=env,
    )
    out = p.stdout.strip().splitlines()
    return p.returncode, json.loads(out[-1]) if out else {"stderr": p.stderr[-2000:]}


# --- point 2: a path another user planted, or a file that is not a store -----------------


@as_root
def test_a_symlink_planted_by_another_user_is_refused(shared: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("the victim's data\n")
    path = shared / "stream-core-limits.json"
    planted = _as_nobody(f"import os; os.symlink({str(precious)!r}, {str(path)!r})")
    assert planted.returncode == 0, planted.stderr
    with pytest.raises(ValueError, match="symbolic link") as caught:
        configure_limits(store=str(path), budget_usd=1.0)
    assert str(path) in str(caught.value)
    assert precious.read_text() == "the victim's data\n"
    # file:// too, and a symlink of the user's own: the store never follows one.
    own = tmp_path / "mine.json"
    own.symlink_to(precious)
    with pytest.raises(ValueError, match="symbolic link"):
        configure_limits(store=f"file://{own}")
    assert precious.read_text() == "the victim's data\n"


@pytest.mark.parametrize(
    "text",
    [
        "model: claude\nbudget: 5\n",  # limits.yaml passed as store= by mistake
        '{"name": "not a store"}',
        "[1, 2, 3]",
        '{"keys": {}}',
        '{"keys": {"k": {"n": {"requests": [1, ',  # a store cut off: not refused silently
    ],
)
def test_a_file_that_is_not_the_stores_own_is_refused_never_overwritten(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(ValueError, match="not a stream-core limit store") as caught:
        configure_limits(store=str(path), budget_usd=1.0)
    assert str(path) in str(caught.value)
    assert path.read_text() == text


def test_the_store_files_are_made_private(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    configure_limits(store=str(path))
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made and all(name.startswith("limits.json") for name in made)
    for p in tmp_path.iterdir():
        st = p.lstat()
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, (p, st)
        assert st.st_uid == os.geteuid()


def test_an_empty_file_of_ones_own_is_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    path.touch(mode=0o600)
    configure_limits(store=str(path))
    # One of one's own readable by others (made by an older version) is made private.
    old = tmp_path / "old.json"
    old.write_text('{"keys":{},"budgets":{"budget_usd":0.5}}')
    old.chmod(0o644)
    configure_limits(store=str(old))
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert json.loads(old.read_text())["budgets"] == {"budget_usd": 0.5}


def test_a_store_file_others_can_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "limits.json"
    path.write_text('{"keys":{},"budgets":{}}')
    path.chmod(0o666)
    with pytest.raises(ValueError, match="writable by group or others") as caught:
        configure_limits(store=str(path))
    assert str(path) in str(caught.value)
    # A directory others can write without the sticky bit: they could swap the file.
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    with pytest.raises(ValueError, match="writable by group or others"):
        configure_limits(store=str(loose / "limits.json"))
    assert list(loose.iterdir()) == []


def test_a_fifo_or_a_directory_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "limits.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ValueError, match="not a regular file"):
        configure_limits(store=str(fifo))
    with pytest.raises(ValueError, match="not a regular file"):
        configure_limits(store=str(tmp_path))


# --- point 3: a store poisoned or locked by another user ---------------------------------


@as_root
def test_a_store_another_user_made_first_is_refused(shared: Path) -> None:
    path = shared / "stream-core-limits.json"
    poison = json.dumps({"keys": {}, "budgets": {"budget_usd": -1e12}})
    planted = _as_nobody(
        f"import os\nfd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT, 0o666)\n"
        f"os.fchmod(fd, 0o666)\nos.write(fd, {poison.encode()!r})"
    )
    assert planted.returncode == 0, planted.stderr
    with pytest.raises(ValueError, match="owned by another user") as caught:
        configure_limits(store=str(path), budget_usd=0.2)
    assert str(path) in str(caught.value)


@pytest.mark.slow
@as_root
def test_no_other_user_can_read_the_store_or_hold_its_lock(shared: Path) -> None:
    v = LimitedVendor(requests=10_000).start()
    try:
        path = shared / "stream-core-limits.json"
        code, out = _worker(store=str(path), url=v.url, budget=1.0, calls=2)
        assert code == 0 and out["kinds"] == {"ok": 2}, out
    finally:
        v.stop()
    names = [p.name for p in shared.iterdir()]
    assert "stream-core-limits.json" in names
    tried = _as_nobody(
        "import fcntl, json, os, sys\n"
        f"d = {str(shared)!r}\n"
        "found = {}\n"
        "for name in sorted(os.listdir(d)):\n"
        "    try:\n"
        "        with open(os.path.join(d, name), 'rb') as f:\n"
        "            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "            found[name] = 'locked and read ' + str(len(f.read())) + ' bytes'\n"
        "    except OSError as exc:\n"
        "        found[name] = type(exc).__name__\n"
        "print(json.dumps(found))"
    )
    assert tried.returncode == 0, tried.stderr
    found = json.loads(tried.stdout)
    assert found and set(found.values()) == {"PermissionError"}, found


# --- point 6: a write cut by a full disk or a kill ---------------------------------------


@pytest.mark.slow
def test_a_write_cut_by_a_full_disk_or_a_kill_keeps_the_budget(tmp_path: Path) -> None:
    v = LimitedVendor(requests=10_000).start()
    try:
        path = str(tmp_path / "limits.json")
        # A worker spends the budget.
        code, first = _worker(store=path, url=v.url, budget=0.4, calls=20)
        assert code == 0 and first["kinds"].get("budget", 0) > 0, first
        served = first["kinds"]["ok"]
        spent = first["spent"]
        assert 0.3 < spent <= 0.4
        # One whose disk is full (a call of its own, no budget): it is killed (SIGXFSZ)
        # as it writes the store.
        code, _ = _worker(store=path, url=v.url, calls=1, fsize=8, kill=True)
        assert code == -signal.SIGXFSZ
        # The next worker still finds the budget spent: it serves nothing.
        code, after = _worker(store=path, url=v.url, budget=0.4, calls=20)
        assert code == 0, after
        assert after.get("kinds") == {"budget": 20}, (served, after)
        assert after["spent"] == pytest.approx(spent)
    finally:
        v.stop()


@pytest.mark.slow
def test_a_write_that_fails_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    v = LimitedVendor(requests=10_000).start()
    try:
        path = str(tmp_path / "limits.json")
        code, first = _worker(store=path, url=v.url, budget=5.0, calls=3)
        assert code == 0 and first["kinds"] == {"ok": 3}, first
        before = Path(path).read_text()
        # A worker with no room to write: each write fails (EFBIG, as a full disk's ENOSPC).
        code, failed = _worker(store=path, url=v.url, budget=5.0, calls=2, fsize=8)
        assert code == 0 and "refused" not in failed, failed
        # The store is whole: what it held before the failed writes, not a cut file.
        assert Path(path).read_text() == before
        code, after = _worker(store=path, url=v.url, budget=5.0, calls=0)
        assert code == 0 and after["spent"] == pytest.approx(first["spent"]), after
    finally:
        v.stop()


def test_a_private_default_location_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    configure_limits(store="~/.cache/stream-core/limits.json")
    made = tmp_path / ".cache" / "stream-core"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((made / "limits.json").stat().st_mode) == 0o600


def test_a_store_spoiled_after_start_up_is_left_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spoiled once running (by hand, or a disk): the process limits alone and says so;
    the file is not started over, so no budget it held is forgotten."""
    import logging

    import anyio

    from stream_core import Context, Model, StreamOptions, UserMessage, complete

    path = tmp_path / "limits.json"
    configure_limits(store=str(path))
    spoiled = '{"keys": {}, "budgets": {"budget_usd": 0.3'
    path.write_text(spoiled)
    v = LimitedVendor(requests=10_000).start()
    try:
        model = Model(id="m-1", api="openai-completions", provider="openai", base_url=v.url)
        ctx = Context(messages=[UserMessage(content="hi")])

        async def call() -> Any:
            return await complete(model, ctx, StreamOptions(api_key="k"))

        with caplog.at_level(logging.WARNING, logger="stream_core"):
            m = anyio.run(call)
    finally:
        v.stop()
    assert m.error is None
    assert path.read_text() == spoiled
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "limiting in this process" in said and "not a stream-core limit store" in said
