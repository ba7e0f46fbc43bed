"""Vendor bytes are untrusted, through the gateway too (issue 36): whatever an upstream of
any of the eight wire APIs sends (a body cut anywhere, a connection reset, junk lines, a
value of any JSON type in any field, huge numbers in its usage, an error event after
content, an empty 200, an HTML error page), the client gets either the dialect's HTTP
error before any content, or a stream that ends with exactly one terminal event of its
dialect (Anthropic `message_stop` or `error`; Responses `response.completed`,
`incomplete` or `failed`; Chat Completions `[DONE]` or an error chunk) that the official
SDK reads to its end or to its own API error; the gateway logs one access line and no
exception leaves the app.

Each upstream's answer starts as `vendor_bytes` of a scripted turn (text, thinking with a
signature, a tool call, usage with cache reads and writes) and is mutated.
"""

from __future__ import annotations

import json
import os
import random
import struct
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hostile_support import (
    RESET,
    UPSTREAMS,
    VENDOR_ENV,
    Answer,
    GatewayServer,
    RawUpstream,
    check_error,
    check_stream,
    upstream,
)
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from stream_core import (
    AssistantMessage,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from stream_core.gateway import GatewayConfig
from stream_core.gateway._exchange import Exchange
from stream_core.testing import vendor_bytes
from stream_core.testing._frames import event_stream_frame
from stream_core.testing._synthesize import APIS

EXAMPLES = int(os.environ.get("STREAM_CORE_FUZZ_EXAMPLES", "150"))
RETRIES: list[bool] = []
"""Set (by a test) for the gateway to retry its upstream calls as it does by default."""
DIALECTS = ("anthropic-messages", "openai-responses", "openai-completions")
PATHS = {
    "anthropic-messages": "/v1/messages",
    "openai-responses": "/v1/responses",
    "openai-completions": "/v1/chat/completions",
}


def _message(content: list[Any], stop: Any = "stop", error: StreamError | None = None) -> Any:
    usage = Usage(input=100, output=20, cache_read=50, cache_write=10)
    return AssistantMessage(
        api="faux", provider="faux", model="m", content=content, usage=usage,
        stop_reason=stop, error=error,
    )  # fmt: skip


TURNS = {
    "tool": _message(
        [
            ThinkingContent(thinking="Let me look.", signature="sig-1"),
            TextContent(text="Checking."),
            ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
        ],
        "tool_use",
    ),
    "text": _message([TextContent(text="It is sunny in Paris.")]),
    "error_after_content": _message(
        [TextContent(text="It is")], "error", StreamError(kind="overloaded", message="busy")
    ),
}
"""What the upstream says before the mutations: every kind of event of its API."""


def request(api: str, stream: bool = True) -> dict[str, Any]:
    """A client's request in dialect `api`."""
    if api == "anthropic-messages":
        return {
            "model": "m", "max_tokens": 256, "stream": stream,
            "messages": [{"role": "user", "content": "The weather in Paris?"}],
        }  # fmt: skip
    if api == "openai-responses":
        return {"model": "m", "stream": stream, "input": "The weather in Paris?"}
    return {
        "model": "m", "stream": stream,
        "messages": [{"role": "user", "content": "The weather in Paris?"}],
    }  # fmt: skip


# --- the upstream's bytes, mutated -----------------------------------------------------------


def split(api: str, body: bytes) -> list[bytes]:
    """An answer's frames: SSE events, NDJSON lines, AWS event-stream messages."""
    media = APIS[api][1]
    if media == "application/vnd.amazon.eventstream":
        out, at = [], 0
        while at + 4 <= len(body):
            size = struct.unpack(">I", body[at : at + 4])[0]
            out.append(body[at : at + size])
            at += size
        return out
    if media == "application/x-ndjson":
        return [line + b"\n" for line in body.split(b"\n") if line]
    return [frame + b"\n\n" for frame in body.split(b"\n\n") if frame.strip()]


def _event_stream(frame: bytes) -> tuple[str, bytes]:
    """An AWS event-stream message's event type and payload."""
    headers_size = struct.unpack(">I", frame[4:8])[0]
    headers, payload = frame[12 : 12 + headers_size], frame[12 + headers_size : -4]
    at, event = 0, ""
    while at < len(headers):
        size = headers[at]
        name = headers[at + 1 : at + 1 + size].decode()
        at += 1 + size + 1  # the name, then the value's type (7: a string)
        length = struct.unpack(">H", headers[at : at + 2])[0]
        value = headers[at + 2 : at + 2 + length].decode()
        at += 2 + length
        if name == ":event-type":
            event = value
    return event, payload


def edit_json(api: str, frame: bytes, change: Any) -> bytes:
    """`frame` with its JSON (`data:` line, NDJSON line or event payload) passed through
    `change` (which edits it in place or returns a replacement)."""
    media = APIS[api][1]
    if media == "application/vnd.amazon.eventstream":
        event, payload = _event_stream(frame)
        value = json.loads(payload)
        value = change(value) or value
        return event_stream_frame(event, json.dumps(value).encode())
    if media == "application/x-ndjson":
        value = json.loads(frame)
        return json.dumps(change(value) or value).encode() + b"\n"
    lines = frame.split(b"\n")
    for n, line in enumerate(lines):
        if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
            value = json.loads(line[5:])
            lines[n] = b"data: " + json.dumps(change(value) or value).encode()
            break
    return b"\n".join(lines)


_HUGE = [10**400, -(10**400), 2**63, 2**64 + 1, -1, 1e308, -1e308, 5e-324, 0.5]
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(_HUGE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "\ud800", "a\udfffb", "\x00", "x" * 5000])
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*here, i))
    return out


