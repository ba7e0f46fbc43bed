"""`cost_summary`: a run's cost by provider and model from messages, result rows and batch
results, with numbers a hand computation gives exactly; `stream-core cost` reads a log."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from stream_core import AssistantMessage, Cost, StreamError, Usage
from stream_core._cli import main
from stream_core.batch import BatchResult
from stream_core.runs import CostSummary, ResultLog, cost_summary


def _m(
    provider: str,
    model: str,
    usage: Usage,
    kind: str | None = None,
) -> AssistantMessage:
    return AssistantMessage(
        api="faux",
        provider=provider,
        model=model,
        usage=usage,
        stop_reason="error" if kind else "stop",
        error=StreamError(kind=kind, message="x") if kind else None,  # type: ignore[arg-type]
    )


# Costs are binary fractions (1/64, 1/128, ...): sums a hand computes are exact floats.
A1 = _m("anthropic", "claude-x", Usage(input=1000, output=200, cache_read=300, cache_write=50,
        reasoning=20, cost=Cost(total=1 / 64)))  # fmt: skip
A2 = _m(
    "anthropic", "claude-x", Usage(input=500, output=100, cost=Cost(total=1 / 128)), "rate_limit"
)
O1 = _m("openai", "gpt-x", Usage(input=2000, output=400))  # unpriced
O2 = _m("openai", "gpt-x", Usage(input=100, output=10, cost=Cost(total=1 / 4)))
O3 = _m("openai", "gpt-x", Usage(input=100, output=10, cost=Cost(total=1 / 8)), "expired")
G1 = _m("google", "gemini-x", Usage(input=10, output=1, cost=Cost(total=1 / 1024)))


def _summary(tmp_path: Path) -> CostSummary:
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("a1", A1)
        log.write("a2", A2, batch=True)
        log.write("o1", O1)
        log.write("o2", O2, batch_id="msgbatch_1")
    rows = list(ResultLog.read(path))
    batch = BatchResult("o3", "expired", O3, "msgbatch_1")
    return cost_summary([*rows, batch, G1])


def test_the_numbers_are_exact(tmp_path: Path) -> None:
    s = _summary(tmp_path)
    # Most expensive first: openai (1/4 + 1/8), anthropic (1/64 + 1/128), google.
    assert [(r.provider, r.model) for r in s.rows] == [
        ("openai", "gpt-x"), ("anthropic", "claude-x"), ("google", "gemini-x"),
    ]  # fmt: skip
    openai, anthropic, google = s.rows
    assert openai.as_dict() == {
        "provider": "openai", "model": "gpt-x", "count": 3, "failed": 1, "batch": 2,
        "batch_share": 2 / 3, "unpriced": 1, "input": 2200, "output": 420, "cache_read": 0,
        "cache_write": 0, "reasoning": 0, "usd": 0.375,
    }  # fmt: skip
    assert (anthropic.count, anthropic.failed, anthropic.batch, anthropic.unpriced) == (2, 1, 1, 0)
    assert (anthropic.input, anthropic.output, anthropic.cache_read) == (1500, 300, 300)
    assert (anthropic.cache_write, anthropic.reasoning, anthropic.usd) == (50, 20, 0.0234375)
    assert anthropic.batch_share == 0.5
    assert (google.count, google.usd, google.batch_share) == (1, 1 / 1024, 0.0)
    t = s.total
    assert (t.provider, t.model, t.count, t.failed, t.batch, t.unpriced) == ("*", "*", 6, 2, 3, 1)
    assert (t.input, t.output, t.cache_read, t.cache_write) == (3710, 721, 300, 50)
    assert t.usd == 0.375 + 0.0234375 + 1 / 1024 == 0.3994140625


def test_the_order_results_came_in_does_not_change_the_sum() -> None:
    cents = [_m("p", "m", Usage(cost=Cost(total=0.01))) for _ in range(10)]
    big = _m("p", "m", Usage(cost=Cost(total=1e6)))
    assert cost_summary([big, *cents]).total.usd == cost_summary([*cents, big]).total.usd


def test_the_table(tmp_path: Path) -> None:
    assert _summary(tmp_path).table() == textwrap.dedent("""\
    PROVIDER   MODEL     COUNT  FAILED  BATCH  INPUT  OUTPUT  CACHE R  CACHE W      USD  UNPRICED
    openai     gpt-x         3       1    67%  2,200     420        0        0  $0.3750         1
    anthropic  claude-x      2       1    50%  1,500     300      300       50  $0.0234         0
    google     gemini-x      1       0     0%     10       1        0        0  $0.0010         0
    total                    6       2    50%  3,710     721      300       50  $0.3994         1
    """)
    empty = cost_summary([]).table().splitlines()[-1].split()
    assert empty == ["total", "0", "0", "0%", "0", "0", "0", "0", "$0.0000", "0"]


def test_anything_else_is_refused() -> None:
    with pytest.raises(TypeError, match="AssistantMessage, ResultRow or BatchResult"):
        cost_summary([{"message": {}}])


def test_the_cost_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.jsonl"
    with ResultLog(path) as log:
        log.write("a1", A1)
        log.write("o2", O2, batch_id="b")
    with path.open("ab") as f:
        f.write(b'{"id":"cut","outcome":"ok","kind":nu')  # a writer killed mid-line
    assert main(["cost", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["PROVIDER", "MODEL", "COUNT", "FAILED", "BATCH",
        "INPUT", "OUTPUT", "CACHE", "R", "CACHE", "W", "USD", "UNPRICED"]  # fmt: skip
    assert out.splitlines()[-1].split() == [
        "total",
        "2",
        "0",
        "50%",
        "1,100",
        "210",
        "300",
        "50",
        "$0.2656",
        "0",
    ]
    assert main(["cost", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"]["usd"] == 1 / 64 + 1 / 4 and data["total"]["count"] == 2
    assert [r["model"] for r in data["rows"]] == ["gpt-x", "claude-x"]


def test_the_cost_command_names_what_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl: No such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "message": "no"}\n')
    assert main(["cost", str(bad)]) == 1
    assert "line 1: not a result row" in capsys.readouterr().err
