"""Review of the file limit store (issue 34) from another local user's side: a directory
of the path that is another user's symbolic link is refused, never followed; a file that
is not a store is left exactly as it was (its mode too); a worker killed mid-write leaves
no temporary file that outlives the next worker's first write.

"Another user" is a real unprivileged process (uid 65534) in a sticky, world-writable
directory like /tmp; those tests need root to start one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from limited_vendor import LimitedVendor
from test_hostile_limit_files import _as_nobody, _worker, as_root

from stream_core import configure_limits


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory like /tmp: world-writable with the sticky bit."""
    path = Path(tempfile.mkdtemp(prefix="sc-review-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@as_root
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_directory_linked_by_another_user_is_refused(
    shared: Path, tmp_path: Path, depth: int
) -> None:
    """`/tmp/app -> ~/project` planted by another user: the store would be made (and
    later replaced) in a directory the user never named."""
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / "limits.json").touch(mode=0o600)  # an empty file of the user's, there
    planted = _as_nobody(f"import os; os.symlink({str(mine)!r}, {str(shared / 'app')!r})")
    assert planted.returncode == 0, planted.stderr
    # depth 2: behind a link of the user's own, that leads through the other user's.
    path = shared / "app" / "limits.json"
    if depth == 2:
        own = tmp_path / "own"
        own.symlink_to(shared / "app")
        path = own / "limits.json"
    if depth == 3:  # a directory yet to be made, under the link: not made through it
        path = shared / "app" / "sub" / "limits.json"
    with pytest.raises(ValueError, match="symbolic link of another user") as caught:
        configure_limits(store=str(path), budget_usd=1.0)
    assert str(path) in str(caught.value)
    assert sorted(p.name for p in mine.iterdir()) == ["limits.json"]
    assert (mine / "limits.json").read_bytes() == b""


def test_a_link_of_ones_own_to_a_directory_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    configure_limits(store=str(tmp_path / "link" / "limits.json"))
    assert (real / "limits.json").is_file()


def test_a_file_that_is_not_a_store_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text("model: claude\nbudget: 5\n")
    path.chmod(0o644)
    with pytest.raises(ValueError, match="not a stream-core limit store"):
        configure_limits(store=str(path), budget_usd=1.0)
    assert path.read_bytes() == b"model: claude\nbudget: 5\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.slow
def test_workers_killed_mid_write_leave_no_temporary_files_behind(tmp_path: Path) -> None:
    v = LimitedVendor(requests=10_000).start()
    try:
        path = str(tmp_path / "limits.json")
        code, first = _worker(store=path, url=v.url, budget=0.4, calls=20)
        assert code == 0 and first["kinds"].get("budget", 0) > 0, first
        for _ in range(3):  # each killed (SIGXFSZ) while it writes its new file
            code, _ = _worker(store=path, url=v.url, calls=1, fsize=8, kill=True)
            assert code == -signal.SIGXFSZ
        left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(left) <= 1, left  # the last one's: no worker has written since
        code, after = _worker(store=path, url=v.url, budget=0.4, calls=5)
        assert code == 0 and after.get("kinds") == {"budget": 5}, after
        assert after["spent"] == pytest.approx(first["spent"])
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["limits.json", "limits.json.lock"], names
        assert json.loads(Path(path).read_text())["budgets"]
    finally:
        v.stop()


@as_root
def test_a_temporary_name_planted_by_another_user_is_left_alone(shared: Path) -> None:
    """Only the user's own leftovers are swept: another user's file, or a link, stays."""
    path = shared / "limits.json"
    configure_limits(store=str(path))
    theirs = shared / "limits.json.0123456789ab.tmp"
    link = shared / "limits.json.ba9876543210.tmp"
    planted = _as_nobody(
        f"import os\nopen({str(theirs)!r}, 'w').write('x')\n"
        f"os.symlink('/etc/passwd', {str(link)!r})"
    )
    assert planted.returncode == 0, planted.stderr
    v = LimitedVendor(requests=10_000).start()
    try:
        code, out = _worker(store=str(path), url=v.url, budget=1.0, calls=1)
        assert code == 0 and out["kinds"] == {"ok": 1}, out
    finally:
        v.stop()
    assert theirs.read_text() == "x" and os.readlink(link) == "/etc/passwd"


# --- a Redis that asks for a password: none in a log line at DEBUG, an error or a key ----


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_refused_redis_password_shows_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import socket
    import subprocess
    import time

    import redis

    from stream_core import (
        Context,
        Model,
        ModelPrices,
        StreamOptions,
        UserMessage,
        budget_spent,
        clear_limits,
        complete,
    )

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    workdir = tempfile.mkdtemp(prefix="sc-review-redis-")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", workdir, "--requirepass", "server-pw-1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    v = LimitedVendor(requests=10_000).start()
    said: list[str] = []
    try:
        admin = redis.Redis(port=port, password="server-pw-1")
        deadline = time.monotonic() + 10
        while True:
            try:
                admin.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        admin.execute_command("ACL", "SETUSER", "fleet-user", "on", ">user-pw-2", "~*", "+@all")  # type: ignore[no-untyped-call]
        base = v.url.replace("http://", "http://base-user:base-pw-3@") + "?api_key=query-key-4&x=1"
        model = Model(
            id="m-1", api="openai-completions", provider="openai", base_url=base,
            max_tokens=30, prices=ModelPrices(input=1, output=2),
        )  # fmt: skip
        ctx = Context(messages=[UserMessage(content="hi")])
        urls = [
            (f"redis://127.0.0.1:{port}/0?password=server-pw-1", None),
            (f"redis://fleet-user:user-pw-2@127.0.0.1:{port}/0", None),
            (f"redis://127.0.0.1:{port}/0?password=wrong-pw-5", "budget"),
            (f"redis://fleet-user:wrong-pw-6@127.0.0.1:{port}/0", "budget"),
        ]
        with caplog.at_level(logging.DEBUG):
            for url, kind in urls:
                configure_limits(store=url, budget_usd=5.0)
                opts = StreamOptions(api_key="sk-api-key-7", max_retries=0, total_timeout=3)
                m = await complete(model, ctx, opts)
                assert (m.error.kind if m.error else None) == kind, m.error
                said.append(repr(m.error))
                try:
                    said.append(repr(await budget_spent()))
                except ConnectionError as exc:  # a refused password: the spend is unknown
                    said.append(f"{exc!r} {exc}")
                try:
                    await clear_limits()
                except Exception as exc:
                    said.append(f"{exc!r} {exc}")
                from stream_core._limits import limiter

                said.append(f"{limiter.config.store!r} {limiter.config.store.name}")
        names = [n.decode() for n in admin.scan_iter("*")]
        admin.close()
    finally:
        v.stop()
        server.kill()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    # httpx's own INFO line shows the URL it sends to, the base URL's userinfo and query
    # included: the vendor's URL is the user's to keep out of httpx's log (left alone here).
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith("http")]
    assert any("password=***" in line for line in logged), logged
    text = "\n".join(said + names + logged)
    for secret in (
        "pw-1",
        "pw-2",
        "pw-3",
        "query-key-4",
        "pw-5",
        "pw-6",
        "sk-api-key",
        "base-user",
    ):
        assert secret not in text, [line for line in text.splitlines() if secret in line]
