"""No module of the library over 600 lines, no class over 400 (CONTRIBUTING): a module
that grows past it gets a room of its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
FOLDERS = ("stream_core", "providers", "contract_tests")


def _modules() -> list[Path]:
    out: list[Path] = []
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if path.resolve().is_relative_to(ROOT / folder) and not path.is_symlink():
                out.append(path)
    return sorted(set(out))


def test_no_module_is_over_600_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}  # fmt: skip
    assert not long, long


def test_no_class_is_over_400_lines() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > 400:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = size
    assert not long, long


def test_the_library_is_seen() -> None:
    names = {p.name for p in _modules()}
    assert {"_dialects.py", "_exchange.py", "anthropic.py", "modern.py"} <= names
