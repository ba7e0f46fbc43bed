"""The fake vendor's bounds: which hosts and origins it answers, how much of a request it
reads, parses and keeps, and how long a connection may take to send one."""

from __future__ import annotations

import io
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

MAX_REQUEST_BODY = 32 * 1024 * 1024
"""A request body longer than this is answered 413 without being read."""
MAX_BODIES_IN_FLIGHT = 128 * 1024 * 1024
"""Request bodies read at once, in all, counting the scan for their model (twice the
body): a request past it waits for room (at most the read timeout), then gets a 503."""
MAX_KEPT_BODY = 1024 * 1024
"""At most this much of one request body is kept in `FakeVendor.requests`; a body up to
this size is parsed (`ServedRequest.body`), a longer one never is."""
MAX_KEPT_REQUESTS = 100
"""`FakeVendor.requests` keeps at most the latest this many requests."""
MAX_KEPT_BYTES = 16 * 1024 * 1024
"""... and at most this many bytes of them (bodies and headers; the latest request is
always kept): `requests_dropped` counts the older ones. A server answering for hours
holds bounded memory."""
MAX_CONNECTIONS = 256
"""Connections served at once; one more is closed at once (each holds a thread)."""
READ_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's head (from the end of the previous
answer, or from connecting), and then its body, in all, however slowly it trickles in:
past it the connection is closed, and no slow client holds a thread for long."""

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "::1"})


def _name(host: str) -> str:
    """The host name of a `Host` header or an allowed host: lowercase, no port, no
    brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host


def is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostRule:
    """The `Host` and `Origin` a request may name: loopback ones, the address the server
    listens on, and `allow` (`"*"`: any). A web page of another origin cannot POST to the
    server, nor can a DNS name rebound to 127.0.0.1."""

    def __init__(self, allow: Iterable[str], bound: str) -> None:
        names = {_name(a) for a in allow}
        self.any = "*" in names
        bound_name = _name(bound)
        if bound_name not in {"", "0.0.0.0", "::"}:
            names.add(bound_name)
        self.names = frozenset(names)

    def allows(self, name: str) -> bool:
        return self.any or name in self.names or is_loopback(name)

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """(status, reason) when the request is refused, else None."""
        if host is not None and not self.allows(_name(host)):
            return 421, (
                f"host {host[:80]!r} is not a loopback name; allow it with "
                f"--allow-host NAME (fake_vendor(allow_hosts=[...]))"
            )
        if origin is not None and not self.any:
            try:
                parts = urlsplit(origin.strip())
                name = (parts.hostname or "") if parts.scheme in ("http", "https") else ""
            except ValueError:
                name = ""
            if not name or not self.allows(name):
                return 403, (
                    f"origin {origin[:80]!r} is not a loopback one; allow its host with "
                    f"--allow-host NAME (fake_vendor(allow_hosts=[...]))"
                )
        return None


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRINGS_AND_FILLER = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[^"{}\[\]]+', re.S)
_MODEL_KEY = re.compile(rb'"model"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')
_CANDIDATES = 64


def model_in(raw: bytes) -> str:
    """The `model` a JSON request body names at its top level, found without parsing it
    (no object is built, however the body nests): each `"model": "..."` is checked for
    being a key of the top-level object, at most `_CANDIDATES` of them."""
    if raw.lstrip()[:1] != b"{":
        return ""
    view = memoryview(raw)
    clean, depth = 0, 0  # `raw[:clean]` is outside any string and nests `depth` deep
    for n, match in enumerate(_MODEL_KEY.finditer(raw)):
        if n == _CANDIDATES:
            break
        left = _STRINGS_AND_FILLER.sub(b"", view[clean : match.start()])
        if b'"' in left:
            continue  # inside a string (an escaped or open quote before it)
        depth += left.count(b"{") + left.count(b"[") - left.count(b"}") - left.count(b"]")
        if depth == 1:
            text = match.group(1)
            try:
                value = text[1:-1].decode() if b"\\" not in text else _unescape(text)
            except (UnicodeDecodeError, ValueError):
                return ""
            return value
        clean = match.end()  # the value is a string: still outside any
    return ""


def _unescape(text: bytes) -> str:
    import json

    value = json.loads(text)
    return value if isinstance(value, str) else ""


class BodyBudget:
    """The bytes of request bodies being read at once (`MAX_BODIES_IN_FLIGHT`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._room = threading.Condition()

    def take(self, size: int, timeout: float) -> bool:
        size = min(size, self.limit)
        with self._room:
            if not self._room.wait_for(lambda: self.used + size <= self.limit, timeout):
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._room:
            self.used -= min(size, self.limit)
            self._room.notify_all()


class DeadlineReader(io.RawIOBase):
    """A connection's reads, each bounded by what is left of `deadline` (a monotonic
    time): a request sent a byte at a time still ends at the deadline."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self._sock = sock
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def restart(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took longer than the read timeout")
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self.timeout)
