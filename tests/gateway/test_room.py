"""The gateway is a room of its own: it reaches the library only through its public doors
(`stream_core`, `stream_core.provider`), so it is built on what any user could build on."""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).parents[2] / "stream_core" / "gateway"
DOORS = {"stream_core", "stream_core.provider"}


def test_the_gateway_imports_only_the_public_doors() -> None:
    wrong: list[str] = []
    for path in sorted(GATEWAY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("stream_core") and name not in DOORS:
                    wrong.append(f"{path.name}:{node.lineno} imports {name}")
    assert not wrong, wrong


def test_no_library_module_imports_the_gateway() -> None:
    """Only the command line (the top layer) starts it."""
    package = GATEWAY.parent
    wrong = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if GATEWAY not in p.parents
        and package / "_cli" not in p.parents
        and "gateway" in _imported(p)
    ]
    assert not wrong, wrong


def _imported(path: Path) -> str:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            out.append(f"{'.' * node.level}{node.module or ''}")
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
    return " ".join(n for n in out if "gateway" in n.split(".") or n.endswith("gateway"))
