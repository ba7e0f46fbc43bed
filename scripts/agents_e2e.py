"""Real agents through the gateway: Claude Code and Codex CLI, offline, on loopback.

    uv run python scripts/agents_e2e.py [--only claude-gemini,...] [--agents-dir DIR]
                                        [--keep] [--verbose]

Four runs (issue 36, point 5), each a multi-turn tool loop through the gateway to an
upstream of another vendor, everything on 127.0.0.1 (no network, no vendor account):

    claude-gemini   Claude Code (Anthropic Messages) -> Gemini (google-generative-ai)
    claude-chat     Claude Code (Anthropic Messages) -> Chat Completions (openai-completions)
    codex-anthropic Codex CLI (OpenAI Responses)     -> Anthropic Messages
    codex-gemini    Codex CLI (OpenAI Responses)     -> Gemini (google-generative-ai)

Each run starts a fake vendor of the upstream's API (`stream_core.testing.fake_vendor`,
scripted turns in that vendor's exact wire format) and the gateway in process (uvicorn on
`stream_core.gateway.create_app`, a gateway key, the upstream's key in an environment
variable), then runs the real agent against the gateway:

- `claude -p PROMPT --allowedTools Bash` (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY = the
  gateway key; works as root, where --dangerously-skip-permissions is refused);
- `codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT`
  with CODEX_HOME holding a config.toml whose custom provider points at the gateway
  (`wire_api = "responses"`, `env_key`).

The agent's first request is read on its way into the gateway: its own shell tool (name,
and the argument that takes the command) is found in its `tools`, and the upstream is
scripted with it: turn 1 calls that tool with a command that writes a nonce (computed by
the shell: `$((6*7))`) to a file and prints it, turn 2 answers with a final text holding
the nonce. A run passes when the agent exits 0, the command ran (the file holds the
nonce), the upstream's second request carries the command's output as the tool result in
a shape that vendor accepts (call and result paired, ids and Gemini's thought signature
or Anthropic's thinking signature given back, roles in order), the gateway key never
reached the upstream, and the agent printed the final answer. A table of the runs is
printed; the exit status is 1 when any run failed.

The two npm packages (`@anthropic-ai/claude-code`, `@openai/codex`, ~300 MB) are
installed with `npm install --prefix DIR` into `--agents-dir` (default
$STREAM_CORE_AGENTS_DIR, else ~/.cache/stream-core/agents) when missing: the only step
that needs the network. Not part of the pytest run. Needs Node.js 18+ and the `gateway`
extra (uvicorn).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stream_core import AssistantMessage, TextContent, ThinkingContent, ToolCall, Usage
from stream_core.gateway import GatewayConfig, GatewayKey, Upstream, create_app, hash_key
from stream_core.testing import ANY_MODEL, FakeVendor, fake_vendor, faux_message, faux_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agents_e2e_shapes import SHAPES, Expect, clip, shell_call, tool_entries, upstream_tools  # noqa: E402

PACKAGES = ("@anthropic-ai/claude-code", "@openai/codex")
UPSTREAM_KEY_ENV = "AGENTS_E2E_UPSTREAM_KEY"
AGENT_TIMEOUT = 300.0
CODEX_MODEL = "gpt-5-codex"


@dataclass(frozen=True)
class Run:
    name: str
    agent: str  # "claude" | "codex"
    model: str  # the catalog model the gateway sends to
    api: str  # the upstream's wire API
    path: str  # the base URL's path on the fake vendor


RUNS = (
    Run("claude-gemini", "claude", "google/gemini-3-flash-preview", "google-generative-ai", ""),
    Run("claude-chat", "claude", "openai/gpt-4.1", "openai-completions", "/v1"),
    Run("codex-anthropic", "codex", "anthropic/claude-sonnet-4-5", "anthropic-messages", ""),
    Run("codex-gemini", "codex", "google/gemini-3-flash-preview", "google-generative-ai", ""),
)
"""The four runs of issue 36: each agent to upstreams of other vendors."""

SAME_DIALECT = (
    Run("claude-anthropic", "claude", "anthropic/claude-sonnet-4-5", "anthropic-messages", ""),
    Run("codex-responses", "codex", "openai/gpt-5-codex", "openai-responses", "/v1"),
)
"""With `--all`: each agent to an upstream of its own dialect (the pass-through path)."""


@dataclass
class AgentRequest:
    """One request the agent sent the gateway, and what the gateway answered."""

    method: str
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    response: bytes = b""


@dataclass
class Outcome:
    run: Run
    problems: list[str] = field(default_factory=list)
    agent_requests: list[AgentRequest] = field(default_factory=list)
    upstream_requests: list[Any] = field(default_factory=list)
    turns: int = 0
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    gateway_log: list[str] = field(default_factory=list)
    tool: tuple[str, dict[str, Any]] | None = None
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


# --- the agents ---------------------------------------------------------------------------


def ensure_agents(cache: Path) -> dict[str, list[str]]:
    """The command line of each agent, installing the npm packages into `cache` if missing."""
    bins = cache / "node_modules" / ".bin"
    if not all((bins / n).exists() for n in ("claude", "codex")):
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("agents_e2e: npm not found (Node.js 18+ is needed to install the agents)")
        cache.mkdir(parents=True, exist_ok=True)
        print(f"installing {' '.join(PACKAGES)} into {cache} ...", flush=True)
        subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(cache),
                "--prefer-offline",
                "--no-audit",
                "--no-fund",
                *PACKAGES,
            ],
            check=True,
        )
    commands = {"claude": [str(bins / "claude")], "codex": [str(bins / "codex")]}
    if not _runs(commands["claude"]):
        # npm may skip the package's postinstall, which puts the native binary in place.
        package = cache / "node_modules" / "@anthropic-ai" / "claude-code"
        subprocess.run(["node", "install.cjs"], cwd=package, check=False)
        if not _runs(commands["claude"]):
            commands["claude"] = ["node", str(package / "cli-wrapper.cjs")]
    for command in commands.values():
        if not _runs(command):
            sys.exit(f"agents_e2e: `{' '.join(command)} --version` fails")
    return commands


def _runs(command: list[str]) -> bool:
    try:
        done = subprocess.run([*command, "--version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def agent_env(home: Path) -> dict[str, str]:
    """The caller's environment without any vendor or agent setting, HOME in `home`."""
    dropped = ("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "GEMINI_", "GOOGLE_")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(dropped)}
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        env.pop(proxy, None)
    env.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def claude_command(base: list[str], gateway: str, key: str, prompt: str, home: Path):  # type: ignore[no-untyped-def]
    env = agent_env(home)
    env.update(
        ANTHROPIC_BASE_URL=gateway,
        ANTHROPIC_API_KEY=key,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_COST_WARNINGS="1",
        CLAUDE_CODE_MAX_RETRIES="1",
    )
    return [*base, "-p", prompt, "--allowedTools", "Bash"], env


def codex_command(base: list[str], gateway: str, key: str, prompt: str, home: Path):  # type: ignore[no-untyped-def]
    codex_home = home / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f'model = "{CODEX_MODEL}"\n'
        'model_provider = "gateway"\n'
        "\n"
        "[model_providers.gateway]\n"
        'name = "stream-core gateway"\n'
        f'base_url = "{gateway}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "STREAM_CORE_GATEWAY_KEY"\n'
        "request_max_retries = 1\n"
        "stream_max_retries = 1\n"
    )
    env = agent_env(home)
    env.update(CODEX_HOME=str(codex_home), STREAM_CORE_GATEWAY_KEY=key)
    command = [
        *base,
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    return command, env


# --- the shell tool and the script ---------------------------------------------------------


@dataclass
class Script:
    """What the upstream is scripted to answer, decided at the agent's first request."""

    nonce: str
    api: str
    tool: tuple[str, dict[str, Any]] | None = None
    call_id: str = ""
    signature: str = ""

    @property
    def token(self) -> str:
        return f"e2e-{self.nonce}-42"

    @property
    def command(self) -> str:
        return f"echo e2e-{self.nonce}-$((6*7)) > token.txt && cat token.txt"

    @property
    def final(self) -> str:
        return f"The command printed {self.token}. FINAL-{self.nonce}"

    def turns(self, name: str, args: dict[str, Any]) -> list[Any]:
        self.tool = (name, args)
        blocks: list[Any] = []
        sig = base64.b64encode(f"e2e-signature-{self.nonce}".encode()).decode()
        self.signature = sig
        self.call_id = f"call_e2e_{self.nonce}"
        # Gemini 3 answers a 400 when a call's thought signature does not come back.
        thought = sig if self.api == "google-generative-ai" else None
        if self.api == "anthropic-messages":
            self.call_id = f"toolu_e2e_{self.nonce}"
            blocks.append(
                ThinkingContent(thinking="The user wants the command run.", signature=sig)
            )
        call = ToolCall(id=self.call_id, name=name, arguments=args, thought_signature=thought)
        blocks += [TextContent(text="Running it now."), call]
        first = AssistantMessage(
            api=self.api,
            provider="e2e",
            model="e2e",
            content=blocks,
            usage=Usage(input=1200, output=40),
            stop_reason="tool_use",
        )
        return [faux_message(first), faux_text(self.final, usage=Usage(input=1300, output=20))]


# --- the gateway, with the agent's requests recorded ----------------------------------------


class Recorder:
    """ASGI middleware: keeps each request the agent sends and the gateway's answer, and
    calls `first(body)` with each request's JSON until it returns True."""

    def __init__(self, app: Any, first: Callable[[Any], bool]) -> None:
        self.app = app
        self.first = first
        self.scripted = False
        self.seen: list[AgentRequest] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        headers = {
            k.decode("latin-1").lower(): "[redacted]"
            if k.lower() in (b"x-api-key", b"authorization")
            else v.decode("latin-1")
            for k, v in scope["headers"]
        }
        record = AgentRequest(scope["method"], scope["path"], body, headers)
        self.seen.append(record)
        if not self.scripted and body:
            try:
                self.scripted = self.first(json.loads(body))
            except ValueError:
                pass
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def capture(message: Any) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
            elif message["type"] == "http.response.body" and len(record.response) < 1 << 20:
                record.response += message.get("body", b"")
            await send(message)

        await self.app(scope, replay, capture)


class GatewayServer:
    """The gateway app under uvicorn, in a thread, on a free loopback port."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def __enter__(self) -> GatewayServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


class GatewayLog(logging.Handler):
    """The gateway's access lines and the server's errors (tracebacks included), kept
    for the run's report instead of printed."""

    LOGGERS = ("stream_core.gateway.access", "uvicorn.error")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def __enter__(self) -> GatewayLog:
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(self)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)


