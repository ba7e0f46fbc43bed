"""The gateway's fidelity matrix (issue 36, point 5), from the clients' side: the official
`anthropic` SDK (Messages) and `openai` SDK (Responses, Chat Completions) against the
gateway on loopback, each upstream a loopback vendor of one of the eight wire APIs
playing scripted turns, for each scenario: 3 dialects x 8 upstreams x 10 scenarios.

A cell passes when the SDK accumulates exactly what stream-core reads from the upstream's
own bytes (text, thinking, tool calls and their arguments, citations, usage with cache
reads and writes, stop reason, each in the dialect's own fields) and every request the
upstream got is one its vendor accepts, with what it needs back restored. Cells whose
script the upstream cannot say are skipped with the reason. See `matrix_support`.

`MATRIX_REPORT=/path/matrix.md uv run pytest tests/gateway/test_matrix.py -n0` also writes
the result as the markdown table the docs show (one process: the table holds every cell).
One cell per dialect runs in the fast loop; the rest are marked slow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from matrix_clients import CLIENTS  # noqa: E402
from matrix_support import SCENARIOS, VENDOR_ENV, Matrix, Skip, markdown, run_cell  # noqa: E402
from matrix_vendors import UPSTREAMS  # noqa: E402

FAST = {
    ("thinking + tool loop", "anthropic-messages", "google-generative-ai"),
    ("thinking + tool loop", "openai-responses", "anthropic-messages"),
    ("thinking + tool loop", "openai-completions", "mistral-conversations"),
}
"""One cell per dialect in the fast loop: a foreign upstream's state carried both ways."""

KNOWN: dict[tuple[str, str, str], str] = {}
"""Cells failing for a known codec or gateway defect, with a word for it (strict: a fixed
one fails until it leaves this table). Empty: every cell that runs passes."""

SHORT = {"anthropic-messages": "anthropic", "openai-responses": "responses",
         "openai-completions": "chat"}  # fmt: skip

RESULTS: dict[tuple[str, str, str], tuple[str, str]] = {}


def _cells() -> Iterator[object]:
    for scenario in SCENARIOS:
        for dialect in CLIENTS:
            for api in UPSTREAMS:
                cell = (scenario, dialect, api)
                marks: list[pytest.MarkDecorator] = [] if cell in FAST else [pytest.mark.slow]
                if cell in KNOWN:
                    marks.append(
                        pytest.mark.xfail(strict=True, reason=f"known defect {KNOWN[cell]}")
                    )
                slug = re.sub(r"\W+", "_", scenario).strip("_")
                name = f"{slug}-{SHORT[dialect]}_client-{api}"
                yield pytest.param(*cell, id=name, marks=marks)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in VENDOR_ENV.items():
            env.setenv(name, value)
        folder = tmp_path_factory.mktemp("matrix")
        # No machine's own AWS profile takes part.
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-credentials"))
        env.setenv("AWS_CONFIG_FILE", str(folder / "no-config"))
        with Matrix(folder) as m:
            yield m
    report = os.environ.get("MATRIX_REPORT")
    if report and RESULTS and not os.environ.get("PYTEST_XDIST_WORKER"):
        Path(report).write_text(markdown(RESULTS), encoding="utf-8")


@pytest.mark.parametrize(("scenario", "dialect", "upstream"), list(_cells()))
def test_cell(matrix: Matrix, scenario: str, dialect: str, upstream: str) -> None:
    cell = (scenario, dialect, upstream)
    try:
        run_cell(matrix, scenario, dialect, upstream)
    except Skip as e:
        RESULTS[cell] = ("skip", str(e))
        pytest.skip(str(e))
    except BaseException as e:
        known = f"known defect {KNOWN[cell]}: " if cell in KNOWN else ""
        RESULTS[cell] = ("FAIL", f"{known}{type(e).__name__}: {e}"[:400])
        raise
    RESULTS[cell] = ("pass", "")


def test_the_table_names_every_cell() -> None:
    table = markdown({("text", "anthropic-messages", "ollama-generate"): ("skip", "why")})
    assert "| text | — | — | — | — | — | — | — | skip [1] |" in table
    assert "1. why" in table