def _any_value(data: st.DataObject) -> Any:
    def change(value: Any) -> Any:
        seed = data.draw(st.integers(0, 2**32), label="seed")
        where = random.Random(seed).choice(_paths(value))  # any path alike
        note(f"path {where}")
        new = data.draw(json_values, label="value")
        if not where:
            return new
        parent = value
        for part in where[:-1]:
            parent = parent[part]
        if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = new
        return value

    return change


def _huge_usage(data: st.DataObject) -> Any:
    huge: Any = data.draw(st.sampled_from([*_HUGE, "12", None, [], {}]), label="usage")

    def change(value: Any) -> None:
        """Every count of usage (under a `usage` key, or a `*token*` / `*count*` one)."""
        stack = [(value, False)]
        while stack:
            v, under = stack.pop()
            items = (
                v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
            )
            for k, x in list(items):
                name = str(k).lower()
                counted = under or "usage" in name
                if isinstance(x, int) and not isinstance(x, bool):
                    if counted or "token" in name or "count" in name:
                        v[k] = huge
                elif isinstance(x, dict | list):
                    stack.append((x, counted))

    return change


JUNK = [
    b"garbage\n",
    b"data: {not json\n\n",
    b"\x00\xff\xfe\n\n",
    b": a comment\n\n",
    b"event: surprise\ndata: {}\n\n",
    b"data: [DONE]\n\n",
    b"data: 42\n\n",
    b"{}\n",
    b"<html><body>502 Bad Gateway</body></html>",
]


def hostile(api: str, data: st.DataObject) -> Answer:
    """The upstream's answer of `api`, mutated (see the module's docstring)."""
    turn = data.draw(st.sampled_from(sorted(TURNS)), label="turn")
    if api == "ollama-generate" and turn == "tool":
        turn = "text"  # /api/generate has no tool calls
    body = vendor_bytes(TURNS[turn], api).body
    media = APIS[api][1]
    frames = split(api, body)
    how = data.draw(
        st.sampled_from(
            ["cut", "reset", "chunked_cut", "junk", "value", "value", "usage", "drop", "repeat",
             "empty", "html_200", "json_200"]
        ),
        label="how",
    )  # fmt: skip
    if how == "empty":
        return Answer(content_type=media, chunks=[b""])
    if how == "html_200":
        return Answer(content_type="text/html", chunks=[JUNK[-1]])
    if how == "json_200":
        return Answer(content_type="application/json", chunks=[body])
    at = data.draw(st.integers(0, len(frames) - 1), label="frame")
    if how in ("value", "usage"):
        change = _any_value(data) if how == "value" else _huge_usage(data)
        frames[at] = edit_json(api, frames[at], change)
    elif how == "junk":
        frames.insert(at, data.draw(st.sampled_from(JUNK), label="junk"))
    elif how == "drop":
        del frames[at]
    elif how == "repeat":
        frames.insert(at, frames[at])
    body = b"".join(frames)
    if how in ("cut", "reset", "chunked_cut"):
        cut = data.draw(st.integers(0, len(body)), label="offset")
        if how == "reset":
            return Answer(content_type=media, chunks=[body[:cut], RESET])
        if how == "chunked_cut":
            return Answer(content_type=media, chunks=[body[:cut], RESET], chunked=True)
        body = body[:cut]
    pieces = data.draw(st.integers(1, 4), label="pieces")
    step = max(1, len(body) // pieces)
    return Answer(
        content_type=media, chunks=[body[i : i + step] for i in range(0, len(body), step)]
    )


# --- the gateway ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[GatewayServer, RawUpstream, httpx.Client]]:
    """The gateway (its upstream calls not retried: a retry would hide the bytes under
    test, and wait its backoff), the raw upstream, a client."""
    saved = {k: os.environ.get(k) for k in VENDOR_ENV}
    os.environ.update(VENDOR_ENV)
    options = Exchange._options

    def no_retries(self: Exchange, inbound: Any, target: Any) -> Any:
        found = options(self, inbound, target)
        if not RETRIES:
            found.max_retries = 0
            found.retry_backoff = 0
        else:
            found.retry_backoff = 0.01
        return found

    Exchange._options = no_retries  # type: ignore[method-assign]
    vendor = RawUpstream()
    try:
        with (
            GatewayServer() as gateway,
            httpx.Client(
                base_url=gateway.url, timeout=30, headers={"connection": "close"}
            ) as client,
        ):
            yield gateway, vendor, client
    finally:
        Exchange._options = options  # type: ignore[method-assign]
        vendor.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def use(served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str, answer: Answer) -> None:
    gateway, vendor, _ = served
    gateway.serve(GatewayConfig(models={"*": upstream(api, vendor.url)}))
    vendor.script = lambda path, body: answer
    gateway.reset_logs()


def settled(gateway: GatewayServer) -> None:
    """One access line; nothing escaped the app; nothing in uvicorn's error log."""
    lines = gateway.access_lines(1)
    assert len(lines) == 1, lines
    assert not gateway.escaped, repr(gateway.escaped[0])
    assert not gateway.errors, gateway.errors


def read(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], dialect: str, stream: bool = True
) -> str:
    """A raw client's request; checks the answer's grammar; returns the terminal event
    (or `http <status>`)."""
    gateway, _, client = served
    response = client.post(PATHS[dialect], json=request(dialect, stream))
    settled(gateway)
    if response.status_code != 200:
        check_error(dialect, response.status_code, response.content, server=True)
        return f"http {response.status_code}"
    if not stream:
        assert isinstance(response.json(), dict)
        return "whole"
    return check_stream(dialect, response.content)


