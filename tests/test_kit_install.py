"""`stream-core[testing]` from a fresh virtualenv: the kit passes the example plugin and
names each seeded defect of the broken one; the faux model drives a tool loop; `serve`
answers the built-in providers with the bundled recordings.

Everything installs offline: the locked dependencies (the `testing` extra included) come
from the uv cache that `uv sync --locked` filled, the packages are built from this tree.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"
RECORDINGS = EXAMPLES / "acme_provider" / "recordings"


def _uv() -> list[str]:
    for candidate in (os.environ.get("UV"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return [candidate]
    pytest.skip("uv is not available, so the packages cannot be built and installed offline")


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment: the locked runtime deps and the `testing` extra, the wheel,
    and the two example providers; nothing from this checkout's environment."""
    uv = _uv()
    dist = tmp_path_factory.mktemp("dist")
    _run([*uv, "build", "--wheel", "--quiet", "--out-dir", str(dist), str(ROOT)])
    (wheel,) = dist.glob("stream_core-*.whl")
    target = tmp_path_factory.mktemp("venv") / "env"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(target)
    deps = subprocess.run(
        [*uv, "sync", "--quiet", "--locked", "--offline", "--no-dev", "--extra", "testing",
         "--compile-bytecode",
         "--no-install-project", "--python", sys.executable],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if deps.returncode != 0 and "network was disabled" in deps.stderr:
        pytest.skip("the locked dependencies are not in the uv cache (run uv sync)")
    assert deps.returncode == 0, deps.stderr
    python = target / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([*uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--compile-bytecode",
          "--python", str(python),
          str(wheel), str(EXAMPLES / "acme_provider"), str(EXAMPLES / "acme_broken")])  # fmt: skip
    return python


@pytest.fixture(scope="module")
def kit_runs(python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The kit on each example and the faux/serve script, all at once (they are
    independent): name -> exit status and output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    script = tmp_path_factory.mktemp("faux") / "run.py"
    script.write_text(textwrap.dedent(FAUX_AND_SERVE))
    runs = {
        "faux_serve": subprocess.Popen(
            [str(python), str(script)],
            cwd=script.parent,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    }
    for module in ("acme_provider", "acme_broken"):
        runs[module] = subprocess.Popen(
            [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-rf", "--tb=line",
             f"--stream-core-provider={module}", f"--stream-core-fixtures={RECORDINGS}"],
            cwd=tmp_path_factory.mktemp(module), env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
    out = {}
    for module, proc in runs.items():
        text, _ = proc.communicate(timeout=300)
        out[module] = f"exit {proc.returncode}\n{text}"
    return out


def test_the_kit_passes_the_example_provider(kit_runs: dict[str, str]) -> None:
    out = kit_runs["acme_provider"]
    assert out.startswith("exit 0\n"), out
    assert "stream-core contract suite: acme-chat over " in out
    # The whole suite ran on it: recordings (whole, 1-byte, CRLF, splits) and faults.
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) >= 45 and "failed" not in out, out


def test_the_kit_names_each_defect_of_the_broken_provider(kit_runs: dict[str, str]) -> None:
    out = kit_runs["acme_broken"]
    assert out.startswith("exit 1\n"), out
    # 1. a tool-call block never ended: the grammar rule, with the block's start event.
    assert "rule: every started block ends before message_end; open: [1] " in out
    assert "block 1 toolcall_start at event" in out
    # 2. usage double-counted: the field, both numbers and the likely cause.
    assert "usage.input = 24, expected 12 (twice the count" in out
    # 3. the length-cut call not truncated: the stop reason that hid it.
    assert "FAILED" in out and "test_length_stop_fails_every_tool_call[acme-chat/" in out
    assert "a stop by the output limit must end `length`, with every tool call truncated" in out
    # And what is right stays green: the error paths that never reach those defects.
    assert "FAILED contract_tests/test_faults.py::test_http_401" not in out
    assert "test_http_401_auth_and_no_secret_in_error" not in out


FAUX_AND_SERVE = """
import subprocess, sys, threading, anyio
from pathlib import Path
import stream_core
from stream_core import Tool, ToolCall, ToolResultMessage, TextContent, UserMessage
from stream_core.testing import faux_model, faux_text, faux_tool_call
from stream_core.contract_tests.kit import FIXTURES, check_expect, load_fixtures

# 1. The faux model drives a three-turn tool loop.
model = faux_model([
    faux_tool_call("add", {"a": 2, "b": 3}),
    faux_tool_call("add", {"a": 5, "b": 4}),
    faux_text("5, then 9."),
], chunk_size=2)
history = [UserMessage(content="2+3, then 5+4?")]
tools = [Tool(name="add", description="add", parameters={"type": "object"})]
async def loop():
    while True:
        message = await stream_core.complete(model, {"messages": history, "tools": tools})
        history.append(message)
        calls = [b for b in message.content if isinstance(b, ToolCall)]
        if not calls:
            return message
        for c in calls:
            history.append(ToolResultMessage(tool_call_id=c.id, tool_name=c.name,
                content=[TextContent(text=str(c.arguments["a"] + c.arguments["b"]))]))
final = anyio.run(loop)
assert final.text() == "5, then 9.", final
assert [len(c.messages) for c in model.contexts] == [1, 3, 5]
print("faux: 3 turns,", len(history), "messages")

# 2. `stream-core serve` on the bundled recordings answers each built-in provider.
cli = str(Path(sys.executable).with_name("stream-core"))
server = subprocess.Popen([cli, "serve", str(FIXTURES), "--port", "0"],
                          stderr=subprocess.PIPE, text=True)
try:
    url = server.stderr.readline().split(" on ")[-1].strip()
    log = []
    threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
    base = {"openai-completions": "/v1"}
    async def ask(api, case):
        call = case.call  # how the recorded call was made (a structured answer's schema)
        mode = call.pop("structured_output", None)
        m = stream_core.Model(id=case.name, api=api, provider="served",
                              base_url=url + base.get(api, ""), structured_output=mode)
        tools = case.meta.get("request_tools")  # the vendor-run tools it asked for
        if tools:
            call["on_payload"] = lambda payload, model: {**payload, "tools": tools}
        opts = stream_core.StreamOptions(api_key="k", max_retries=0, **call)
        context = {"messages": [{"role": "user", "content": "hi"}]}
        return await stream_core.complete(m, context, opts)
    for entry in stream_core.list_providers():
        cases = load_fixtures(entry.api)
        for case in cases:
            check_expect(anyio.run(ask, entry.api, case), case.expect)
        print("serve:", entry.api, len(cases), "recordings ok")
    print("serve: first request logged as:", log[0].strip() if log else None)
finally:
    server.terminate()
    server.wait(10)
"""


def test_faux_loop_and_serve_from_the_installed_package(kit_runs: dict[str, str]) -> None:
    out = kit_runs["faux_serve"]
    assert out.startswith("exit 0\n"), out
    assert "faux: 3 turns, 6 messages" in out
    for api in ("anthropic-messages", "openai-completions", "ollama-chat"):
        assert f"serve: {api} " in out, out
    assert "-> anthropic-messages/" in out  # the server logged the request it answered
