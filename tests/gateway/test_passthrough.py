"""Same dialect, byte-faithful: a client whose upstream speaks its own API gets that
upstream's bytes, and the upstream gets the client's body, through the gateway's routes,
retries and accounting (issue 36, point 2).

Each test runs the gateway on uvicorn (loopback), a fake vendor answering from the
contract recordings, and the official SDK as the client.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import openai
import pytest
import uvicorn

from stream_core.gateway import GatewayConfig, Upstream, create_app
from stream_core.gateway._tee import Tee
from stream_core.provider import CARRIER_PREFIX
from stream_core.testing import FakeVendor, fake_vendor

FIXTURES = Path(__file__).parents[2] / "contract_tests" / "fixtures"
VENDOR_KEY = "sk-vendor-0123456789abcdef"
CLIENT_KEY = "sk-client-fedcba9876543210"


def recording(api: str, name: str) -> Path:
    return FIXTURES / api / f"{name}.body"


def expected_usage(api: str, name: str) -> dict[str, int]:
    meta = json.loads((FIXTURES / api / f"{name}.json").read_text())
    usage: dict[str, int] = meta["expect"]["usage"]
    return usage


def answer_file(tmp_path: Path, name: str, status: int, payload: Any) -> Path:
    """A recording of a whole JSON answer (an error, or a non-streamed message)."""
    body = tmp_path / f"{name}.body"
    body.write_bytes(json.dumps(payload).encode())
    meta = {"status": status, "headers": {"content-type": "application/json", "retry-after": "0"}}
    (tmp_path / f"{name}.json").write_text(json.dumps(meta))
    return body


RATE_LIMITED = {
    "anthropic": {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "per-minute rate limit exceeded"},
    },
    "openai": {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    },
}


class AccessLog(logging.Handler):
    """The gateway's access-log lines, as a user's log handler sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def usage(self, path: str) -> dict[str, int]:
        """The usage the line of the latest request to `path` reports (waited for: the
        line is written once the client has its last byte)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in reversed(self.lines):
                if f" {path} " in line:
                    found = re.search(
                        r"in=(\d+) out=(\d+) cache_read=(\d+) cache_write=(\d+)", line
                    )
                    assert found, line
                    keys = ("input", "output", "cache_read", "cache_write")
                    return dict(zip(keys, map(int, found.groups()), strict=True))
            time.sleep(0.01)
        raise AssertionError(f"no access-log line for {path}: {self.lines}")


@pytest.fixture
def access_log() -> Iterator[AccessLog]:
    handler = AccessLog()
    logger = logging.getLogger("stream_core.gateway.access")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture(autouse=True)
def _vendor_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", VENDOR_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", VENDOR_KEY)


@contextmanager
def gateway(config: GatewayConfig) -> Iterator[str]:
    """The gateway on uvicorn, on a free loopback port; its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config), host="127.0.0.1", port=0, log_level="warning", access_log=False
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class Sent:
    """The request bodies an SDK sent (a request hook of its HTTP client, `httpx2`)."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: httpx2.Request) -> None:
        self.bodies.append(json.loads(request.read()))
        self.headers.append({k.lower(): v for k, v in request.headers.items()})

    def client(self) -> httpx2.Client:
        return httpx2.Client(event_hooks={"request": [self]})


def upstream_json(vendor: FakeVendor, n: int = -1) -> Any:
    return vendor.requests[n].body


# --- Anthropic: Claude Code's requests ----------------------------------------------------

CLAUDE_CODE_BETAS = [
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-management-2025-06-27",
    "fine-grained-tool-streaming-2025-05-14",
]


def claude_code_request(stream: bool = True) -> dict[str, Any]:
    """What Claude Code sends, in shape: cache_control on the system prompt, on a tool and
    on the last user block, metadata, thinking, context_management, a server tool, and a
    top-level field no SDK knows yet (through `extra_body`)."""
    return {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "stream": stream,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
            {
                "type": "text",
                "text": "You are an interactive CLI tool that helps users with software tasks.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>cwd: /repo</system-reminder>"},
                    {
                        "type": "text",
                        "text": "List the files here.",
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            }
        ],
        "tools": [
            {
                "name": "Bash",
                "description": "Executes a bash command.",
                "input_schema": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                    "additionalProperties": False,
                    "$schema": "http://json-schema.org/draft-07/schema#",
                },
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "metadata": {"user_id": "user_4f2a_account__session_9e1c"},
        "thinking": {"type": "enabled", "budget_tokens": 31999},
    }


EXTRA_BODY = {
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "a_field_from_2027": {"keep": ["me", 1, None, 2.5]},
}


def unnamed(answer: bytes) -> bytes:
    """An Anthropic answer with its first `model` (message_start's, or the Message's) left
    out: the one value the gateway says as the client's name (Claude Code keeps an answer's
    signed thinking only while that model is the one it asked for)."""
    first = re.search(rb'"model"\s*:\s*("(?:[^"\\]|\\.)*")', answer)
    return answer if first is None else answer[: first.start(1)] + b"?" + answer[first.end(1) :]


def anthropic_config(url: str) -> GatewayConfig:
    return GatewayConfig(
        models={"claude-sonnet-4-5-20250929": Upstream("anthropic/claude-sonnet-4-5", base_url=url)}
    )


def anthropic_client(base: str, sent: Sent) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=base, api_key=CLIENT_KEY, max_retries=0, http_client=sent.client()
    )


def test_claude_code_request_reaches_anthropic_as_sent_and_its_bytes_come_back(
    access_log: AccessLog,
) -> None:
    name = "vercel-ai__anthropic-code-execution-20260120-prompt-cache.1"
    body = recording("anthropic-messages", name)
    sent = Sent()
    with fake_vendor(scenarios={"claude-sonnet-4-5": [body]}) as vendor:
        with gateway(anthropic_config(vendor.url)) as base:
            with anthropic_client(base, sent) as client:
                request = claude_code_request()
                with client.beta.messages.with_streaming_response.create(
                    **{k: v for k, v in request.items() if k != "stream"},
                    stream=True,
                    betas=CLAUDE_CODE_BETAS,
                    extra_body=EXTRA_BODY,
                ) as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    got = b"".join(response.iter_bytes())
                usage = access_log.usage("/v1/messages")
    # Byte for byte, but for message_start's model: the name the client asked for (Claude
    # Code drops an answer's signed thinking when it names another model).
    recorded = body.read_bytes()
    first = re.search(rb'"model"\s*:\s*("[^"]*")', recorded)
    assert first is not None
    said = b'"claude-sonnet-4-5-20250929"'
    assert got == recorded[: first.start(1)] + said + recorded[first.end(1) :]
    [upstream] = vendor.requests
    assert sent.bodies[0] == {**request, **EXTRA_BODY}
    assert upstream.body == {**sent.bodies[0], "model": "claude-sonnet-4-5"}
    # The JSON's key order too: the body is the client's, not rebuilt.
    assert list(upstream.body) == list(sent.bodies[0])
    assert upstream.headers["anthropic-beta"] == ",".join(CLAUDE_CODE_BETAS)
    assert upstream.headers["anthropic-version"] == sent.headers[0]["anthropic-version"]
    assert upstream.headers["x-api-key"] == VENDOR_KEY
    assert CLIENT_KEY not in json.dumps(upstream.headers)
    want = expected_usage("anthropic-messages", name)
    assert usage == {k: want[k] for k in usage}


def test_the_sdk_accumulates_the_upstreams_message_with_server_tools() -> None:
    name = "pydantic-ai__test_anthropic_model_web_search_tool_stream.0"
    sent = Sent()
    with fake_vendor(scenarios={"claude-sonnet-4-5": [recording("anthropic-messages", name)]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, sent) as client:
                request = claude_code_request()
                del request["stream"]
                with client.beta.messages.stream(**request, betas=CLAUDE_CODE_BETAS) as s:
                    final = s.get_final_message()
    kinds = [block.type for block in final.content]
    assert "server_tool_use" in kinds and "web_search_tool_result" in kinds
    want = expected_usage("anthropic-messages", name)
    assert final.usage.input_tokens == want["input"]
    assert final.usage.output_tokens == want["output"]
    assert v.requests[0].body == {**sent.bodies[0], "model": "claude-sonnet-4-5"}


def test_no_beta_header_from_the_client_means_none_upstream() -> None:
    name = "llm-anthropic__test_prompt.0"
    sent = Sent()
    with fake_vendor(scenarios={"claude-sonnet-4-5": [recording("anthropic-messages", name)]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, sent) as client:
                with client.messages.stream(
                    model="claude-sonnet-4-5-20250929",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "Hi"}],
                ) as s:
                    s.get_final_message()
    assert "anthropic-beta" not in v.requests[0].headers
    assert v.requests[0].body == {**sent.bodies[0], "model": "claude-sonnet-4-5"}


def test_a_request_the_codec_cannot_read_is_still_forwarded() -> None:
    name = "llm-anthropic__test_prompt.0"
    sent = Sent()
    strange = {
        "role": "user",
        "content": [{"type": "hologram_2027", "frames": [1, 2, 3]}, {"type": "text", "text": "Hi"}],
    }
    with fake_vendor(scenarios={"claude-sonnet-4-5": [recording("anthropic-messages", name)]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, sent) as client:
                with client.messages.with_streaming_response.create(
                    model="claude-sonnet-4-5-20250929",
                    max_tokens=100,
                    messages=[strange],  # type: ignore[list-item]
                    stream=True,
                ) as response:
                    got = b"".join(response.iter_bytes())
    assert got == recording("anthropic-messages", name).read_bytes()
    assert v.requests[0].body["messages"] == [strange]


def test_a_non_streamed_answer_is_the_upstreams_json(tmp_path: Path, access_log: AccessLog) -> None:
    message = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Hello!"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 6,
            "cache_read_input_tokens": 30,
            "cache_creation_input_tokens": 4,
        },
    }
    answer = answer_file(tmp_path, "whole", 200, message)
    sent = Sent()
    with fake_vendor(scenarios={"claude-sonnet-4-5": [answer]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, sent) as client:
                request = claude_code_request(stream=False)
                del request["stream"]
                request.update(max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048})
                raw = client.beta.messages.with_raw_response.create(
                    **request, betas=CLAUDE_CODE_BETAS, extra_body=EXTRA_BODY
                )
                usage = access_log.usage("/v1/messages")
                assert raw.parse().content[0].text == "Hello!"  # type: ignore[union-attr]
    assert raw.http_response.content == answer.read_bytes()
    assert "stream" not in v.requests[0].body
    assert v.requests[0].body == {**sent.bodies[0], "model": "claude-sonnet-4-5"}
    assert usage == {"input": 12, "output": 6, "cache_read": 30, "cache_write": 4}


def test_a_refusal_before_content_is_the_upstreams_own_stream() -> None:
    name = "llm-anthropic__test_refusal_raises.0"
    body = recording("anthropic-messages", name)
    with fake_vendor(scenarios={"claude-sonnet-4-5": [body]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, Sent()) as client:
                with client.messages.with_streaming_response.create(
                    model="claude-sonnet-4-5-20250929",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "..."}],
                    stream=True,
                ) as response:
                    assert response.status_code == 200
                    got = b"".join(response.iter_bytes())
    assert unnamed(got) == unnamed(body.read_bytes())


def test_a_stream_cut_after_content_ends_with_the_dialects_error_event() -> None:
    body = recording("anthropic-messages", "synthetic-anthropic-eof-mid-text")
    with fake_vendor(scenarios={"claude-sonnet-4-5": [body]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, Sent()) as client:
                with client.messages.with_streaming_response.create(
                    model="claude-sonnet-4-5-20250929",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "Hi"}],
                    stream=True,
                ) as response:
                    got = b"".join(response.iter_bytes())
                with pytest.raises(anthropic.APIStatusError):
                    with client.messages.stream(
                        model="claude-sonnet-4-5-20250929",
                        max_tokens=100,
                        messages=[{"role": "user", "content": "Hi"}],
                    ) as s:
                        s.get_final_message()
    original = body.read_bytes()
    assert got.startswith(original)
    tail = got[len(original) :]
    assert tail.startswith(b"event: error\ndata: ") and tail.endswith(b"\n\n")
    error = json.loads(tail.split(b"data: ", 1)[1])
    assert error["type"] == "error" and error["error"]["type"]


# --- every dialect: routes, rate limits ---------------------------------------------------


def _anthropic_call(base: str, sent: Sent, stream: bool = True) -> bytes:
    with anthropic_client(base, sent) as client:
        with client.messages.with_streaming_response.create(
            model="front",
            max_tokens=4096,
            messages=[{"role": "user", "content": "Hi"}],
            extra_body={"a_field_from_2027": True},
            **({"stream": True} if stream else {}),  # type: ignore[arg-type]
        ) as response:
            return b"".join(response.iter_bytes())


def _openai(base: str, sent: Sent) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base + "/v1", api_key=CLIENT_KEY, max_retries=0, http_client=sent.client()
    )


def _responses_call(base: str, sent: Sent, stream: bool = True) -> bytes:
    with _openai(base, sent) as client:
        with client.responses.with_streaming_response.create(
            model="front",
            input=[{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
            store=False,
            include=["reasoning.encrypted_content"],
            reasoning={"effort": "low", "summary": "auto"},
            prompt_cache_key="session-7",
            tools=[
                {
                    "type": "function",
                    "name": "shell",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                    "strict": False,
                }
            ],
            extra_body={"a_field_from_2027": True},
            **({"stream": True} if stream else {}),  # type: ignore[arg-type]
        ) as response:
            return b"".join(response.iter_bytes())


def _chat_call(base: str, sent: Sent, stream: bool = True, usage: bool = False) -> bytes:
    with _openai(base, sent) as client:
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if usage else {}
        with client.chat.completions.with_streaming_response.create(
            model="front",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
            user="u-1",
            service_tier="default",
            extra_body={"a_field_from_2027": True},
            **({"stream": True} if stream else {}),
            **extra,
        ) as response:
            return b"".join(response.iter_bytes())


@dataclass(frozen=True)
class Case:
    """One dialect's side of the tests: two catalog models of its API (a route's two
    deployments), the path under the fake vendor, a streamed and a whole recording, its
    error shape, and the client's call."""

    models: tuple[str, str]
    api: str | None
    path: str
    streamed: str
    whole: str
    shape: str
    call: Callable[..., bytes]

    def ids(self) -> tuple[str, str]:
        first, second = (m.split("/", 1)[1] for m in self.models)
        return first, second


