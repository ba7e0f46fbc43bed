"""The API reference builds with warnings as errors, and every public name has a docstring.

The reference (`mkdocs.yml`, `docs/api/`) is rendered by mkdocstrings from the docstrings of
the names in the three doors' `__all__`: `stream_core` (harness authors), `stream_core.provider`
(provider authors) and `stream_core.testing` (test helpers). `uv run mkdocs serve` shows it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).parents[1]
DOORS = {
    "stream_core": "harness",
    "stream_core.provider": "provider",
    "stream_core.testing": "testing",
    "stream_core.gateway": "gateway",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # The theme's banner about MkDocs 2.0 is not a build warning; keep the output readable.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.mark.parametrize("door", DOORS)
def test_api_page_renders_every_public_name(site: Path, door: str) -> None:
    page = (site / "api" / DOORS[door] / "index.html").read_text(encoding="utf-8")
    names = importlib.import_module(door).__all__
    # mkdocstrings gives each rendered object a heading whose id is its full path.
    missing = [name for name in names if f'id="{door}.{name}"' not in page]
    assert not missing, f"{door}: not rendered in docs/api/{DOORS[door]}.md: {missing}"


def test_api_pages_mention_the_key_names(site: Path) -> None:
    api = site / "api"
    harness = (api / "harness" / "index.html").read_text(encoding="utf-8")
    provider = (api / "provider" / "index.html").read_text(encoding="utf-8")
    testing = (api / "testing" / "index.html").read_text(encoding="utf-8")
    for name in ("StreamOptions", "AssistantMessage", "fits_context", "register_model"):
        assert name in harness
    for name in ("WireAPI", "Assembler", "SSEBytesDecoder"):
        assert name in provider
    for name in ("faux_model", "replay_client"):
        assert name in testing
    # The contract keeps its path (README links to it) and is part of the site.
    assert (site / "CONTRACT" / "index.html").is_file()


def _undocumented() -> list[str]:
    """Every public name of the three doors whose docstring is missing or blank.

    Read from the source with griffe, as mkdocstrings does: a class or function has its
    `__doc__`, and a type alias or a constant has the string literal right after its
    assignment (which `inspect.getdoc` cannot see).
    """
    package = griffe.load("stream_core", search_paths=[str(ROOT)], resolve_aliases=True)
    missing = []
    for door in DOORS:
        module = package if door == "stream_core" else package[door.partition(".")[2]]
        for name in importlib.import_module(door).__all__:
            obj = module[name]
            target = obj.final_target if obj.is_alias else obj
            doc = target.docstring.value.strip() if target.docstring is not None else ""
            if not doc:
                missing.append(f"{door}.{name} (defined in {target.relative_filepath})")
    return missing


def test_every_public_name_has_a_docstring() -> None:
    missing = _undocumented()
    assert not missing, (
        "public names without a docstring (PENDING_DOCSTRINGS.md has the text for those "
        "defined in modules edited elsewhere):\n  " + "\n  ".join(missing)
    )
