"""Shared fixtures: every `@pytest.mark.anyio` test runs under asyncio and under trio; the
tests listed in `slow_tests.txt` are marked `slow` (the fast loop leaves them out)."""

from __future__ import annotations

from pathlib import Path

import pytest

_SLOW = frozenset(
    line.strip()
    for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("[", 1)[0] in _SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    """Each test starts with an open limiter: a 429 one test serves pauses nothing in the
    next (the limiter is process-wide, as in production)."""
    from stream_core import configure_limits

    configure_limits()


@pytest.fixture(autouse=True)
def _no_base_url_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's OPENAI_BASE_URL / ANTHROPIC_BASE_URL must not redirect the tests."""
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