DIALECTS = {
    "anthropic-messages": Case(
        ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5"),
        None,
        "",
        "vercel-ai__anthropic-code-execution-20260120-prompt-cache.1",
        "synthetic-anthropic-answer",
        "anthropic",
        _anthropic_call,
    ),
    "openai-responses": Case(
        ("openai/gpt-5", "openai/gpt-5-mini"),
        "openai-responses",
        "/v1",
        "pydantic-ai__test_openai_responses_stream.0",
        "synthetic-responses-answer",
        "openai",
        _responses_call,
    ),
    "openai-completions": Case(
        ("openai/gpt-5", "openai/gpt-5-mini"),
        None,
        "/v1",
        "vercel-ai__openai-text",
        "synthetic-openai-answer",
        "openai",
        _chat_call,
    ),
}


PATHS = {
    "anthropic-messages": "/v1/messages",
    "openai-responses": "/v1/responses",
    "openai-completions": "/v1/chat/completions",
}


def _route_config(dialect: str, url: str, deployments: int) -> GatewayConfig:
    case = DIALECTS[dialect]
    ups = [Upstream(m, api=case.api, base_url=url + case.path) for m in case.models[:deployments]]
    return GatewayConfig(models={"front": "route:fleet"}, routes={"fleet": ups})


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_route_falls_over_on_429_and_the_client_sees_only_the_second_answer(
    dialect: str, tmp_path: Path, access_log: AccessLog
) -> None:
    case = DIALECTS[dialect]
    first, second = case.ids()
    name = case.streamed
    limited = answer_file(tmp_path, "limited", 429, RATE_LIMITED[case.shape])
    body = recording(dialect, name)
    sent = Sent()
    scenarios = {first: [limited], second: [body]}
    with fake_vendor(scenarios=scenarios) as vendor:
        with gateway(_route_config(dialect, vendor.url, 2)) as base:
            got = case.call(base, sent)
            usage = access_log.usage(PATHS[dialect])
    [client_body] = sent.bodies
    assert [r.model for r in vendor.requests] == [first, second]
    assert [r.status for r in vendor.requests] == [429, 200]
    for request, model in zip(vendor.requests, (first, second), strict=True):
        forwarded = request.body
        if dialect == "openai-completions":
            # Asked for the gateway's own accounting; the usage chunk is not forwarded.
            assert forwarded.pop("stream_options") == {"include_usage": True}
        assert forwarded == {**client_body, "model": model}
        assert CLIENT_KEY not in json.dumps(request.headers)
    original = body.read_bytes()
    if dialect == "openai-completions":
        assert got == _without_usage_chunk(original)
    elif dialect == "anthropic-messages":
        assert unnamed(got) == unnamed(original)
    else:
        assert got == original
    want = expected_usage(dialect, name)
    assert usage == {k: want[k] for k in usage}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_429_with_nothing_left_to_try_is_the_upstreams_own(dialect: str, tmp_path: Path) -> None:
    case = DIALECTS[dialect]
    only, _ = case.ids()
    limited = answer_file(tmp_path, "limited", 429, RATE_LIMITED[case.shape])
    with fake_vendor(scenarios={only: [limited] * 3}) as vendor:
        with gateway(_route_config(dialect, vendor.url, 1)) as base:
            error = anthropic.RateLimitError if case.shape == "anthropic" else openai.RateLimitError
            with pytest.raises(error) as caught:
                case.call(base, Sent())
    assert caught.value.response.status_code == 429
    assert caught.value.response.json() == RATE_LIMITED[case.shape]
    assert caught.value.response.headers["retry-after"] == "0"
    assert all(r.status == 429 for r in vendor.requests) and len(vendor.requests) == 3


