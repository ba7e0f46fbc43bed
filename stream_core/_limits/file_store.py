"""The limiter's state in one file shared by the worker processes of one host, no server
(`configure_limits(store="/path")`).

The file is the user's own and private, or it is refused at configure time with the path
and the problem named: never a symbolic link (opened with `O_NOFOLLOW`), never a file of
another user or one others can write, never a file that is not a store (a `limits.yaml`
passed by mistake), in directories only the user (or root) can change, or sticky like
/tmp. Every file is checked on the descriptor opened (`fstat`), not on the name before.
It is made 0600 with exclusive creation, its lock is a private file of its own
(`PATH.lock`, so no other user can hold it), and each change is written whole to a new
private file that then replaces it (`fsync`, `rename`): a full disk or a kill leaves the
store as it was. A store that cannot be read is an error (the limiter then limits in the
process alone), never a store started over.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
import time
import weakref
from collections.abc import Mapping
from typing import Any

import anyio

from .._transport import _loop_key
from .stores import LimitSettlement, LimitStore, _Tables, checked_tally
from .window import Snapshot

__all__ = ["FileStore"]

_MAX_BYTES = 64 << 20
"""A store is far smaller (keys are pruned past 1,000): a larger file is not one."""

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LOCK = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAKE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _refused(path: str, problem: str) -> ValueError:
    return ValueError(f"limit store {path} {problem}")


def _resolve(directory: str, shown: str) -> str:
    """`os.path.realpath(directory)`, except that a symbolic link of another user on the
    way (one planted in /tmp, pointing at a directory of the user's) is refused. What
    does not exist yet is kept as named."""
    me = os.geteuid()
    resolved = os.sep
    pending = directory.split(os.sep)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            resolved = os.path.dirname(resolved)
            continue
        step = os.path.join(resolved, part)
        try:
            st = os.lstat(step)
        except FileNotFoundError:
            return os.path.normpath(os.path.join(step, *pending))
        if not stat.S_ISLNK(st.st_mode):
            resolved = step
            continue
        if st.st_uid not in (me, 0):
            raise _refused(
                shown,
                f"is under {step}, a symbolic link of another user (uid {st.st_uid}): it "
                "could lead the store to a directory of yours; name the directory itself",
            )
        hops += 1
        if hops > 40:
            raise _refused(shown, f"is under {step}: too many symbolic links")
        target = os.readlink(step)
        pending = target.split(os.sep) + pending
        if os.path.isabs(target):
            resolved = os.sep
    return resolved


def _check_dirs(directory: str, shown: str) -> None:
    """Every directory above the file is the user's or root's, and none that others can
    write lacks the sticky bit (else another user could swap the file for theirs)."""
    me = os.geteuid()
    while True:
        st = os.stat(directory)
        if st.st_uid not in (me, 0):
            raise _refused(shown, f"is in {directory}, a directory owned by another user")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise _refused(
                shown,
                f"is in {directory}, a directory writable by group or others without the "
                "sticky bit: another user could replace the file",
            )
        up = os.path.dirname(directory)
        if up == directory:
            return
        directory = up


def _check_fd(fd: int, shown: str) -> os.stat_result:
    """The file opened is a regular file of the user's, with one name, that no one else
    can write (`_private` then makes it 0600, once it is known to be the store's)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise _refused(shown, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refused(shown, f"is owned by another user (uid {st.st_uid}), not by you")
    if st.st_mode & 0o022:
        raise _refused(
            shown,
            f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}): another "
            "user could have changed it; remove it, or chmod 600 it if only you wrote it",
        )
    if st.st_nlink != 1:
        raise _refused(shown, "has other hard links: it may be another file of yours")
    return st


def _private(fd: int, st: os.stat_result) -> None:
    if st.st_mode & 0o077:
        os.fchmod(fd, 0o600)


def _open(path: str, flags: int, shown: str) -> int:
    try:
        return os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or os.path.islink(path):
            raise _refused(
                shown,
                "is a symbolic link: the store never follows one (another user could point "
                "it at a file of yours); name the file itself",
            ) from None
        raise


def _read(path: str, shown: str) -> tuple[str | None, dict[str, Any]]:
    """The text of the store (None: there is none yet) and its data (`_parse`). A file
    that is not a store is left as it was, its mode too."""
    try:
        fd = _open(path, _READ, shown)
    except FileNotFoundError:
        return None, {}
    try:
        st = _check_fd(fd, shown)
        if st.st_size > _MAX_BYTES:
            raise _refused(shown, "is not a stream-core limit store (too large); left as it is")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        text = b"".join(chunks).decode("utf-8", "replace")
        data = _parse(text, shown)
        _private(fd, st)
        return text, data
    finally:
        os.close(fd)


