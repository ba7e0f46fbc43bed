"""What a vendor echoes or garbles, for every registered provider (CONTRACT 4).

- No secret on any surface: a key echoed in the request id header or the served model's
  name is redacted in every event as it arrives, the message's repr, its JSON, the JSONL
  dump and the OpenTelemetry span; a short key (`sk-1234`) quoted in a 401 too.
- Redirects are never followed (the key would go to the new host): the error names the
  Location, on a real loopback server, with the shared client and with an injected one
  that follows redirects.
- An unreadable `Retry-After` is ignored, the status keeps its kind and the vendor's words;
  an infinite one stays finite (the JSONL dump is strict JSON).
- Junk under a stream's content type ends `protocol`, naming what came back, not retried.
- A proxy environment the client cannot use is reported as such, not as `protocol`.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import SocketAttribute, SocketStream

import stream_core
from stream_core import AssistantStreamEvent, dump_messages, event_to_json
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import (
    API_KEY,
    Run,
    apis_under_test,
    contract_context,
    contract_model,
    framing,
    options,
    run_provider,
    text_case,
    vendor_response,
)

APIS = apis_under_test()
# trio is a dev dependency here; a plugin author's install may not have it.
BACKENDS = ["asyncio"] + (["trio"] if importlib.util.find_spec("trio") else [])
SHORT_KEYS = ["sk-1234", "token-1", "EMPTY"]


def _has_otel_sdk() -> bool:
    # find_spec of a submodule imports its parent, which a plugin's venv may not have.
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except ImportError:
        return False


HAS_OTEL = _has_otel_sdk()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every call here runs under asyncio and under trio."""
    return str(request.param)


def _run(api: str, backend: str, responses: Any, **opts: Any) -> tuple[Run, list[str]]:
    """Run, with each event's JSON and repr taken as it arrives (before the end redacts
    anything) and the span's attributes when OpenTelemetry is installed."""
    seen: list[str] = []
    exporter = _exporter()

    async def main() -> Run:
        model = contract_model(api)
        events: list[AssistantStreamEvent] = []
        with anyio.fail_after(20):  # a guard against hangs, not a timing assertion
            async with stream_core.stream(model, contract_context(), options(**opts)) as s:
                async for event in s:
                    events.append(event)
                    seen.append(json.dumps(event_to_json(event)))
                    seen.append(repr(event) + str(event) + repr(event.message))
        return Run(events, s.message, 0, [])

    import respx

    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="contract.test").mock(
            side_effect=responses if callable(responses) else list(responses)
        )
        run = anyio.run(main, backend=backend)
    if exporter is not None:
        for span in exporter.get_finished_spans():
            seen.append(json.dumps(dict(span.attributes or {}), default=str))
            seen.append(str(span.status.description))
        _restore_tracer()
    return run, seen


_saved_tracer: list[Any] = []


def _exporter() -> Any:
    if not HAS_OTEL:
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from stream_core import _otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _saved_tracer.append(_otel._tracer)
    _otel._tracer = provider.get_tracer("stream_core")
    return exporter


def _restore_tracer() -> None:
    from stream_core import _otel

    _otel._tracer = _saved_tracer.pop()


def _jsonl(run: Run) -> str:
    out = io.StringIO()
    dump_messages([run.message], out)
    return out.getvalue()


def _surfaces(run: Run, seen: list[str]) -> str:
    m = run.message
    return "\n".join(
        [*seen, repr(m), str(m), m.model_dump_json(), _jsonl(run)]
        + [json.dumps(event_to_json(e)) for e in run.events]
    )


def _assert_no_key(key: str, text: str) -> None:
    if len(key) >= 8:
        assert key[:8] not in text, "the key (or its head) is shown"
    else:
        found = re.search(r"(?<![A-Za-z0-9_-])" + re.escape(key) + r"(?![A-Za-z0-9_-])", text)
        assert found is None, (
            f"the key is shown: ...{text[max(0, found.start() - 80) : found.end() + 80]}..."
        )


def _echoing(api: str, key: str) -> bytes:
    """The text recording with every served-model field replaced by the key."""
    body = text_case(api).body
    if not framing(api).text_lines:
        return body  # a binary framing: the request id header carries the echo
    return re.sub(
        rb'"(model|modelVersion)"(\s*):(\s*)"[^"]*"',
        lambda m: b'"' + m.group(1) + b'":"' + key.encode() + b'"',
        body,
    )


# --- no secret on any surface -------------------------------------------------------------


