"""A real process submitting and collecting a batch, killed with SIGKILL at each step of
submission and collection, then restarted (crash_run.py says how): every request is
collected exactly once, the vendor created one batch per part, no batch is left neither
collected nor cancelled, and the budget hold is settled once, to the results' cost.
Every API whose batch codec and fake-vendor routes exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_apis import API, APIS, environment
from crash_run import POINTS, crash


def _api(api: API, monkeypatch: pytest.MonkeyPatch) -> API:
    why = api.missing()
    if why is not None:
        pytest.skip(why)
    found, unset = environment(api)
    for name in unset:
        monkeypatch.delenv(name, raising=False)
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    return api


FAST = {("openai-chat", "created"), ("openai-chat", "results")}
"""Left in the fast loop (some 5 s); the others are `slow` (2-3 s each, 40 in all)."""


@pytest.mark.parametrize(
    ("api", "point"),
    [
        pytest.param(
            a, p, id=f"{a.name}-{p}", marks=() if (a.name, p) in FAST else pytest.mark.slow
        )
        for a in APIS
        for p in POINTS
    ],
)
def test_a_kill_at_each_step_then_a_restart_collects_each_request_once(
    tmp_path: Path,
    api: API,
    point: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = crash(_api(api, monkeypatch), point, tmp_path)
    if out.skipped:
        pytest.skip(out.skipped)
    assert not out.error, out.error
    assert out.first_rc == -9  # killed, not ended
    assert (out.rows, out.unique) == (out.n, out.n)
    assert out.created == out.parts == 1
    assert out.orphans == []
    assert out.spent == pytest.approx(out.cost, rel=1e-9, abs=1e-12)
    assert out.settled == out.parts