def _parse(text: str | None, shown: str) -> dict[str, Any]:
    """The store's data; an empty (or missing) file is a new store. Anything else that is
    not a JSON object with the store's members (`keys`, `budgets`) is refused, never
    started over."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and (not data or ("keys" in data and "budgets" in data)):
        return data  # the store's own (what its members hold is range-checked as read)
    raise _refused(
        shown,
        "is not a stream-core limit store (not JSON of its shape, or cut off); it is left "
        "as it is: give the store a path of its own",
    )


def _write(path: str, text: str) -> None:
    """Replace the store with `text` whole: a new private file, synced, renamed over it."""
    temp = f"{path}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _MAKE, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(text.encode())
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


class FileStore(LimitStore):
    """One JSON file shared by the processes of one host, each change made under an
    exclusive `flock` (POSIX hosts) of a private lock file beside it and written whole to
    a new file that replaces it (see the module). The lock is taken without blocking,
    retried every millisecond on the event loop, so a busy file never stalls other calls.
    A path that is not safe to use raises `ValueError` here, at configure time."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import fcntl  # noqa: F401  (POSIX only: fail at configure time, not at a call)

        self._turns: weakref.WeakKeyDictionary[Any, anyio.Lock] = weakref.WeakKeyDictionary()
        shown = os.fspath(path)
        given = os.path.abspath(os.path.expanduser(shown))
        directory, base = os.path.split(given)
        if not base or shown.endswith(os.sep):
            raise _refused(shown, "is not a regular file (it names a directory)")
        directory = _resolve(directory, shown)  # no directory made through a link
        os.makedirs(directory, mode=0o700, exist_ok=True)
        directory = _resolve(directory, shown)
        _check_dirs(directory, shown)
        self.shown = shown
        self.path = os.path.join(directory, base)
        self.lock_path = self.path + ".lock"
        self.name = f"file {shown}"
        self._swept = False
        try:
            os.close(os.open(self.path, _MAKE, 0o600))  # made now: a new store, empty
        except FileExistsError:
            pass  # never opened to write: checked, then only ever replaced whole
        _read(self.path, shown)  # whoever made it: checked on its fd
        os.close(self._lock_fd())  # the lock too: a path that cannot be written fails now

    def _lock_fd(self) -> int:
        fd = _open(self.lock_path, _LOCK, self.lock_path)
        try:
            _private(fd, _check_fd(fd, self.lock_path))
        except BaseException:
            os.close(fd)
            raise
        return fd

    async def _apply(self, change: Any) -> Any:
        # One call of this process at a time asks for the file lock (in turn, first come
        # first served): the others wait on the event loop, never in a spin on the file.
        loop = _loop_key()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = anyio.Lock()
        async with turn:
            return await self._locked(change)

    async def _locked(self, change: Any) -> Any:
        import fcntl

        fd = self._lock_fd()
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await anyio.sleep(0.001)
            if not self._swept:
                self._sweep()
            text, data = _read(self.path, self.shown)
            tables = _Tables(data)
            result = change(tables)
            if len(tables.keys) > 1000:
                tables.prune(time.time())
            out = json.dumps(tables.data, separators=(",", ":"))
            if out != text:  # a look that changed nothing writes nothing
                _write(self.path, out)
            return result
        finally:
            os.close(fd)  # and the lock with it

    def _sweep(self) -> None:
        """Remove the new files of writers killed before their rename (under the lock, so
        none is being written): once per process, so kills never pile them up."""
        self._swept = True
        directory, base = os.path.split(self.path)
        made = re.compile(re.escape(base) + r"\.[0-9a-f]{12}\.tmp")
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            if made.fullmatch(name):
                left = os.path.join(directory, name)
                try:
                    st = os.lstat(left)
                    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                        os.unlink(left)
                except OSError:
                    pass

    async def admit(
        self, key: str, needs: dict[str, int], asks: list[list[Any]], now: float, route: bool
    ) -> tuple[float, Snapshot, list[Any] | None]:
        result: tuple[float, Snapshot, list[Any] | None] = await self._apply(
            lambda t: t.admit(key, needs, asks, now, route)
        )
        return result

    async def settle(self, settlement: LimitSettlement, now: float) -> None:
        await self._apply(lambda t: t.settle(settlement, now))

    async def cool(
        self,
        key: str,
        until: float,
        now: float | None = None,
        *,
        started: float | None = None,
        backoff: tuple[float, float] | None = None,
        reset: bool = False,
    ) -> tuple[float, int]:
        at = time.time() if now is None else now
        found: tuple[float, int] = await self._apply(
            lambda t: t.cool(key, until, at, started, backoff, reset)
        )
        return found

    async def cooling(self, keys: list[str]) -> list[float]:
        found: list[float] = await self._apply(
            lambda t: [t.keys.get(k, {}).get("c", 0.0) for k in keys]
        )
        return found

    async def spent(self, name: str) -> float:
        now = time.time()
        found: float = await self._apply(lambda t: t.spent_of(name, now))
        return found

    async def clear(self, match: tuple[str, str] | None) -> None:
        await self._apply(lambda t: t.clear(match))

    async def clear_budgets(self, name: str | None) -> None:
        await self._apply(lambda t: t.clear_budgets(name))

    async def tally(self, name: str, deltas: Mapping[str, float], now: float) -> None:
        checked = checked_tally(name, deltas)
        await self._apply(lambda t: t.tally(name, checked, now))

    async def tallies(self, name: str) -> dict[str, float]:
        now = time.time()
        found: dict[str, float] = await self._apply(lambda t: t.tallies_of(name, now))
        return found

    async def contents(self) -> dict[str, Any]:
        now = time.time()
        found: dict[str, Any] = await self._apply(lambda t: t.contents(now))
        return found