@pytest.mark.parametrize("key", [API_KEY, "sk-1234"])
@pytest.mark.parametrize("api", APIS)
def test_a_key_echoed_in_request_id_and_model_is_on_no_surface(
    api: str, key: str, backend: str
) -> None:
    """If this fails: a server echoing the key in `x-request-id` or its `model` field puts
    it in repr, str, event_to_json, the JSONL dump or the span's gen_ai.response.model."""
    response = httpx.Response(
        200,
        headers={
            "content-type": framing(api).media_type,
            "x-request-id": f"req {key}",
            "request-id": f"req {key}",
        },
        content=_echoing(api, key),
    )
    run, seen = _run(api, backend, [response], api_key=key)
    assert_valid_event_stream(run.events)
    assert run.message.stop_reason == "stop", run.message.error
    assert run.message.request_id == "req [redacted]"
    _assert_no_key(key, _surfaces(run, seen))


@pytest.mark.parametrize("key", SHORT_KEYS)
@pytest.mark.parametrize("api", APIS)
def test_a_short_key_quoted_in_a_401_is_redacted(api: str, key: str, backend: str) -> None:
    """If this fails: a local gateway's short key (`sk-1234`) shows in error.message and
    the span's status when the 401 quotes it."""
    body = json.dumps(
        {"error": {"type": "authentication_error", "message": f"Incorrect API key: {key}."}}
    )
    response = httpx.Response(401, headers={"content-type": "application/json"}, content=body)
    run, seen = _run(api, backend, [response], api_key=key)
    error = run.message.error
    assert error is not None and error.kind == "auth" and error.status_code == 401
    assert "Incorrect API key: [redacted]." in error.message
    _assert_no_key(key, _surfaces(run, seen))


def test_a_short_key_is_redacted_only_as_a_whole_token() -> None:
    from stream_core._errors import redact

    text = "key x in x-ray and box, EMPTY body, EMPTYish, token-1 not token-12, (sk-1234)"
    assert redact(text, ("x", "EMPTY", "token-1", "sk-1234")) == (
        "key [redacted] in x-ray and box, [redacted] body, EMPTYish, [redacted] not "
        "token-12, ([redacted])"
    )


# --- redirects are never followed ---------------------------------------------------------


class _Server:
    """A loopback HTTP/1.1 server answering every request with `answer`, keeping each
    request's head."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.port = 0

    async def serve(self, conn: SocketStream) -> None:
        buf = b""
        async with conn:
            try:
                while b"\r\n\r\n" not in buf:
                    buf += await conn.receive()
                self.requests.append(buf.split(b"\r\n\r\n", 1)[0])
                await conn.send(self.answer)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return


@pytest.mark.parametrize("client", ["shared", "injected-following"])
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("api", APIS)
def test_a_redirect_is_reported_never_followed(
    api: str, status: int, client: str, backend: str
) -> None:
    """If this fails: a redirect to another origin re-sends x-api-key, x-goog-api-key,
    api-key or x-amz-security-token to the new host (httpx strips only authorization)."""

    async def main() -> tuple[stream_core.AssistantMessage, _Server, _Server, str]:
        other = _Server(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        async with (
            await anyio.create_tcp_listener(local_host="127.0.0.1") as l2,
            await anyio.create_tcp_listener(local_host="127.0.0.1") as l1,
            anyio.create_task_group() as tg,
        ):
            other.port = l2.extra(SocketAttribute.local_port)
            location = f"http://127.0.0.1:{other.port}/elsewhere/v1"
            first = _Server(
                f"HTTP/1.1 {status} Moved\r\nlocation: {location}\r\n"
                f"content-length: 0\r\n\r\n".encode()
            )
            first.port = l1.extra(SocketAttribute.local_port)
            tg.start_soon(l1.serve, first.serve)
            tg.start_soon(l2.serve, other.serve)
            model = contract_model(api).model_copy(
                update={"base_url": f"http://127.0.0.1:{first.port}"}
            )
            opts: dict[str, Any] = {"max_retries": 2, "headers": {"x-amz-security-token": "tok"}}
            injected = None
            if client != "shared":
                injected = httpx.AsyncClient(follow_redirects=True)
                opts["client"] = injected
            try:
                with anyio.fail_after(20):  # a guard against hangs
                    async with stream_core.stream(model, contract_context(), options(**opts)) as s:
                        message = await s.result()
            finally:
                if injected is not None:
                    await injected.aclose()
                tg.cancel_scope.cancel()
        return message, first, other, location

    message, first, other, location = anyio.run(main, backend=backend)
    assert other.requests == [], "the request (and its credentials) went to the new host"
    assert len(first.requests) == 1, "a redirect is not retried"
    error = message.error
    assert error is not None and error.kind == "invalid_request", error
    assert error.status_code == status and not error.retryable
    assert location in error.message


# --- Retry-After --------------------------------------------------------------------------


def _rate_limited(retry_after: str) -> httpx.Response:
    body = json.dumps({"error": {"type": "rate_limit_error", "message": "slow down, vendor"}})
    return httpx.Response(
        429,
        headers={"content-type": "application/json", "retry-after": retry_after},
        content=body,
    )


UNREADABLE = [
    "30s",
    "soon",
    "0x10",
    "Mon, 99 Foo 2024 00:00:00 GMT",
    "Sat, 29 Feb 2023 10:00:00 GMT",
]


@pytest.mark.parametrize("value", UNREADABLE)
@pytest.mark.parametrize("api", APIS)
def test_an_unreadable_retry_after_is_ignored(api: str, value: str, backend: str) -> None:
    """If this fails: `Retry-After: 30s` turns a 429 into `protocol` with no status, not
    retried, the vendor's message lost."""
    run, _ = _run(api, backend, [_rate_limited(value)])
    error = run.message.error
    assert error is not None and error.kind == "rate_limit", error
    assert error.status_code == 429 and error.retryable and error.retry_after is None
    assert "slow down, vendor" in error.message
    # Retried as if the header were absent (the options' tiny backoff).
    run, _ = _run(
        api,
        backend,
        [_rate_limited(value), vendor_response(api, [text_case(api).body])],
        max_retries=1,
    )
    assert run.message.stop_reason == "stop", run.message.error


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", ["1e309", "inf", "Fri, 31 Dec 9999 23:59:59 GMT"])
@pytest.mark.parametrize("api", APIS)
def test_an_endless_retry_after_stays_finite_and_json(api: str, value: str, backend: str) -> None:
    """If this fails: `Retry-After: 1e309` is dumped as the non-JSON literal `Infinity`."""
    run, _ = _run(api, backend, [_rate_limited(value)], max_retries=2)
    error = run.message.error
    assert error is not None and error.kind == "rate_limit"
    assert error.retry_after is not None and error.retry_after >= 1e6
    assert error.retry_after < float("inf")
    _strict(_jsonl(run))
    _strict(run.message.model_dump_json())


