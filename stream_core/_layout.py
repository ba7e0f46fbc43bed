"""Where `stream_core.providers` and `stream_core.contract_tests` come from.

Installed from a wheel they are real subpackages (hatch ships the repo's top-level folders
inside the package). In a source checkout `stream_core/providers` and
`stream_core/contract_tests` are links to the top-level folders, so nothing is needed;
where the links were not checked out (a Windows checkout without symlinks), one finder on
`sys.meta_path` resolves exactly those two names there. The package's own search
path is left alone, so nothing else at the repo root (`tests`, `benchmarks`, even
`stream_core` itself) imports as `stream_core.<name>`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and pathlib cost `import stream_core` more than all the rest
    import importlib.machinery
    from pathlib import Path

SHIPPED = ("providers", "contract_tests")


class _CheckoutFolders:
    """Finds `stream_core.providers` and `stream_core.contract_tests` in a checkout; their
    submodules are then found through the package's own `__path__` as usual."""

    # A meta path finder by protocol (`find_spec`): subclassing `importlib.abc.MetaPathFinder`
    # would import importlib.resources, tempfile and more on every `import stream_core`.

    def __init__(self, root: Path) -> None:
        self.root = root
        self.names = {f"stream_core.{name}": root / name for name in SHIPPED}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.names.get(fullname)
        if folder is None:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def install_checkout_finder(package_path: Sequence[str]) -> None:
    if all(os.path.isdir(os.path.join(package_path[0], name)) for name in SHIPPED):
        return  # installed: the folders are inside the package
    from pathlib import Path

    here = Path(package_path[0])
    root = here.parent
    pyproject = root / "pyproject.toml"
    # Only our own checkout: a `providers` package that merely sits next to site-packages
    # must never be taken for the built-ins.
    if not (pyproject.is_file() and 'name = "stream-core"' in pyproject.read_text("utf-8")):
        return
    if not all((root / name / "__init__.py").is_file() for name in SHIPPED):
        return
    if any(isinstance(f, _CheckoutFolders) for f in sys.meta_path):
        return  # a re-import of the package (importlib.reload) must not stack finders
    sys.meta_path.insert(0, _CheckoutFolders(root))