def test_chat_usage_asked_by_the_client_comes_back_as_sent(access_log: AccessLog) -> None:
    name = "vercel-ai__openai-text"
    body = recording("openai-completions", name)
    sent = Sent()
    config = GatewayConfig(
        models={"front": Upstream("openai/gpt-4.1-nano", base_url="")},
    )
    with fake_vendor(scenarios={"gpt-4.1-nano": [body, body]}) as vendor:
        config.models["front"] = Upstream("openai/gpt-4.1-nano", base_url=vendor.url + "/v1")
        with gateway(config) as base:
            asked = _chat_call(base, sent, usage=True)
            usage = access_log.usage("/v1/chat/completions")
            unasked = _chat_call(base, sent)
    assert asked == body.read_bytes()
    assert unasked == _without_usage_chunk(body.read_bytes())
    assert unasked.endswith(b"data: [DONE]\n\n")
    assert vendor.requests[0].body == {**sent.bodies[0], "model": "gpt-4.1-nano"}
    want = expected_usage("openai-completions", name)
    assert usage == {k: want[k] for k in usage}


def _without_usage_chunk(body: bytes) -> bytes:
    frames = re.findall(rb"(?s).*?\n\n", body)
    assert b"".join(frames) == body
    return b"".join(f for f in frames if b'"choices":[]' not in f)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_non_streamed_call_gets_the_upstreams_json_unchanged(
    dialect: str, access_log: AccessLog
) -> None:
    case = DIALECTS[dialect]
    first, _ = case.ids()
    body = recording(dialect, case.whole)
    sent = Sent()
    with fake_vendor(scenarios={first: [body]}) as vendor:
        with gateway(_route_config(dialect, vendor.url, 1)) as base:
            got = case.call(base, sent, stream=False)
            usage = access_log.usage(PATHS[dialect])
    if dialect == "anthropic-messages":
        assert unnamed(got) == unnamed(body.read_bytes())
    else:
        assert got == body.read_bytes()
    assert "stream" not in vendor.requests[0].body
    assert vendor.requests[0].body == {**sent.bodies[0], "model": first}
    want = expected_usage(dialect, case.whole)
    assert usage == {k: want[k] for k in usage}


