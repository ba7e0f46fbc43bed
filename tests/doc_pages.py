"""The user-facing documentation as one text: the README, then every guide of the docs site.

Tests that run or check a documented snippet or table find it here, wherever the section
lives (README or `docs/guides/`), by its `## ` heading.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
GUIDES = ROOT / "docs" / "guides"


def docs_text() -> str:
    pages = [README, *sorted(GUIDES.glob("*.md"))]
    return "\n\n".join(p.read_text(encoding="utf-8") for p in pages)


def section(title: str) -> str:
    """The `## title` section (up to the next `## ` heading), wherever it is."""
    return docs_text().split(f"## {title}")[1].split("\n## ")[0]
