"""The wheel, installed into a fresh virtualenv, works beside a harness's own packages.

A harness commonly has its own top-level `providers/` and `contract_tests/`; the wheel ships
ours inside `stream_core`, so neither side shadows the other. This builds the real wheel,
installs it (dependencies offline, from the uv cache `uv sync --locked` filled), and streams
a bundled recording from a directory holding both clashing packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _uv() -> list[str]:
    # `uv run` names its own binary in $UV; CI may also run uv as `python3 -m uv`.
    for candidate in (os.environ.get("UV"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return [candidate]
    for python in (sys.executable, shutil.which("python3")):
        if python and _ok([python, "-m", "uv", "--version"]):
            return [python, "-m", "uv"]
    pytest.skip("uv is not available, so the wheel cannot be built and installed offline")


def _ok(cmd: list[str]) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([*_uv(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT)])
    (built,) = out.glob("stream_core-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the locked runtime dependencies and the wheel, nothing else."""
    target = tmp_path_factory.mktemp("venv") / "env"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(target)
    uv = _uv()
    deps = subprocess.run(
        [*uv, "sync", "--quiet", "--locked", "--offline", "--no-dev", "--no-install-project",
         "--python", sys.executable],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if deps.returncode != 0 and "network was disabled" in deps.stderr:
        pytest.skip("the locked runtime dependencies are not in the uv cache (run uv sync)")
    assert deps.returncode == 0, deps.stderr
    python = target / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([*uv, "pip", "install", "--quiet", "--offline", "--no-deps",
          "--python", str(python), str(wheel)])  # fmt: skip
    return python


def test_the_wheel_holds_one_typed_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}

    # Nothing generic (`providers`, `contract_tests`) lands at the top of site-packages.
    assert top == {"stream_core"}
    # One marker covers the package and its subpackages (PEP 561).
    assert "stream_core/py.typed" in names
    # The command too: the console script points at `stream_core._cli:main`.
    for shipped in ("providers", "contract_tests", "demo", "_cli"):
        assert any(n.startswith(f"stream_core/{shipped}/") for n in names), shipped


HARNESS_SCRIPT = """
import httpx, anyio
import providers, contract_tests
import stream_core
from stream_core import Context, Model, StreamOptions, UserMessage, list_providers
from stream_core._cli.demo import demo_body

async def main():
    body = demo_body("openai-parallel-tools.body")
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=body,
                                       headers={"content-type": "text/event-stream"}))
    async with httpx.AsyncClient(transport=transport) as client:
        options = StreamOptions(client=client, api_key="sk-install-test")
        context = Context(messages=[UserMessage(content="weather and time in Paris?")])
        model = Model(id="gpt-x", api="openai-completions", provider="openai",
                      base_url="https://api.openai.com/v1")
        return await stream_core.complete(model, context, options)

message = anyio.run(main)
assert message.error is None, message.error
assert message.stop_reason == "tool_use", message.stop_reason
assert [c.name for c in message.tool_calls()] == ["get_weather", "get_time"], message.content
# The harness's own packages are still its own, and ours come from the wheel.
assert providers.MINE and contract_tests.MINE
import stream_core.providers as ours
assert not hasattr(ours, "MINE") and "site-packages" in ours.__file__, ours.__file__
assert {"anthropic-messages", "openai-completions"} <= {e.api for e in list_providers()}
assert "site-packages" in stream_core.__file__
# Installed, the same two doors and nothing generic under the package.
import importlib.util
import stream_core.provider, stream_core.contract_tests
assert stream_core.provider.WireAPI and "site-packages" in stream_core.contract_tests.__file__
for name in ("tests", "benchmarks", "examples", "scripts"):
    assert importlib.util.find_spec("stream_core." + name) is None, name
print("ok", message.usage.total_tokens)
"""


def test_the_wheel_streams_beside_a_harness_with_its_own_packages(
    venv: Path, tmp_path: Path
) -> None:
    harness = tmp_path / "harness"
    for name in ("providers", "contract_tests"):
        (harness / name).mkdir(parents=True)
        (harness / name / "__init__.py").write_text("MINE = True\n")
    (harness / "run.py").write_text(textwrap.dedent(HARNESS_SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}

    done = _run([str(venv), "run.py"], cwd=harness, env=env)

    assert done.stdout.startswith("ok "), done.stdout
