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