# --- one run -------------------------------------------------------------------------------


def run_one(run: Run, agents: dict[str, list[str]], keep: bool) -> Outcome:
    outcome = Outcome(run)
    work = Path(tempfile.mkdtemp(prefix=f"agents-e2e-{run.name}-"))
    (work / "home").mkdir()
    (work / "project").mkdir()
    script = Script(nonce=secrets.token_hex(4), api=run.api)
    gateway_key = "sk-gw-e2e-" + secrets.token_hex(12)
    upstream_key = "upstream-e2e-" + secrets.token_hex(12)
    os.environ[UPSTREAM_KEY_ENV] = upstream_key
    fake: FakeVendor = fake_vendor(scenarios={ANY_MODEL: ["(unscripted)", "(unscripted)"]})

    def first(body: Any) -> bool:
        found = shell_call(body.get("tools") if isinstance(body, dict) else None, script.command)
        if found is None:
            return False
        fake.scenarios[ANY_MODEL].recordings[:] = script.turns(*found)
        return True

    upstream = Upstream(run.model, base_url=fake.url + run.path, api_key_env=UPSTREAM_KEY_ENV)
    names = {"claude-*": upstream} if run.agent == "claude" else {CODEX_MODEL: upstream}
    config = GatewayConfig(models=dict(names), keys=[GatewayKey("e2e", hash_key(gateway_key))])
    recorder = Recorder(create_app(config), first)
    prompt = (
        "Run this shell command exactly once with your shell tool, then tell me what it "
        f"printed: {script.command}"
    )
    began = time.monotonic()
    try:
        with GatewayLog() as log, GatewayServer(recorder) as gateway:
            build = claude_command if run.agent == "claude" else codex_command
            command, env = build(agents[run.agent], gateway.url, gateway_key, prompt, work / "home")
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    cwd=work / "project",
                    capture_output=True,
                    text=True,
                    timeout=AGENT_TIMEOUT,
                    stdin=subprocess.DEVNULL,
                )
                outcome.stdout, outcome.stderr = done.stdout, done.stderr
                outcome.returncode = done.returncode
            except subprocess.TimeoutExpired as e:
                outcome.stdout = _text(e.stdout)
                outcome.stderr = _text(e.stderr)
                outcome.problems.append(f"the agent did not finish in {AGENT_TIMEOUT:.0f} s")
    finally:
        outcome.seconds = time.monotonic() - began
        fake.stop()
        os.environ.pop(UPSTREAM_KEY_ENV, None)
    outcome.agent_requests = recorder.seen
    outcome.upstream_requests = list(fake.requests)
    outcome.gateway_log = log.lines
    outcome.tool = script.tool
    outcome.turns = sum(1 for r in fake.requests if r.status == 200)
    check(outcome, script, work / "project", gateway_key, upstream_key)
    if keep or not outcome.ok:
        dump(outcome, work)
    if not keep:
        shutil.rmtree(work / "home", ignore_errors=True)
        shutil.rmtree(work / "project", ignore_errors=True)
        if outcome.ok:
            shutil.rmtree(work, ignore_errors=True)
    return outcome


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


