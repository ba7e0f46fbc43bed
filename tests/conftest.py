"""Shared fixtures: every `@pytest.mark.anyio` test runs under asyncio and under trio."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _no_base_url_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's OPENAI_BASE_URL / ANTHROPIC_BASE_URL must not redirect the tests."""
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
