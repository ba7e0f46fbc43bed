"""No part of a credential reaches a limit store, a key name or a log line: a base URL's
`user:password@` and credential query parameters are left out of the key a call is
limited under (told apart by the key's hash only), a Redis URL's password (userinfo or
`?password=`) shows in no log line, whatever error text a store echoes, and the API key's
hash in the key is a slow salted one, not recovered by trying short keys."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import socket
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from limited_vendor import LimitedVendor
from redis_server import session_url

from stream_core import (
    Context,
    LimitStore,
    Model,
    StreamOptions,
    UserMessage,
    complete,
    configure_limits,
)
from stream_core._limits.stores import MemoryStore

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
CTX = Context(messages=[UserMessage(content="hi")])


@pytest.fixture
def vendor() -> Iterator[LimitedVendor]:
    v = LimitedVendor(requests=10_000).start()
    yield v
    v.stop()


class Recording(MemoryStore):
    """An in-process store that remembers every key it is asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def admit(self, key: str, *args: Any, **kwargs: Any) -> Any:
        self.seen.append(key)
        return await super().admit(key, *args, **kwargs)


def _model(base_url: str) -> Model:
    return Model(
        id="m-1", api="openai-completions", provider="openai", base_url=base_url, max_tokens=20
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens here once closed


async def test_no_credential_in_a_base_url_reaches_the_key() -> None:
    store = Recording()
    configure_limits(store=store)
    port = _port()  # nothing is sent anywhere: the key is made before the call is sent
    opts = StreamOptions(api_key="k", max_retries=0)
    urls = [
        f"http://admin:url-pw-1@127.0.0.1:{port}/v1?key=q-secret-1&api-version=2024",
        f"http://admin:url-pw-2@127.0.0.1:{port}/v1?key=q-secret-1&api-version=2024",
        f"http://admin:url-pw-1@127.0.0.1:{port}/v1?key=q-secret-2&api-version=2024",
        f"http://127.0.0.1:{port}/v1?access_token=tok-3&sig=sig-4&api-version=2024",
        f"http://admin:url-pw-1@127.0.0.1:{port}/v1?key=q-secret-1&api-version=2024",
    ]
    keys = []
    for url in urls:
        store.seen.clear()
        await complete(_model(url), CTX, opts)
        keys.append(store.seen[0])
    text = "\n".join(keys)
    for secret in ("url-pw", "admin", "q-secret", "tok-3", "sig-4"):
        assert secret not in text, text
    assert all(f"127.0.0.1:{port}/v1" in k and "api-version=2024" in k for k in keys), keys
    # Told apart by the hash: another password or token is another key; the same, the same.
    assert len(set(keys[:4])) == 4 and keys[4] == keys[0], keys


async def test_no_credential_reaches_the_file_store(tmp_path: Path, vendor: LimitedVendor) -> None:
    path = tmp_path / "limits.json"
    configure_limits(store=str(path))
    url = vendor.url.replace("http://", "http://admin:file-pw-7@")
    m = await complete(_model(url), CTX, StreamOptions(api_key="sk-file-key-123456"))
    assert m.error is None, m.error
    text = path.read_text()
    assert json.loads(text)["keys"], text  # the vendor's limits were kept, under a key
    for secret in ("file-pw-7", "admin", "sk-file-key", "sk-file-"):
        assert secret not in text, text


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


async def test_no_credential_reaches_a_redis_key_name(
    redis_url: str, vendor: LimitedVendor
) -> None:
    import uuid

    import redis

    prefix = f"t{uuid.uuid4().hex[:12]}"
    configure_limits(store=redis_url, prefix=prefix)
    url = vendor.url.replace("http://", "http://admin:redis-pw-8@")
    m = await complete(_model(url), CTX, StreamOptions(api_key="sk-redis-key-123456"))
    assert m.error is None, m.error
    client = redis.Redis.from_url(redis_url)
    try:
        names = [n.decode() for n in client.scan_iter(f"{prefix}:*")]
    finally:
        client.close()
    assert names, "nothing was kept"
    for secret in ("redis-pw-8", "admin", "sk-redis-key"):
        assert not any(secret in n for n in names), names


def _fast_guesses(digest: str) -> str | None:
    """Every key of 1 to 3 lowercase letters, under the fast hashes a key might use."""
    for size in (1, 2, 3):
        for letters in itertools.product(string.ascii_lowercase, repeat=size):
            key = "".join(letters)
            for guess in (key.encode(), f"Bearer {key}".encode()):  # as a header sends it
                for made in (
                    hashlib.blake2b(guess, digest_size=8).hexdigest(),
                    hashlib.blake2b(guess).hexdigest(),
                    hashlib.sha256(guess).hexdigest(),
                    hashlib.md5(guess).hexdigest(),
                ):
                    if digest in made or made in digest:
                        return key
    return None


@pytest.mark.slow
async def test_a_short_api_key_is_not_recovered_from_the_store() -> None:
    store = Recording()
    configure_limits(store=store)
    port = _port()
    await complete(_model(f"http://127.0.0.1:{port}/v1"), CTX, StreamOptions(api_key="abc"))
    (key,) = set(store.seen)
    digest = key.split("|")[-2]
    assert "abc" not in key
    assert _fast_guesses(digest) is None, "the key was recovered from its hash"


@pytest.mark.slow
def test_processes_sharing_a_store_share_a_key(tmp_path: Path, vendor: LimitedVendor) -> None:
    """The key's hash is the same in every process: one entry for one API key."""
    path = str(tmp_path / "limits.json")
    for _ in range(2):
        p = subprocess.run(
            [sys.executable, str(HERE / "fleet_worker.py"), "--url", vendor.url,
             "--store", path, "--calls", "2", "--concurrency", "1"],
            capture_output=True, text=True, timeout=120, cwd=HERE.parent,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-2000:]
        assert json.loads(p.stdout)["kinds"] == {"ok": 2}
    keys = list(json.loads(Path(path).read_text())["keys"])
    assert len(keys) == 1, keys
    assert "fleet-key" not in keys[0]


# --- the log: a Redis password, and any error text a store echoes -------------------------


async def test_a_redis_password_never_reaches_the_log(
    vendor: LimitedVendor, caplog: pytest.LogCaptureFixture
) -> None:
    port = _port()
    for url in (
        f"redis://127.0.0.1:{port}/0?password=query-pw-5&db=0",
        f"redis://admin:user-pw-6@127.0.0.1:{port}/0",
    ):
        configure_limits(store=url)
        with caplog.at_level(logging.WARNING, logger="stream_core"):
            m = await complete(_model(vendor.url), CTX, StreamOptions(api_key="k"))
        assert m.error is None
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert said.count("limiting in this process") == 2, said
    for secret in ("query-pw-5", "user-pw-6", "admin"):
        assert secret not in said, said
    assert f"127.0.0.1:{port}" in said


class Failing(LimitStore):
    """A store whose errors echo its URL, credentials and all."""

    name = "custom"

    async def admit(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError(
            "cannot reach redis://admin:echo-pw-9@10.0.0.1:6379/0?password=echo-pw-10&db=1 "
            "(auth token=echo-tok-11)"
        )


async def test_an_error_a_store_echoes_shows_no_credential(
    vendor: LimitedVendor, caplog: pytest.LogCaptureFixture
) -> None:
    configure_limits(store=Failing())
    with caplog.at_level(logging.WARNING, logger="stream_core"):
        m = await complete(_model(vendor.url), CTX, StreamOptions(api_key="k"))
    assert m.error is None
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "limiting in this process" in said and "10.0.0.1:6379" in said, said
    for secret in ("echo-pw-9", "echo-pw-10", "echo-tok-11", "admin"):
        assert secret not in said, said