# --- the checks ----------------------------------------------------------------------------


def check(outcome: Outcome, script: Script, project: Path, gateway_key: str, up_key: str) -> None:
    p = outcome.problems
    if script.tool is None:
        names = [n for r in outcome.agent_requests for n, _ in _tools_of(r.body)]
        p.append(f"no shell tool found in the agent's tools ({', '.join(names[:30]) or 'none'})")
        return
    for r in outcome.agent_requests:
        if r.method == "HEAD":
            continue  # Claude Code's pre-connect (`HEAD /`, no key): its answer is not read
        if r.status == 0:
            raised = [line for line in outcome.gateway_log if "Traceback" in line]
            why = raised[-1].strip().splitlines()[-1] if raised else "no answer"
            p.append(f"gateway raised on {r.method} {r.path}: {clip(why, 200)}")
        elif r.status != 200:
            p.append(f"gateway {r.status} to {r.method} {r.path}: {_error_text(r.response)}")
    if outcome.returncode not in (0, None):
        p.append(f"the agent exited {outcome.returncode}")
    token_file = project / "token.txt"
    if not token_file.is_file() or script.token not in token_file.read_text():
        p.append("the command did not run: token.txt does not hold the token")
    ups = [r for r in outcome.upstream_requests if r.method == "POST"]
    if len(ups) != 2:
        answers = ", ".join(f"{r.status} {r.answer}" for r in ups)
        p.append(f"the upstream got {len(ups)} request(s), expected 2 ({answers})")
    for r in ups:
        headers = json.dumps(r.headers)
        if gateway_key in headers or gateway_key.encode() in r.raw:
            p.append("the gateway key reached the upstream")
        if up_key not in headers:
            p.append("the upstream's key (api_key_env) was not sent to the upstream")
    if up_key in outcome.stdout or up_key in outcome.stderr:
        p.append("the upstream's key appears in the agent's output")
    if len(ups) >= 1 and ups[0].body is not None:
        offered = [n for n, _ in upstream_tools(script.api, ups[0].body)]
        if script.tool[0] not in offered:
            p.append(f"the upstream's first request does not offer {script.tool[0]}: {offered}")
    if len(ups) >= 2:
        body = ups[1].body
        if body is None:
            p.append("the upstream's second request is not JSON")
        else:
            name, args = script.tool
            expect = Expect(name, args, script.call_id, script.signature, script.token)
            p.extend(SHAPES[script.api](body, expect))
    if f"FINAL-{script.nonce}" not in outcome.stdout:
        p.append(f"the agent did not print the final answer; stdout: {clip(outcome.stdout)}")


