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
    access_log: list[str] = field(default_factory=list)
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
            [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", *PACKAGES],
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

SHELL_NAMES = ("Bash", "exec_command", "shell_command", "shell", "bash", "run_shell_command")


def _tool_entries(tools: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema) of each function tool, in any of the three client dialects
    (Responses namespaces opened)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            out += _tool_entries(tool.get("tools"))
            continue
        fn: dict[str, Any] = tool["function"] if isinstance(tool.get("function"), dict) else tool
        schema = fn.get("input_schema") or fn.get("parameters")
        if isinstance(fn.get("name"), str) and isinstance(schema, dict):
            out.append((fn["name"], schema))
    return out


def shell_call(tools: Any, command: str) -> tuple[str, dict[str, Any]] | None:
    """The agent's shell tool and the arguments that run `command` with it."""
    entries = dict(_tool_entries(tools))
    for name in SHELL_NAMES:
        schema = entries.get(name)
        if schema is None:
            continue
        props = schema.get("properties") or {}
        arg = next((a for a in ("command", "cmd") if a in props), None)
        if arg is None:
            continue
        value: Any = command
        if props[arg].get("type") == "array":
            value = ["bash", "-lc", command]
        args: dict[str, Any] = {arg: value}
        if "description" in props:
            args["description"] = "Write the end-to-end token"
        return name, args
    return None


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
        record = AgentRequest(scope["method"], scope["path"], body)
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
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
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


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


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
    log = _Lines()
    access = logging.getLogger("stream_core.gateway.access")
    access.addHandler(log)
    access.setLevel(logging.INFO)
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
        with GatewayServer(recorder) as gateway:
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
        access.removeHandler(log)
        os.environ.pop(UPSTREAM_KEY_ENV, None)
    outcome.agent_requests = recorder.seen
    outcome.upstream_requests = list(fake.requests)
    outcome.access_log = log.lines
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
        if r.status == 0:
            p.append(f"gateway: no answer to {r.method} {r.path} (it raised)")
        elif r.status != 200:
            p.append(f"gateway answered {r.method} {r.path} with {r.status}: {_clip(r.response)}")
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
        offered = [n for n, _ in _upstream_tools(script.api, ups[0].body)]
        if script.tool[0] not in offered:
            p.append(f"the upstream's first request does not offer {script.tool[0]}: {offered}")
    if len(ups) >= 2:
        body = ups[1].body
        if body is None:
            p.append("the upstream's second request is not JSON")
        else:
            p.extend(SHAPES[script.api](body, script))
    if f"FINAL-{script.nonce}" not in outcome.stdout:
        p.append(f"the agent did not print the final answer; stdout: {_clip(outcome.stdout)}")


def _clip(data: bytes | str, n: int = 300) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _tools_of(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    try:
        body = json.loads(raw)
    except ValueError:
        return []
    return _tool_entries(body.get("tools")) if isinstance(body, dict) else []


def _upstream_tools(api: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if api == "google-generative-ai":
        return [
            (d.get("name", ""), d.get("parameters") or d.get("parametersJsonSchema") or {})
            for t in body.get("tools") or []
            for d in t.get("functionDeclarations") or []
        ]
    return _tool_entries(body.get("tools"))


def _args_match(got: Any, want: dict[str, Any]) -> bool:
    return isinstance(got, dict) and all(got.get(k) == v for k, v in want.items())


def gemini_shape(body: dict[str, Any], script: Script) -> list[str]:
    """Gemini's rules for a tool loop: roles user/model; the model turn's functionCall
    parts (thought signature given back) answered, in the next user turn, by as many
    functionResponse parts of the same names."""
    assert script.tool is not None
    name, args = script.tool
    p: list[str] = []
    contents = body.get("contents") or []
    for i, c in enumerate(contents):
        if c.get("role") not in ("user", "model") or not c.get("parts"):
            p.append(
                f"contents[{i}]: role {c.get('role')!r} with {len(c.get('parts') or [])} parts"
            )
    calls = [
        (i, part)
        for i, c in enumerate(contents)
        for part in c.get("parts") or []
        if "functionCall" in part
    ]
    if len(calls) != 1:
        return [*p, f"{len(calls)} functionCall parts in the history, expected 1"]
    i, part = calls[0]
    call = part["functionCall"]
    if contents[i].get("role") != "model" or call.get("name") != name:
        p.append(
            f"contents[{i}]: the call is {call.get('name')!r} in a {contents[i].get('role')!r} turn"
        )
    if not _args_match(call.get("args"), args):
        p.append(f"contents[{i}]: functionCall args {call.get('args')} are not {args}")
    if part.get("thoughtSignature") != script.signature:
        p.append(
            f"contents[{i}]: the functionCall's thoughtSignature did not come back (Gemini 3: 400)"
        )
    after = contents[i + 1] if i + 1 < len(contents) else {}
    responses = [q["functionResponse"] for q in after.get("parts") or [] if "functionResponse" in q]
    if after.get("role") != "user" or len(responses) != 1:
        p.append(f"contents[{i + 1}]: not a user turn with one functionResponse")
    elif responses[0].get("name") != name or script.token not in json.dumps(responses[0]):
        got = _clip(json.dumps(responses[0]))
        p.append(f"contents[{i + 1}]: the functionResponse lacks the output: {got}")
    return p


def chat_shape(body: dict[str, Any], script: Script) -> list[str]:
    """Chat Completions' rules: an assistant message's tool_calls answered, right after
    it, by one `tool` message per call id; arguments a JSON string; ids as the upstream
    gave them (no gateway carrier left on them)."""
    assert script.tool is not None
    name, args = script.tool
    p: list[str] = []
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            p.append(f"messages[{i}]: role {m.get('role')!r}")
    with_calls = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    if len(with_calls) != 1:
        return [*p, f"{len(with_calls)} assistant messages with tool_calls, expected 1"]
    i = with_calls[0]
    calls = messages[i]["tool_calls"]
    if messages[i].get("role") != "assistant" or len(calls) != 1:
        return [
            *p,
            f"messages[{i}]: {len(calls)} tool calls in a {messages[i].get('role')!r} message",
        ]
    call = calls[0]
    fn = call.get("function") or {}
    if call.get("type") != "function" or fn.get("name") != name:
        p.append(f"messages[{i}].tool_calls[0]: {_clip(json.dumps(call))}")
    try:
        got = json.loads(fn.get("arguments") or "")
    except (TypeError, ValueError):
        got = None
    if not _args_match(got, args):
        p.append(f"messages[{i}].tool_calls[0]: arguments {fn.get('arguments')!r} are not {args}")
    if call.get("id") != script.call_id:
        got, gave = call.get("id"), script.call_id
        p.append(f"messages[{i}].tool_calls[0].id {got!r}, the upstream gave {gave!r}")
    after = messages[i + 1] if i + 1 < len(messages) else {}
    if after.get("role") != "tool" or after.get("tool_call_id") != call.get("id"):
        got = _clip(json.dumps(after))
        p.append(f"messages[{i + 1}]: not the tool message answering {call.get('id')!r}: {got}")
    elif script.token not in json.dumps(after.get("content")):
        p.append(
            f"messages[{i + 1}]: the tool message lacks the output: {_clip(json.dumps(after))}"
        )
    return p


def anthropic_shape(body: dict[str, Any], script: Script) -> list[str]:
    """Anthropic's rules: user and assistant alternate from a user turn; no empty text
    block; the tool_use answered by tool_result blocks first in the next user turn; the
    signed thinking given back before the tool_use."""
    assert script.tool is not None
    name, args = script.tool
    p: list[str] = []
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        if m.get("role") != ("user" if i % 2 == 0 else "assistant"):
            p.append(f"messages[{i}]: role {m.get('role')!r} breaks user/assistant alternation")
        content = m.get("content")
        for j, b in enumerate(content if isinstance(content, list) else []):
            if b.get("type") == "text" and not b.get("text"):
                p.append(f"messages[{i}].content[{j}]: an empty text block")
    uses = [
        (i, j, b)
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), list)
        for j, b in enumerate(m["content"])
        if b.get("type") == "tool_use"
    ]
    if len(uses) != 1:
        return [*p, f"{len(uses)} tool_use blocks in the history, expected 1"]
    i, j, use = uses[0]
    if use.get("name") != name or not _args_match(use.get("input"), args):
        p.append(f"messages[{i}].content[{j}]: {_clip(json.dumps(use))}")
    if use.get("id") != script.call_id:
        p.append(
            f"messages[{i}].content[{j}].id {use.get('id')!r}, the upstream gave {script.call_id!r}"
        )
    blocks = messages[i]["content"]
    thinking = [b for b in blocks if b.get("type") == "thinking"]
    if not thinking or thinking[0].get("signature") != script.signature:
        p.append(f"messages[{i}]: the signed thinking block did not come back")
    elif blocks[0].get("type") != "thinking":
        p.append(f"messages[{i}]: the thinking block is not first")
    after = messages[i + 1].get("content") if i + 1 < len(messages) else None
    first = after[0] if isinstance(after, list) and after else {}
    if first.get("type") != "tool_result" or first.get("tool_use_id") != use.get("id"):
        p.append(
            f"messages[{i + 1}]: does not open with the tool_result: {_clip(json.dumps(after))}"
        )
    elif script.token not in json.dumps(first.get("content")):
        p.append(f"messages[{i + 1}]: the tool_result lacks the output: {_clip(json.dumps(first))}")
    return p


def responses_shape(body: dict[str, Any], script: Script) -> list[str]:
    """Responses' rules: the function_call item (its call_id as the upstream gave it)
    followed by the function_call_output of the same call_id."""
    assert script.tool is not None
    name, args = script.tool
    p: list[str] = []
    items = body.get("input") or []
    calls = [i for i, it in enumerate(items) if it.get("type") == "function_call"]
    if len(calls) != 1:
        return [f"{len(calls)} function_call items in the input, expected 1"]
    i = calls[0]
    call = items[i]
    try:
        got = json.loads(call.get("arguments") or "")
    except (TypeError, ValueError):
        got = None
    if call.get("name") != name or not _args_match(got, args):
        p.append(f"input[{i}]: {_clip(json.dumps(call))}")
    if call.get("call_id") != script.call_id:
        p.append(
            f"input[{i}].call_id {call.get('call_id')!r}, the upstream gave {script.call_id!r}"
        )
    outputs = [it for it in items[i + 1 :] if it.get("type") == "function_call_output"]
    if not outputs or outputs[0].get("call_id") != call.get("call_id"):
        p.append(f"no function_call_output answers {call.get('call_id')!r}")
    elif script.token not in json.dumps(outputs[0].get("output")):
        p.append(f"the function_call_output lacks the output: {_clip(json.dumps(outputs[0]))}")
    return p


SHAPES: dict[str, Callable[[dict[str, Any], Script], list[str]]] = {
    "google-generative-ai": gemini_shape,
    "openai-completions": chat_shape,
    "anthropic-messages": anthropic_shape,
    "openai-responses": responses_shape,
}


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
        "access_log": outcome.access_log,
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


def table(outcomes: list[Outcome]) -> str:
    rows = [("agent", "upstream API", "turns", "requests seen", "seconds", "result")]
    for o in outcomes:
        agent = "Claude Code" if o.run.agent == "claude" else "Codex CLI"
        seen = f"{len(o.agent_requests)} agent->gw, {len(o.upstream_requests)} gw->upstream"
        result = "pass" if o.ok else "FAIL: " + o.problems[0]
        rows.append((agent, o.run.api, str(o.turns), seen, f"{o.seconds:.1f}", result))
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
            print("  stdout: " + _clip(outcome.stdout, 2000))
            print("  stderr: " + _clip(outcome.stderr, 2000))
            for line in outcome.access_log:
                print("  gateway: " + line)
    print()
    print(table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
