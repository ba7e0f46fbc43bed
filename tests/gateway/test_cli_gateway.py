"""`stream-core gateway` and `stream-core gateway hash-key` from the command line."""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from ops_upstreams import ChatUpstream, GatewayProcess

from stream_core._cli import main
from stream_core.gateway import Upstream, load_config


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """`run` of the server replaced: what it was asked to serve (the config read back)."""
    from stream_core.gateway import _server

    calls: list[dict[str, Any]] = []

    def fake(config: Any, host: str, port: int, workers: int, **kw: Any) -> None:
        calls.append(
            {"config": load_config(config), "host": host, "port": port, "workers": workers, **kw}
        )

    monkeypatch.setattr(_server, "run", fake)
    return calls


def test_hash_key_prints_the_config_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("gk-alice-secret\n"))
    code, out, _ = run(["gateway", "hash-key"], capsys)
    digest = hashlib.sha256(b"gk-alice-secret").hexdigest()
    assert (code, out) == (0, f'sha256 = "{digest}"\n')


def test_hash_key_refuses_an_empty_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    code, out, err = run(["gateway", "hash-key"], capsys)
    assert (code, out) == (2, "") and "no key" in err


def test_quick_flags_make_the_one_model_config(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        [
            "gateway",
            "--model", "claude-sonnet-4-5=google/gemini-2.5-pro",
            "--model", "*=openai/gpt-5",
            "--base-url", "http://127.0.0.1:9/v1",
            "--api-key-env", "MY_KEY",
            "--port", "9001",
            "--workers", "3",
        ],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    (call,) = served
    assert (call["host"], call["port"], call["workers"]) == ("127.0.0.1", 9001, 3)
    assert call["http"] == "h11" and call["access_log"] is True
    models = call["config"].models
    assert models == {
        "claude-sonnet-4-5": Upstream(
            "google/gemini-2.5-pro", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY"
        ),
        "*": Upstream("openai/gpt-5", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY"),
    }


def test_a_bare_model_serves_any_name(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["gateway", "--model", "openai/gpt-5"], capsys)[0] == 0
    assert served[0]["config"].models == {"*": Upstream("openai/gpt-5")}


def test_a_config_file_is_served_as_it_is(
    tmp_path: Path, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gw.toml"
    path.write_text('[models]\n"claude-*" = "anthropic/claude-sonnet-4-5"\n', encoding="utf-8")
    code, _, err = run(
        ["gateway", "--config", str(path), "--http", "httptools", "--no-access-log"], capsys
    )
    assert code == 0, err
    assert served[0]["config"].models == {"claude-*": "anthropic/claude-sonnet-4-5"}
    assert served[0]["http"] == "httptools" and served[0]["access_log"] is False


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["gateway"], "give --config FILE or at least one --model"),
        (["gateway", "--config", "x.toml", "--model", "openai/gpt-5"], "not both"),
        (["gateway", "--model", "claude=gpt-5"], "NAME=PROVIDER/MODEL"),
        (["gateway", "--model", "a=openai/gpt-5", "--model", "a=openai/gpt-5"], "twice"),
        (["gateway", "--model", "a=nobody/no-such-model"], "nobody"),
        (["gateway", "--config", "/nonexistent/gw.toml"], "no such config file"),
        (["gateway", "--base-url", "http://x", "--config", "c.toml"], "go with --model"),
    ],
)
def test_usage_errors_name_the_problem(
    argv: list[str], says: str, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2 and says in err, err
    assert served == []


def test_an_open_gateway_off_loopback_is_warned_about(
    served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["gateway", "--model", "openai/gpt-5", "--host", "0.0.0.0"], capsys)
    assert code == 0 and "warning: the config lists no [keys]" in err
    code, _, err = run(["gateway", "--model", "openai/gpt-5", "--host", "::1"], capsys)
    assert code == 0 and err == ""


def test_a_config_with_a_mistake_is_refused_before_serving(
    tmp_path: Path, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gw.toml"
    path.write_text('[keys.alice]\nsha256 = "abc"\n', encoding="utf-8")
    code, _, err = run(["gateway", "--config", str(path)], capsys)
    assert code == 2 and "keys.alice.sha256" in err
    assert served == []


def test_without_uvicorn_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "stream_core.gateway._server", raising=False)
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    code, _, err = run(["gateway", "--model", "openai/gpt-5"], capsys)
    assert code == 2 and "pip install 'stream-core[gateway]'" in err


@pytest.mark.slow
def test_several_workers_serve_one_port(tmp_path: Path) -> None:
    up = ChatUpstream()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    gw = GatewayProcess(
        ["--model", "m=openai/gpt-4o-mini", "--base-url", up.url, "--workers", "2"],
        {"OPENAI_API_KEY": "sk-vendor-workers-1", "TMPDIR": str(scratch)},
        tmp_path,
    )
    try:
        for _ in range(4):
            r = httpx.post(
                gw.url + "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"] == "x" * 24
        assert httpx.get(gw.url + "/health").json() == {"status": "ok"}
        gw.proc.terminate()
        assert gw.proc.wait(30) == 0
        assert list(scratch.iterdir()) == []  # the quick flags' config file is gone
        output = gw.output()
        assert output.count("POST /v1/chat/completions 200") == 4
        assert output.count("Started server process") == 2
        assert "sk-vendor-workers-1" not in output
    finally:
        gw.stop()
        up.close()