def test_an_error_event_before_content_falls_over_and_its_bytes_stay_behind() -> None:
    """A 200 whose stream says `overloaded_error` before any content: the route moves on,
    and the client sees the second deployment's bytes only."""
    case = DIALECTS["anthropic-messages"]
    first, second = case.ids()
    overloaded = recording("anthropic-messages", "synthetic-anthropic-error-event")
    body = recording("anthropic-messages", case.streamed)
    with fake_vendor(scenarios={first: [overloaded], second: [body]}) as vendor:
        with gateway(_route_config("anthropic-messages", vendor.url, 2)) as base:
            got = _anthropic_call(base, Sent())
    assert [(r.model, r.status) for r in vendor.requests] == [(first, 200), (second, 200)]
    assert unnamed(got) == unnamed(body.read_bytes())


def test_a_history_with_a_state_carrier_takes_the_translated_path() -> None:
    """An earlier turn served by another vendor left a carrier in the history: it never
    reaches Anthropic (the translated path takes it out)."""
    name = "llm-anthropic__test_prompt.0"
    carrier = {"type": "redacted_thinking", "data": CARRIER_PREFIX + "bm90LWEtcmVhbC1vbmU"}
    messages: list[Any] = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello."}, carrier]},
        {"role": "user", "content": "Again"},
    ]
    with fake_vendor(scenarios={"claude-sonnet-4-5": [recording("anthropic-messages", name)]}) as v:
        with gateway(anthropic_config(v.url)) as base:
            with anthropic_client(base, Sent()) as client:
                with client.messages.stream(
                    model="claude-sonnet-4-5-20250929", max_tokens=100, messages=messages
                ) as s:
                    s.get_final_message()
    forwarded = json.dumps(v.requests[0].body)
    assert CARRIER_PREFIX not in forwarded and "Again" in forwarded


