"""Processes of `gateway.py`: the vendor, the proxies, their configs, and what /proc says
about them (CPU time, RSS) over their whole process tree.

Every process is started here, recorded by its id and stopped by that id (SIGTERM, then
SIGKILL of the process group it was started in, which holds only what it spawned).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KEY = "sk-bench-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
"""The client key both proxies check (LiteLLM's master key; a gateway key of ours)."""
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid`'s process tree (threads included)."""
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid`'s process tree."""
    total = 0
    for p in tree(pid):
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * _PAGE
        except OSError:
            continue
    return total


class Procs:
    """The processes one run starts, each logged to a file in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{name.replace('/', '-')}.log", "wb")
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        self.started.append(proc)
        return proc

    def vendor(self) -> tuple[subprocess.Popen[bytes], int]:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "gateway_vendor.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self.started.append(proc)
        assert proc.stdout is not None
        return proc, int(proc.stdout.readline())

    def stop(self, proc: subprocess.Popen[bytes], grace: float = 10) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        else:
            try:  # what it spawned, if any of that outlived it
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        if proc in self.started:
            self.started.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self.started):
            self.stop(proc)

    def log(self, name: str, tail: int = 1500) -> str:
        try:
            path = self.folder / f"{name.replace('/', '-')}.log"
            return path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


def wait_ready(port: int, path: str, proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Polls GET `path` until it answers 200 (False: the process died or time ran out)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


# Model names every proxy serves, and the vendor path each goes to (see gateway_vendor.py).
def models(vendor: int, chunks: int, events: int, gap_ms: float) -> dict[str, str]:
    base = f"http://127.0.0.1:{vendor}"
    return {
        "bench": f"{base}/n/{chunks}/v1",
        "bench-paced": f"{base}/p/{events}/{gap_ms:g}/v1",
        "bench-burst": f"{base}/n/{events}/v1",
        "bench-held": f"{base}/h/{chunks}/v1",
    }


def ours_config(folder: Path, routes: dict[str, str]) -> Path:
    lines = ["[models]"]
    for name, url in routes.items():
        lines.append(
            f'"{name}" = {{ model = "openai/gpt-4o", api = "openai-completions", '
            f'base_url = "{url}", api_key_env = "GW_BENCH_KEY" }}'
        )
    path = folder / "gateway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def litellm_config(folder: Path, routes: dict[str, str]) -> Path:
    """LiteLLM's proxy as its docs set it up for one OpenAI-compatible upstream (YAML is a
    superset of JSON, so JSON is written)."""
    config = {
        "model_list": [
            {
                "model_name": name,
                "litellm_params": {"model": "openai/gpt-4o", "api_base": url, "api_key": "sk-b"},
            }
            for name, url in routes.items()
        ],
        "litellm_settings": {"drop_params": True, "telemetry": False},
    }
    path = folder / "litellm.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


LITELLM_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price map at start
    "LITELLM_TELEMETRY": "False",
    "NO_PROXY": "*",
}


def gateway_cli() -> list[str] | None:
    """`stream-core gateway`'s command line when the CLI has it, else None."""
    exe = shutil.which("stream-core", path=str(ROOT / ".venv" / "bin"))
    if exe is None:
        return None
    done = subprocess.run([exe, "gateway", "--help"], capture_output=True, text=True)
    return [exe, "gateway"] if done.returncode == 0 else None


def machine() -> dict[str, str]:
    info = {"cpus": str(os.cpu_count())}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["load"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    info["python"] = sys.version.split()[0]
    info["kernel"] = os.uname().release
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    info["stream-core"] = rev.stdout.strip()
    return info


def version(python: str, module: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({module!r}))"
    if not os.access(python, os.X_OK):
        return "absent"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "?"
