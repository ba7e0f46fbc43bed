"""Where `stream_core.providers` and `stream_core.contract_tests` come from.

Installed from a wheel they are real subpackages (hatch maps the repo's top-level folders
into the package). In a source checkout they stay top-level folders of the repo, and the
package's search path gains the repo root so the same dotted names resolve there.
"""

from __future__ import annotations

from pathlib import Path

_SHIPPED = ("providers", "contract_tests")


def extend_checkout_path(path: list[str]) -> list[str]:
    here = Path(path[0])
    if all((here / name).is_dir() for name in _SHIPPED):
        return path  # installed: the folders are inside the package
    root = here.parent
    pyproject = root / "pyproject.toml"
    # Only our own checkout: a `providers` package that merely sits next to site-packages
    # must never be taken for the built-ins.
    if pyproject.is_file() and 'name = "stream-core"' in pyproject.read_text("utf-8"):
        return [*path, str(root)]
    return path