# --- the tee ------------------------------------------------------------------------------


def test_the_tee_sends_whole_frames_and_drops_a_replaced_attempts_bytes() -> None:
    async def main() -> None:
        tee = Tee({"anthropic-beta": None, "anthropic-version": "2026-10-21"})
        request = httpx.Request(
            "POST", "http://127.0.0.1/v1/messages", headers={"anthropic-beta": "x"}
        )
        first = tee.begin(request)
        assert first is not None
        assert "anthropic-beta" not in request.headers
        assert request.headers["anthropic-version"] == "2026-10-21"
        first.pending += b"event: error\ndata: {}\n\n"
        second = tee.begin(request)
        assert second is not None and not first.pending and not first.live
        second.pending += b"event: a\ndata: 1\n\nevent: b\nda"
        assert tee.take() == b"event: a\ndata: 1\n\n"
        assert tee.take() == b""
        second.pending += b"ta: 2\n\n"
        assert tee.take() == b"event: b\ndata: 2\n\n"
        tee.committed = True
        assert tee.begin(request) is None and tee.current is second

    anyio.run(main)


def test_the_tee_leaves_out_the_usage_chunk_the_gateway_asked_for() -> None:
    async def main() -> None:
        tee = Tee({}, drop_usage_chunk=True)
        attempt = tee.begin(httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))
        assert attempt is not None
        attempt.pending += (
            b'data: {"choices":[{"delta":{"content":"Hi"}}],"usage":null}\n\n'
            b'data: {"choices": [], "usage": {"prompt_tokens": 3}}\n\n'
            b"data: [DONE]\n\n"
        )
        assert tee.take() == (
            b'data: {"choices":[{"delta":{"content":"Hi"}}],"usage":null}\n\ndata: [DONE]\n\n'
        )

    anyio.run(main)