_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


@pytest.mark.slow
@pytest.mark.parametrize("dialect", DIALECTS)
@_SETTINGS
@given(data=st.data())
def test_any_upstream_bytes_end_the_stream_once(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], dialect: str, data: st.DataObject
) -> None:
    api = data.draw(st.sampled_from(sorted(UPSTREAMS)), label="upstream")
    use(served, api, hostile(api, data))
    read(served, dialect, stream=data.draw(st.booleans(), label="stream"))


# --- the official SDKs ---------------------------------------------------------------------

SDK_ERRORS = (anthropic.APIError, openai.APIError)
"""What an SDK may raise reading an answer: its own API error (an HTTP error, an error
event). Anything else (a JSON, Unicode, key or validation error) is a stream it cannot
read."""


def sdk_read(url: str, dialect: str) -> str:
    """The SDK reads a streamed answer to its end: 'done', or 'error' when it raised its
    own API error."""
    close = {"connection": "close"}
    try:
        if dialect == "anthropic-messages":
            client = anthropic.Anthropic(
                base_url=url, api_key="k", max_retries=0, default_headers=close
            )
            with client.messages.stream(
                model="m", max_tokens=256, messages=[{"role": "user", "content": "Hi"}]
            ) as s:
                s.get_final_message()
        elif dialect == "openai-responses":
            oai = openai.OpenAI(
                base_url=url + "/v1", api_key="k", max_retries=0, default_headers=close
            )
            kinds = [
                event.type for event in oai.responses.create(model="m", input="Hi", stream=True)
            ]
            assert kinds and kinds[-1] in ("response.completed", "response.incomplete",
                                           "response.failed"), kinds  # fmt: skip
        else:
            oai = openai.OpenAI(
                base_url=url + "/v1", api_key="k", max_retries=0, default_headers=close
            )
            with oai.chat.completions.stream(
                model="m", messages=[{"role": "user", "content": "Hi"}]
            ) as s:
                s.get_final_completion()
    except SDK_ERRORS:
        return "error"
    return "done"


@pytest.mark.slow
@pytest.mark.parametrize("dialect", DIALECTS)
@settings(
    max_examples=EXAMPLES // 3,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_the_official_sdks_read_any_upstreams_answer(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], dialect: str, data: st.DataObject
) -> None:
    gateway = served[0]
    api = data.draw(st.sampled_from(sorted(UPSTREAMS)), label="upstream")
    use(served, api, hostile(api, data))
    sdk_read(gateway.url, dialect)
    settled(gateway)


# --- each hostile answer, from every upstream API ------------------------------------------

HTML_502 = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


