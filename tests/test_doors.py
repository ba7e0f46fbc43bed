"""The two public doors: `stream_core` for harness authors, `stream_core.provider` for
provider authors, and nothing but `providers` and `contract_tests` under the package."""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import stream_core
import stream_core.provider

ROOT = Path(__file__).resolve().parent.parent
DOORS = {"stream_core", "stream_core.provider"}


def test_the_doors_hold_different_names_and_each_resolves() -> None:
    user = set(stream_core.__all__) - {"__version__"}
    provider = set(stream_core.provider.__all__)
    assert not user & provider
    for name in user:
        assert getattr(stream_core, name) is not None, name
    for name in provider:
        assert getattr(stream_core.provider, name) is not None, name
    # What a harness needs every day is at the top...
    assert {"stream", "complete", "Context", "StreamOptions", "get_model", "Usage"} <= user
    # ...and the provider machinery is not.
    assert {"Assembler", "WireAPI", "SSEBytesDecoder", "optional_field"} <= provider


def test_a_moved_name_still_imports_from_the_top_with_a_warning_naming_its_new_home() -> None:
    with pytest.warns(DeprecationWarning, match=r"stream_core\.provider\.Assembler"):
        from stream_core import Assembler  # noqa: F401
    with pytest.warns(DeprecationWarning):
        assert stream_core.WireAPI is stream_core.provider.WireAPI  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
            stream_core.nothing_here  # type: ignore[attr-defined]  # noqa: B018


def _stream_core_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [m for m in found if m == "stream_core" or m.startswith("stream_core.")]


@pytest.mark.parametrize(
    "path",
    sorted([*ROOT.glob("providers/*.py"), *ROOT.glob("examples/*/*/*.py")]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_providers_and_examples_import_only_through_the_doors(path: Path) -> None:
    # A built-in that needs something private means a plugin cannot be written.
    assert set(_stream_core_imports(path)) <= DOORS


def test_only_providers_and_contract_tests_resolve_under_the_package_in_a_checkout() -> None:
    probe = """
import importlib.util, sys
import stream_core
found = {n: importlib.util.find_spec("stream_core." + n) is not None
         for n in ("providers", "contract_tests", "tests", "benchmarks", "examples",
                   "scripts", "docs", "stream_core")}
import stream_core.providers, stream_core.contract_tests
print(found, stream_core.providers.__file__, stream_core.contract_tests.__file__)
"""
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found, providers_file, contract_file = out.split()[:-2], *out.split()[-2:]
    assert eval(" ".join(found)) == {
        "providers": True,
        "contract_tests": True,
        "tests": False,
        "benchmarks": False,
        "examples": False,
        "scripts": False,
        "docs": False,
        "stream_core": False,
    }
    # The package's `providers` is the top-level folder (a link to it): the same file.
    assert Path(providers_file).resolve() == (ROOT / "providers" / "__init__.py").resolve()
    assert Path(contract_file).resolve() == (ROOT / "contract_tests" / "__init__.py").resolve()


def test_a_checkout_holds_no_copy_of_the_shipped_folders() -> None:
    """Issue 24: the editable install copied `providers` into site-packages, a copy that
    went stale after an edit and that mypy and editors resolved `stream_core.providers`
    to. Now nothing is copied: what runs and what is checked is the checkout's file."""
    import sysconfig

    if Path(stream_core.__file__).resolve().parent != (ROOT / "stream_core").resolve():
        pytest.skip("stream_core is installed from a wheel here, not from this checkout")
    purelib = Path(sysconfig.get_paths()["purelib"])
    assert not (purelib / "stream_core" / "providers").exists()
    assert not (purelib / "stream_core" / "contract_tests").exists()
    linked = ROOT / "stream_core" / "providers" / "anthropic.py"
    assert linked.resolve() == (ROOT / "providers" / "anthropic.py").resolve()


def test_importing_the_package_twice_adds_one_finder() -> None:
    probe = """
import importlib, sys
import stream_core
before = len(sys.meta_path)
importlib.reload(stream_core)
print(len(sys.meta_path) - before)
"""
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "0"


def test_every_provider_door_name_no_provider_uses_says_why_it_stays() -> None:
    """Issue 24: the door had 17 names no provider or example used, unexplained."""
    import re

    sources = "".join(
        p.read_text() for p in [*ROOT.glob("providers/*.py"), *ROOT.glob("examples/*/*/*.py")]
    )
    unused = [
        n for n in stream_core.provider.__all__ if not re.search(rf"\b{re.escape(n)}\b", sources)
    ]
    doc = stream_core.provider.__doc__ or ""
    why = doc.split("why each stays")[1]
    assert [n for n in unused if f"`{n}`" not in why] == []
