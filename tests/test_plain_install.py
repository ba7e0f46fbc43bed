"""`pip install stream-core` without extras: the test helpers and `stream-core serve`.

A plain install has no pytest, respx or hypothesis; `stream_core.testing` (faux models,
`vendor_bytes`, `fake_vendor`, replay) and the `serve` / `synthesize` commands need none
of them: only the pytest plugin and the contract kit need the `testing` extra. This builds
the wheel and installs it into a fresh virtualenv with the locked runtime dependencies
only, offline, from the uv cache `uv sync --locked` filled.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _uv() -> list[str]:
    for candidate in (os.environ.get("UV"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return [candidate]
    pytest.skip("uv is not available, so the wheel cannot be built and installed offline")


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment: the wheel and the locked runtime dependencies, no extra."""
    uv = _uv()
    dist = tmp_path_factory.mktemp("dist")
    _run([*uv, "build", "--wheel", "--quiet", "--out-dir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("stream_core-*.whl")
    target = tmp_path_factory.mktemp("venv") / "env"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(target)
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


PLAIN_SCRIPT = """
import importlib.util, json, subprocess, sys
from pathlib import Path

for extra in ("pytest", "respx", "hypothesis"):
    assert importlib.util.find_spec(extra) is None, f"{extra} is installed: not a plain install"

import stream_core
from stream_core import StreamOptions, complete_sync
from stream_core.testing import fake_vendor, faux_text, faux_tool_call, vendor_bytes

# vendor_bytes, Bedrock's event stream included.
for api in ("anthropic-messages", "openai-completions", "bedrock-converse-stream"):
    synth = vendor_bytes(faux_text("Hello."), api)
    assert synth.body and synth.meta["api"] == api, synth.meta
print("vendor_bytes ok")

# fake_vendor answers a scripted tool loop.
model = stream_core.get_model("anthropic", "claude-sonnet-4-5")
turns = [faux_tool_call("get_forecast", {"city": "Paris"}), faux_text("Rain.")]
with fake_vendor(scenarios={model.id: turns}) as server:
    options = StreamOptions(base_url=server.url, api_key="test-key", max_retries=0)
    context = {"messages": [{"role": "user", "content": "Rain in Paris?"}]}
    first = complete_sync(model, context, options)
    second = complete_sync(model, context, options)
assert first.stop_reason == "tool_use" and second.text() == "Rain.", (first, second)
print("fake_vendor ok", len(server.requests))

# The commands: synthesize writes recordings, serve answers them.
cli = str(Path(sys.executable).with_name("stream-core"))
for command in ("serve", "synthesize"):
    done = subprocess.run([cli, command, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: stream-core " + command in done.stdout, done
Path("script.json").write_text(json.dumps(["Hello from serve."]))
done = subprocess.run([cli, "synthesize", "script.json", "--api", "anthropic-messages",
                       "--out", "rec"], capture_output=True, text=True)
assert done.returncode == 0, done.stderr
server = subprocess.Popen([cli, "serve", "--scenario", "rec", "--port", "0"],
                          stderr=subprocess.PIPE, text=True)
try:
    url = server.stderr.readline().split(" on ")[-1].strip()
    assert url.startswith("http://127.0.0.1:"), url
    answer = complete_sync(model, context, StreamOptions(base_url=url, api_key="k",
                                                         max_retries=0))
    assert answer.text() == "Hello from serve.", answer
finally:
    server.terminate()
    server.wait(10)
print("serve ok")
"""


def test_the_helpers_and_serve_run_on_a_plain_install(plain: Path, tmp_path: Path) -> None:
    (tmp_path / "run.py").write_text(textwrap.dedent(PLAIN_SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}

    done = subprocess.run(
        [str(plain), "run.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    expected = "vendor_bytes ok fake_vendor ok 2 serve ok"
    assert done.stdout.split() == expected.split(), done.stdout