@pytest.mark.anyio
async def test_mounted_in_process_on_either_event_loop() -> None:
    """The ASGI app mounted in a user's own server, under asyncio or trio."""
    body = recording("anthropic-messages", "llm-anthropic__test_tools.0")
    request = {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 1000,
        "stream": True,
        "messages": [{"role": "user", "content": "Two pelican names"}],
        "a_field_from_2027": 1,
    }
    with fake_vendor(scenarios={"claude-sonnet-4-5": [body]}) as vendor:
        app = create_app(anthropic_config(vendor.url))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            response = await client.post(
                "/v1/messages", json=request, headers={"anthropic-version": "2023-06-01"}
            )
    assert response.status_code == 200
    assert unnamed(response.content) == unnamed(body.read_bytes())
    assert vendor.requests[0].body == {**request, "model": "claude-sonnet-4-5"}


def test_a_client_that_goes_away_ends_the_upstream_call(access_log: AccessLog) -> None:
    body = recording(
        "anthropic-messages", "pydantic-ai__test_anthropic_model_thinking_part_stream.0"
    )
    with fake_vendor(scenarios={"claude-sonnet-4-5": [body]}, delay=0.05) as vendor:
        with gateway(anthropic_config(vendor.url)) as base:
            with anthropic_client(base, Sent()) as client:
                with client.messages.with_streaming_response.create(
                    model="claude-sonnet-4-5-20250929",
                    max_tokens=4096,
                    messages=[{"role": "user", "content": "Think"}],
                    stream=True,
                ) as response:
                    first = next(response.iter_bytes())
            deadline = time.monotonic() + 10
            while not any("/v1/messages" in line for line in access_log.lines):
                assert time.monotonic() < deadline
                time.sleep(0.01)
    assert unnamed(body.read_bytes()).startswith(unnamed(first))
    [line] = [line for line in access_log.lines if "/v1/messages" in line]
    assert "client_disconnected" in line