def _error_text(raw: bytes) -> str:
    """The `message` of an error body (any dialect's), else the body clipped."""
    try:
        body = json.loads(raw)
        error = body.get("error")
        return clip(str(error.get("message") if isinstance(error, dict) else error))
    except (ValueError, AttributeError):
        return clip(raw)


def _tools_of(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    try:
        body = json.loads(raw)
    except ValueError:
        return []
    return tool_entries(body.get("tools")) if isinstance(body, dict) else []


# --- report --------------------------------------------------------------------------------


def dump(outcome: Outcome, work: Path) -> None:
    """Everything a failed (or --keep) run saw, as JSON beside its temp folder."""
    data = {
        "run": outcome.run.name,
        "problems": outcome.problems,
        "tool": outcome.tool,
        "agent_requests": [
            {
                "method": r.method,
                "path": r.path,
                "status": r.status,
                "headers": r.headers,
                "body": _json_or_text(r.body),
                "response": r.response.decode(errors="replace")[:200_000],
            }
            for r in outcome.agent_requests
        ],
        "upstream_requests": [
            {
                "method": r.method,
                "path": r.path,
                "status": r.status,
                "answer": r.answer,
                "body": r.body,
            }
            for r in outcome.upstream_requests
        ],
        "gateway_log": outcome.gateway_log,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr[-20_000:],
    }
    path = work / "run.json"
    path.write_text(json.dumps(data, indent=1))
    if not outcome.ok:
        outcome.problems.append(f"(details: {path})")


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


CARRIED = {
    "google-generative-ai": "thoughtSignature",
    "anthropic-messages": "signed thinking",
}
"""What of the upstream's first answer its second request must hold again (checked)."""


def table(outcomes: list[Outcome]) -> str:
    head = ("agent", "upstream API", "turns", "requests seen", "state given back", "seconds")
    rows = [(*head, "result")]
    for o in outcomes:
        agent = "Claude Code" if o.run.agent == "claude" else "Codex CLI"
        seen = f"{len(o.agent_requests)} agent->gw, {len(o.upstream_requests)} gw->upstream"
        state = CARRIED.get(o.run.api, "-")
        result = "pass" if o.ok else "FAIL: " + clip(o.problems[0], 110)
        rows.append((agent, o.run.api, str(o.turns), seen, state, f"{o.seconds:.1f}", result))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for n, r in enumerate(rows):
        lines.append(
            " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + " | " + r[-1]
        )
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths) + "-+-" + "-" * 6)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        help="comma-separated run names: " + ", ".join(r.name for r in (*RUNS, *SAME_DIALECT)),
    )
    parser.add_argument(
        "--agents-dir",
        type=Path,
        default=Path(
            os.environ.get("STREAM_CORE_AGENTS_DIR") or "~/.cache/stream-core/agents"
        ).expanduser(),
        help="where the npm packages are (installed there when missing)",
    )
    parser.add_argument(
        "--all", action="store_true", help="also each agent to an upstream of its own dialect"
    )
    parser.add_argument("--keep", action="store_true", help="keep each run's folder and run.json")
    parser.add_argument(
        "--verbose", action="store_true", help="print every problem and the agent's output"
    )
    args = parser.parse_args()
    runs = (*RUNS, *SAME_DIALECT)
    default = runs if args.all else RUNS
    wanted = set(args.only.split(",")) if args.only else {r.name for r in default}
    unknown = wanted - {r.name for r in runs}
    if unknown:
        parser.error(f"unknown run(s): {', '.join(sorted(unknown))}")
    agents = ensure_agents(args.agents_dir)
    outcomes = []
    for run in runs:
        if run.name not in wanted:
            continue
        print(f"{run.name}: {run.agent} -> gateway -> {run.api} ...", flush=True)
        outcome = run_one(run, agents, args.keep)
        outcomes.append(outcome)
        for problem in outcome.problems if (args.verbose or not outcome.ok) else ():
            print(f"  - {problem}")
        if args.verbose:
            print("  stdout: " + clip(outcome.stdout, 2000))
            print("  stderr: " + clip(outcome.stderr, 2000))
            for line in outcome.gateway_log:
                print("  gateway: " + line)
    print()
    print(table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
