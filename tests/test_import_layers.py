"""The package's modules import each other in layers: no circle, lazily or not (an import
inside a function counts; one under `TYPE_CHECKING` does not, it never runs)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "stream_core"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = {
            id(node)
            for branch in ast.walk(tree)
            if isinstance(branch, ast.If) and _is_type_checking(branch.test)
            for node in ast.walk(branch)
        }
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.level or id(node) in skipped:
                continue
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            targets = (
                [".".join([*base, node.module])]
                if node.module
                else [".".join([*base, alias.name]) for alias in node.names]
            )
            graph[name] |= {t for t in targets if t in modules and t != name and t}
    return graph


def test_no_module_of_the_package_imports_another_in_a_circle() -> None:
    graph = _imports()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
