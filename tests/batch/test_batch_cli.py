"""`stream-core batch ...` on a store of jobs (an in-memory vendor behind the codec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from memory_codec import Vendor, install
from test_engine import _requests

from stream_core._cli import main
from stream_core.batch import submit


def _submitted(tmp_path: Path, monkeypatch: Any, vendor: Vendor) -> None:
    install(monkeypatch, vendor)

    async def run() -> None:
        await submit(_requests(3), store=tmp_path, name="eval-1")

    anyio.run(run)


def test_list_status_collect_results(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    vendor = Vendor()
    _submitted(tmp_path, monkeypatch, vendor)
    assert main(["batch", "list", str(tmp_path)]) == 0
    assert "eval-1  running  0/3 collected" in capsys.readouterr().out
    assert main(["batch", "status", str(tmp_path), "eval-1", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "ended" and status["total"] == 3
    assert main(["batch", "collect", str(tmp_path), "eval-1", "--interval", "0.01"]) == 0
    line = capsys.readouterr().out
    assert "3 results (succeeded 3)" in line and "at the batch price" in line
    assert main(["batch", "results", str(tmp_path), "eval-1", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["custom_id"] for r in rows] == ["q0", "q1", "q2"]
    assert main(["batch", "list", str(tmp_path)]) == 0
    assert "eval-1  collected  3/3 collected" in capsys.readouterr().out


def test_cancel_and_a_missing_job(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    vendor = Vendor(ended=False)
    _submitted(tmp_path, monkeypatch, vendor)
    assert main(["batch", "cancel", str(tmp_path), "eval-1"]) == 0
    assert all(b["cancelled"] for b in vendor.batches.values())
    assert main(["batch", "status", str(tmp_path), "nope"]) == 1
    assert "no batch job 'nope'" in capsys.readouterr().err
    assert main(["batch", "status", str(tmp_path)]) == 2


@pytest.mark.parametrize("action", ["list", "recover"])
def test_an_empty_store(tmp_path: Path, action: str, capsys: Any) -> None:
    assert main(["batch", action, str(tmp_path / "none")]) == 0
    assert capsys.readouterr().out == ""
