"""The gateway guides say what the code does: every degradation the exchange allows and
every fitted option is in them, by name."""

from __future__ import annotations

from pathlib import Path

from stream_core.gateway._exchange import DEGRADATIONS
from stream_core.gateway._fit import FITTED

DOCS = Path(__file__).parents[2] / "docs" / "guides"


def test_every_degradation_is_in_the_dialect_tables() -> None:
    page = (DOCS / "gateway-dialects.md").read_text(encoding="utf-8")
    missing = [f"{api}: {name}" for api, table in DEGRADATIONS.items() for name in table
               if f"`{name}`" not in page]  # fmt: skip
    assert not missing, missing


def test_every_fitted_option_is_in_the_guide() -> None:
    page = (DOCS / "gateway.md").read_text(encoding="utf-8")
    table = page[page.index("## Fitted options") :]
    assert all(f"| {name}" in table or f"| `{name}`" in table for name in FITTED)
