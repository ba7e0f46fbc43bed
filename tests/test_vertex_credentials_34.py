"""Claude on Vertex AI's credentials (issue 34, point 8), from the user's side: the access
token from Application Default Credentials is fetched once and kept until it nears expiry
(5 calls, 1 token request), and the limiter keys the calls on the principal and project,
never on the token (27 calls, 1 key), so the call after a 429 waits for it instead of
being sent. Also: a region or location with whitespace around it raises at `stream()`.

google-auth is an optional extra, not installed for the tests: a stand-in `google.auth`
with its API (`default()`, `credentials.refresh(Request())`, `token`, `expiry`,
`service_account_email`) fetches tokens from a loopback token endpoint, as a service
account's key file would from Google's."""

from __future__ import annotations

import datetime
import json
import sys
import threading
import types
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import stream_core
from stream_core import Context, Model, StreamOptions, UserMessage, complete
from stream_core._limits import limiter  # the keys the limiter made: there is no door to them

CONTEXT = Context(messages=[UserMessage(content="Hi.")])
ANSWER = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hello"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
EMAIL = "robot@my-proj.iam.gserviceaccount.com"


class _Google(ThreadingHTTPServer):
    """Google's token endpoint and Vertex AI's `streamRawPredict`, on loopback."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tokens = 0
        self.predictions: list[str] = []  # the bearer token of each call that arrived
        self.limited = 0  # answer this many calls 429 first
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Google

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: bytes, kind: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        server = self.server
        if self.path == "/token":
            with server.lock:
                server.tokens += 1
                n = server.tokens
            body = json.dumps({"access_token": f"ya29.token-{n}", "expires_in": 3600})
            self._answer(200, body.encode(), "application/json")
            return
        with server.lock:
            server.predictions.append(self.headers.get("authorization", ""))
            limited = server.limited > 0
            server.limited -= limited
        if limited:
            error = (
                b'{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}'
            )
            self._answer(429, error, "application/json", retry_after="30")
        else:
            self._answer(200, ANSWER, "text/event-stream")


class _Credentials:
    """google-auth's service-account credentials, as far as stream-core uses them."""

    def __init__(self, info: dict[str, str]) -> None:
        self.service_account_email = info["client_email"]
        self.token_uri = info["token_uri"]
        self.token: str | None = None
        self.expiry: datetime.datetime | None = None

    def refresh(self, request: object) -> None:
        with urllib.request.urlopen(
            urllib.request.Request(self.token_uri, b"", method="POST")
        ) as r:  # noqa: S310 - loopback
            found = json.load(r)
        self.token = found["access_token"]
        now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)  # naive UTC, as google-auth
        self.expiry = now + datetime.timedelta(seconds=found["expires_in"])


def _default(scopes: list[str] | None = None) -> tuple[_Credentials, str]:
    import os

    info = json.loads(Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    return _Credentials(info), info["project_id"]


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[_Google]:
    server = _Google()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    key = tmp_path / "service-account.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account",
                "client_email": EMAIL,
                "project_id": "my-proj",
                "token_uri": server.url + "/token",
            }
        )
    )
    package = types.ModuleType("google")
    package.__path__ = []
    auth = types.ModuleType("google.auth")
    auth.default = _default  # type: ignore[attr-defined]
    transport = types.ModuleType("google.auth.transport")
    requests = types.ModuleType("google.auth.transport.requests")
    requests.Request = object  # type: ignore[attr-defined]
    package.auth = auth  # type: ignore[attr-defined]
    auth.transport = transport  # type: ignore[attr-defined]
    transport.requests = requests  # type: ignore[attr-defined]
    for name, module in {
        "google": package,
        "google.auth": auth,
        "google.auth.transport": transport,
        "google.auth.transport.requests": requests,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    yield server
    server.shutdown()
    server.server_close()


def _claude(server: _Google) -> Model:
    """The catalog's Claude on Vertex, its endpoint template on the loopback host."""
    model = stream_core.get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")
    return model.replace(
        base_url=server.url + "/v1/projects/{project}/locations/{location}/publishers/anthropic"
    )


def _keys(model: Model) -> list[str]:
    return [k for k in limiter._flows if k.startswith(f"{model.provider}|")]


@pytest.mark.anyio
async def test_five_calls_fetch_one_token(google: _Google) -> None:
    model = _claude(google)
    found = [await complete(model, CONTEXT, StreamOptions()) for _ in range(5)]
    assert [m.text() for m in found] == ["Hello"] * 5
    assert google.tokens == 1
    assert google.predictions == ["Bearer ya29.token-1"] * 5
    assert all("ya29" not in k for k in _keys(model))


@pytest.mark.anyio
async def test_a_token_near_its_expiry_is_fetched_again(
    google: _Google, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_core.providers import _vertex

    # Every token is within the margin of its expiry as soon as it is fetched.
    monkeypatch.setattr(_vertex, "REFRESH_MARGIN", 3600.0)
    model = _claude(google)
    for _ in range(3):
        assert (await complete(model, CONTEXT, StreamOptions())).error is None
    assert google.tokens == 3


@pytest.mark.anyio
async def test_the_limiter_keys_calls_on_the_principal_and_project(google: _Google) -> None:
    model = _claude(google)
    for _ in range(27):
        assert (await complete(model, CONTEXT, StreamOptions())).error is None
    keys = _keys(model)
    assert len(keys) == 1
    (key,) = keys
    assert "/projects/my-proj/locations/us-east5/" in key and "ya29" not in key


@pytest.mark.anyio
async def test_the_call_after_a_429_is_not_sent(google: _Google) -> None:
    model = _claude(google)
    google.limited = 1
    first = await complete(model, CONTEXT, StreamOptions(max_retries=0))
    assert first.error is not None and first.error.kind == "rate_limit"
    # The key pauses for the 429's 30 s: a call that will not wait that long is not sent.
    second = await complete(model, CONTEXT, StreamOptions(max_retries=0, max_retry_delay=1))
    assert second.error is not None and second.error.kind == "rate_limit"
    assert "nothing was sent" in second.error.message
    assert len(google.predictions) == 1


# --- a region or location with whitespace around it ----------------------------------------


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[respx.Route]:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "GOOGLE_CLOUD_LOCATION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-proj")
    with respx.mock(assert_all_called=False) as mock:
        yield mock.route().mock(return_value=httpx.Response(400, json={"message": "no"}))


@pytest.mark.parametrize("value", ["us-east-1\n", "us-east-1\r\n", " us-east-1", "us-east-1\t"])
@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_an_aws_region_with_whitespace_around_it_raises_naming_the_variable(
    variable: str, value: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = stream_core.list_models("amazon-bedrock")[0]
    monkeypatch.setenv(variable, value)
    key = "bedrock-api-key-0123456789abcdef"
    with pytest.raises(ValueError, match=variable) as raised:
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=key))
    assert "whitespace" in str(raised.value) and key not in str(raised.value)
    with pytest.raises(ValueError, match=r'extra\["region"\]'):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=key, extra={"region": value}))
    assert sent.calls.call_count == 0


def test_a_vertex_location_with_a_trailing_newline_raises(
    sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5\n")
    model = stream_core.get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_LOCATION"):
        stream_core.stream(model, CONTEXT, StreamOptions())
    assert sent.calls.call_count == 0