# --- junk under a stream's content type ---------------------------------------------------

JUNK = {
    "random-bytes": bytes(range(256))[::-1] * 4,
    "nginx-502": (
        b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
        b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
        b"</body>\r\n</html>\r\n"
    ),
    "plain-text": b"upstream connect error or disconnect/reset before headers",
    "nuls": b"\x00" * 300,
}


@pytest.mark.parametrize("junk", list(JUNK))
@pytest.mark.parametrize("api", APIS)
def test_junk_with_a_stream_content_type_is_protocol(api: str, junk: str, backend: str) -> None:
    """If this fails: a 200 of junk under the stream's content type ends `network`, is
    retried twice, and the error never shows what came back."""
    calls: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return vendor_response(api, [JUNK[junk]])

    run, _ = _run(api, backend, answer, max_retries=2)
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert error is not None and error.kind == "protocol", error
    assert not error.retryable and len(calls) == 1
    if junk == "nginx-502":
        assert "502 Bad Gateway" in error.message or "<html>" in error.message
    if junk == "plain-text":
        assert "upstream connect error" in error.message


# --- a proxy environment the client cannot use --------------------------------------------


@pytest.mark.parametrize(
    "proxy",
    ["socks5://user:hunter2secret@127.0.0.1:1", "http://[::1", "ftp://user:hunter2secret@h:1"],
)
@pytest.mark.parametrize("api", APIS)
def test_an_unusable_proxy_environment_is_named(
    api: str, proxy: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails: a SOCKS proxy without its library, or a malformed HTTPS_PROXY, ends
    every call `protocol` ("ImportError ..."), as if the vendor were at fault."""
    if proxy.startswith("socks") and importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed: the SOCKS proxy is usable")
    for name in (
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", proxy)

    async def main() -> Run:
        with anyio.fail_after(20):
            return await run_provider(
                api, [vendor_response(api, [text_case(api).body])], opts=options(max_retries=2)
            )

    run = anyio.run(main, backend=backend)
    assert_valid_event_stream(run.events)
    error = run.message.error
    assert error is not None and error.kind == "network", error
    assert not error.retryable and run.calls == 0
    assert "HTTPS_PROXY" in error.message and "proxy" in error.message
    assert "hunter2secret" not in error.message