def _named(api: str, how: str) -> Answer:
    """One named hostile answer of `api`."""
    media = APIS[api][1]
    turn = "text" if api == "ollama-generate" else "tool"
    body = vendor_bytes(TURNS[turn], api).body
    frames = split(api, body)
    if how == "empty_200":
        return Answer(content_type=media, chunks=[b""])
    if how == "html_502":
        return Answer(status=502, reason="Bad Gateway", content_type="text/html", chunks=[HTML_502])
    if how == "reset_after_content":
        return Answer(
            content_type=media, chunks=[b"".join(frames[: max(1, len(frames) // 2)]), RESET]
        )
    if how == "error_after_content":
        return Answer(content_type=media, chunks=[vendor_bytes(TURNS[how], api).body])
    huge = [edit_json(api, f, _huge_usage_of(10**400)) for f in frames]
    return Answer(content_type=media, chunks=[b"".join(huge)])


def _huge_usage_of(value: Any) -> Any:
    class _Fixed:
        def draw(self, strategy: Any, label: str = "") -> Any:
            return value

    return _huge_usage(_Fixed())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "how", ["empty_200", "html_502", "reset_after_content", "error_after_content", "huge_usage"]
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_hostile_answer_from_every_upstream(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], dialect: str, how: str
) -> None:
    gateway = served[0]
    for api in UPSTREAMS:
        use(served, api, _named(api, how))
        ended = read(served, dialect)
        if how in ("empty_200", "html_502"):
            assert ended.startswith("http "), (api, ended)  # before any content: HTTP
        elif how in ("reset_after_content", "error_after_content"):
            assert ended in ("error", "response.failed"), (api, ended)
        gateway.reset_logs()
        whole = read(served, dialect, stream=False)
        assert whole == "whole" or whole.startswith("http "), (api, whole)
        if how in ("empty_200", "html_502", "reset_after_content", "error_after_content"):
            assert whole.startswith("http "), (api, whole)  # no partial answer as a 200
        gateway.reset_logs()
        sdk_read(gateway.url, dialect)
        settled(gateway)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_retried_upstream_shows_only_its_last_attempt(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], dialect: str
) -> None:
    """Two HTML 502 pages, then a good answer: the client gets the answer, nothing of the
    pages; three pages: the dialect's 502-class error, not the HTML."""
    gateway, vendor, _ = served
    RETRIES.append(True)
    try:
        for api in ("anthropic-messages", "openai-completions", "openai-responses"):
            for pages in (2, 3):
                page, good = _named(api, "html_502"), _named(api, "huge_usage")
                use(served, api, page)
                seen: list[str] = []

                def script(
                    path: str, body: bytes, seen: list[str] = seen, pages: int = pages,
                    page: Answer = page, good: Answer = good,
                ) -> Answer:  # fmt: skip
                    seen.append(path)
                    return page if len(seen) <= pages else good

                vendor.script = script
                ended = read(served, dialect)
                assert len(seen) == 3, seen
                if pages == 2:
                    assert ended in ("message_stop", "response.completed", "[DONE]"), ended
                else:
                    assert ended.startswith("http 5"), ended
    finally:
        RETRIES.clear()


COUNT_ANSWERS = [
    b"[" * 5000 + b"]" * 5000,
    b'{"input_tokens": 1' + b"0" * 400 + b', "totalTokens": 1' + b"0" * 400 + b"}",
    b'{"input_tokens": "12", "totalTokens": -1}',
    b'{"input_tokens": true, "totalTokens": 1e308}',
    HTML_502,
    b"",
    b'{"error": {"message": "' + b"x" * 100_000 + b'"}}',
]


@pytest.mark.parametrize("api", ["anthropic-messages", "google-generative-ai"])
def test_a_vendors_count_of_any_shape_is_read_or_estimated(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str
) -> None:
    """`count_tokens` where the upstream counts (Anthropic, Gemini): whatever its count
    endpoint answers, the client gets a count (the estimate, said by its header) or the
    vendor's refusal in Anthropic's shape, never a 500 or a number no request has."""
    gateway, vendor, client = served
    for status in (200, 400, 503):
        for body in COUNT_ANSWERS:
            use(served, api, Answer(status=status, content_type="application/json", chunks=[body]))
            response = client.post(
                "/v1/messages/count_tokens",
                json={"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
            )
            settled(gateway)
            if response.status_code == 200:
                assert response.headers["x-stream-core-count"] == "estimate"
                assert 0 < response.json()["input_tokens"] < 100
            else:
                error = check_error("anthropic-messages", response.status_code, response.content)
                assert status == 400 and len(error["message"]) <= 500
