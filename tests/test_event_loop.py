"""Nothing blocks the event loop: a process's first call leaves other tasks running.

The first call of a process does stream-core's one-time set-up: the built-in providers,
the catalog, the price table, the shared HTTP client (TLS context, httpcore). Before, the
price data alone (genai-prices) held the loop for ~2 s and the TLS set-up for ~0.5 s more.
Here a ticker task sleeps 1 ms at a time beside a first `complete()` on a priced model
against a loopback server, in a fresh interpreter (benchmarks/first_call.py), and its
largest gap between wake-ups must stay under `BOUND_MS`.

The bound: on this project's 2-core machine the largest gap measures 40-90 ms for asyncio
and trio (it was 1,300-2,200 ms before); 150 ms leaves room for a loaded CI runner, and
the best of three fresh processes is taken so one descheduling does not fail the test.
The interpreter runs with bytecode caches in a private directory, warmed by one run first,
as an installed package does (pip compiles at install): without them every import on any
thread compiles its module, which measures the machine, not stream-core.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOUND_MS = 150.0


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "first_call", ROOT / "benchmarks" / "first_call.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    srv, port = bench.serve()
    yield port
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    for var in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"):
        environment.pop(var, None)
    return environment


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_first_call_leaves_the_event_loop_running(
    backend: str, server: int, env: dict[str, str]
) -> None:
    bench.measure(server, backend, use_complete=True, env=env)  # warms the bytecode cache
    runs = []
    for _ in range(3):
        run = bench.measure(server, backend, use_complete=True, env=env)
        assert run["error"] is None, run
        assert run["text"], run
        # The cost is computed on that first call (the price table read on the way).
        assert run["cost"] is not None and run["cost"] > 0, run
        runs.append(run)
        if float(run["stall_ms"]) <= BOUND_MS:
            break
    best = min(float(r["stall_ms"]) for r in runs)
    assert best <= BOUND_MS, runs


def test_aws_files_are_read_once_and_again_when_they_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from stream_core.providers import _aws

    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKID1\naws_secret_access_key = s1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing"))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    reads = 0
    real = _aws.configparser.RawConfigParser.read

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(_aws.configparser.RawConfigParser, "read", counting)
    first = _aws.find_credentials()
    assert first is not None and first.access_key_id == "AKID1"
    assert _aws.find_credentials() == first
    assert reads == 1  # parsed once; a missing file is never opened

    credentials.write_text(
        "[default]\naws_access_key_id = AKID2\naws_secret_access_key = s22\n"
    )  # rotated (`aws sso login`): a new size and mtime
    rotated = _aws.find_credentials()
    assert rotated is not None and rotated.access_key_id == "AKID2"
    assert reads == 2


@pytest.mark.anyio
async def test_the_shared_client_is_set_up_once_per_process_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stream_core import _transport

    monkeypatch.setattr(_transport, "_trusted", False)
    loaded_on: list[object] = []
    load = _transport._load_trust

    def counting() -> None:
        loaded_on.append(threading.current_thread())
        load()

    monkeypatch.setattr(_transport, "_load_trust", counting)
    # http:// only: no certificate bundle is read.
    client = await _transport.shared_client_async(tls=False)
    assert loaded_on == [] and not _transport._trusted
    # The first https request loads it, in a worker thread, once per process.
    assert client is await _transport.shared_client_async(tls=True)
    assert client is await _transport.shared_client_async(tls=True)
    assert _transport._trusted and len(loaded_on) == 1
    assert loaded_on[0] is not threading.current_thread()
    # Every loop's client verifies with the one context of the process, which now trusts
    # the bundle's authorities.
    transport = client._transport
    assert isinstance(transport, _transport.PoolTransport)
    pool = transport._pool(0)._pool
    assert pool._ssl_context is _transport._ssl_context
    assert _transport._ssl_context is not None
    assert _transport._ssl_context.cert_store_stats()["x509_ca"] > 0
    assert _transport._ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert _transport._ssl_context.check_hostname
