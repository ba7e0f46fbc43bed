"""stream-core's pytest plugin (the `pytest11` entry point, active once the package is
installed): fixtures for testing code that uses stream-core, and the contract suite for a
provider written outside this repo.

Fixtures, in any test:

- `faux_model`: `faux_model(turns, chunk_size=None, delay=0.0)` makes a scripted model
  (`stream_core.testing.faux_model`).
- `replay_client`: `replay_client("answer.body")` makes a client answering every request
  with that recording; `replay_client(["call.body", "answer.body"])` answers them in turn.
  Relative paths are looked up beside the test file first (it opens no socket).
- `fake_vendor`: `fake_vendor(scenarios={"claude-sonnet-4-5": [...]})` starts a fake vendor
  on loopback (`stream_core.testing.fake_vendor`), stopped after the test.

The contract suite:

    pytest --stream-core-provider=my_pkg.my_provider --stream-core-fixtures=tests/recordings

runs every contract test (grammar, `expect`, chunking invariance, scripted faults) on the
APIs that module serves, over the recordings in `DIR/<api>/*.body` (+ `.json`). Without
the options it does nothing. It needs the `testing` extra (respx, hypothesis).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from stream_core import list_providers
from stream_core.provider import WireAPI, register_provider

# The kit's plain asserts show their operands on failure, as a test module's do; this
# must be said before the kit is first imported.
pytest.register_assert_rewrite(
    "stream_core.contract_tests.grammar", "stream_core.contract_tests.kit"
)

if TYPE_CHECKING:
    from stream_core.testing import FakeVendor, FauxModel, ReplayClient
    from stream_core.testing._replay import Recording
    from stream_core.testing._serve import ScenarioSource

_SOURCE = "stream-core-kit"


# --- fixtures for harness authors ---------------------------------------------------------


@pytest.fixture(name="faux_model")
def _faux_model_fixture() -> Callable[..., FauxModel]:
    """Make a scripted model: `faux_model(turns, chunk_size=None, delay=0.0)`."""
    from stream_core.testing import faux_model

    return faux_model


@pytest.fixture(name="replay_client")
def _replay_client_fixture(request: pytest.FixtureRequest) -> Callable[..., ReplayClient]:
    """Make a replay client: one recording answers every request, a list answers in turn
    (a multi-turn test). Relative paths are looked up beside the test file first.
    Keywords as `stream_core.testing.replay_client` (`chunk_size`, `status`, `headers`,
    `delay`). An in-memory client: nothing to close."""
    from stream_core.testing import replay_client, replay_sequence

    here = Path(str(request.path)).parent

    def resolve(recording: Recording) -> Recording:
        return recording if isinstance(recording, bytes) else _beside(here, recording)

    def make(recordings: Recording | Sequence[Recording], **kwargs: Any) -> ReplayClient:
        if isinstance(recordings, (str, Path, bytes)):
            return replay_client(resolve(recordings), **kwargs)
        return replay_sequence([resolve(r) for r in recordings], **kwargs)

    return make


@pytest.fixture(name="fake_vendor")
def _fake_vendor_fixture(request: pytest.FixtureRequest) -> Iterator[Callable[..., FakeVendor]]:
    """Start a fake vendor on loopback: `fake_vendor(root=None, scenarios=..., ...)` as
    `stream_core.testing.fake_vendor` (relative paths looked up beside the test file
    first); every one started is stopped after the test."""
    from stream_core.testing import fake_vendor

    here = Path(str(request.path)).parent
    started: list[FakeVendor] = []

    def make(
        root: str | Path | None = None,
        *,
        scenarios: Mapping[str, ScenarioSource] | None = None,
        **kwargs: Any,
    ) -> FakeVendor:
        resolved: dict[str, ScenarioSource] = {}
        for model, source in (scenarios or {}).items():
            if isinstance(source, (str, Path)):
                resolved[model] = _beside(here, source)
            else:
                resolved[model] = [_beside_item(here, r) for r in source]
        where = _beside(here, root) if root is not None else None
        server = fake_vendor(where, scenarios=resolved, **kwargs)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def _beside_item(here: Path, item: Any) -> Any:
    """A scenario list's entry: a path beside the test file when it is there; a string
    that names no file stays a string (the text of a scripted answer, `load_scenario`)."""
    if isinstance(item, Path):
        return _beside(here, item)
    if isinstance(item, str):
        try:
            beside = _beside(here, item)
        except (OSError, ValueError):  # a long text, a NUL: no file name
            return item
        return beside if beside != Path(item) else item
    return item


def _beside(here: Path, name: str | Path) -> Path:
    """`name` beside the test file when it is there (or its `.body` is), else as given."""
    path = Path(name)
    beside = here / path
    if not path.is_absolute() and (beside.exists() or beside.with_suffix(".body").exists()):
        return beside
    return path


# --- the contract suite -------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("stream-core", "stream-core contract suite")
    group.addoption(
        "--stream-core-provider",
        action="append",
        default=[],
        metavar="MODULE",
        help="provider module to run the contract suite on (repeatable)",
    )
    group.addoption(
        "--stream-core-fixtures",
        action="append",
        default=[],
        metavar="DIR",
        help="folder holding one <api>/ folder of recordings per API, or an <api>/ folder "
        "itself (repeatable)",
    )


def pytest_configure(config: pytest.Config) -> None:
    modules: list[str] = config.getoption("stream_core_provider")
    folders: list[str] = config.getoption("stream_core_fixtures")
    if not modules and not folders:
        return
    kit: Any = importlib.import_module("stream_core.contract_tests.kit")
    apis = [api for name in modules for api in _register(importlib.import_module(name))]
    if apis:
        kit.UNDER_TEST = apis
    dirs = []
    known = apis or [e.api for e in list_providers()]
    for folder in folders:
        d = Path(folder).resolve()
        if not d.is_dir():
            raise pytest.UsageError(f"--stream-core-fixtures: {d} is not a folder")
        if any(d.glob("*.body")):
            if d.name not in known:
                raise pytest.UsageError(_layout_error(d, known))
            # The API's own folder (`DIR/<api>/`) names its parent: recordings are found by API.
            d = d.parent
        elif not any((d / api).is_dir() for api in known):
            # Recordings only in folders named after no API under test would be ignored.
            stray = sorted(s.name for s in d.iterdir() if s.is_dir() and any(s.glob("*.body")))
            if stray:
                raise pytest.UsageError(_stray_error(d, stray, known))
        dirs.append(d)
    # A plugin is checked on its own recordings; the built-ins keep theirs beside any extra.
    kit.FIXTURE_DIRS = dirs if modules else [*kit.FIXTURE_DIRS, *dirs]
    suite = str(Path(str(kit.__file__)).parent)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if suite not in config.args:
            config.args.append(suite)
    else:
        config.args[:] = [suite]  # no paths given: run the suite alone


def _layout_error(folder: Path, apis: list[str]) -> str:
    """What a folder of recordings not named after an API is told: the layout expected."""
    first = apis[0] if apis else "<api>"
    return (
        f"--stream-core-fixtures: {folder} holds recordings (*.body) but is not named after "
        f"an API under test ({', '.join(apis) or 'none'}). Recordings are found by API: "
        f"pass a folder holding one <api>/ folder per API (e.g. {folder.parent}/recordings/"
        f"{first}/*.body), or an <api>/ folder itself (rename {folder.name}/ to {first}/)."
    )


def _stray_error(folder: Path, stray: list[str], apis: list[str]) -> str:
    """What a folder whose recordings sit in folders named after no API is told."""
    first = apis[0] if apis else "<api>"
    names = ", ".join(f"{name}/" for name in stray[:5])
    return (
        f"--stream-core-fixtures: {folder} has no folder named after an API under test "
        f"({', '.join(apis) or 'none'}); its recordings in {names} would be ignored. "
        f"Recordings are found by API: {folder}/<api>/*.body (rename {stray[0]}/ to "
        f"{first}/)."
    )


def _register(module: ModuleType) -> list[str]:
    """Serve the module's APIs with it, over anything installed for the same names."""
    api = getattr(module, "API", None)
    fn = getattr(module, "stream", None)
    if not isinstance(api, str) or not callable(fn):
        raise pytest.UsageError(f"{module.__name__} must export API: str and stream()")
    wire = getattr(module, "WIRE", None)
    register_provider(api, fn, source=_SOURCE, wire=wire if isinstance(wire, WireAPI) else None)
    apis = [api]
    for other in getattr(module, "WIRES", ()):
        if isinstance(other, WireAPI) and other.api != api:
            register_provider(other.api, other.open, source=_SOURCE, wire=other)
            apis.append(other.api)
    return apis


def pytest_report_header(config: pytest.Config) -> str | None:
    modules: list[str] = config.getoption("stream_core_provider")
    if not modules:
        return None
    kit = importlib.import_module("stream_core.contract_tests.kit")
    dirs = ", ".join(str(d) for d in kit.FIXTURE_DIRS)
    return f"stream-core contract suite: {', '.join(kit.apis_under_test())} over {dirs}"
