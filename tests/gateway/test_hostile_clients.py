"""Client requests are untrusted (issue 36): whatever a client sends, each dialect's
`parse_request` returns an `Inbound` or raises `RequestFieldError` naming the field, and
the gateway answers a 4xx in the client's dialect (never a 500, never a traceback), with
one access-log line and no exception leaving the ASGI app.

The requests start from real ones (Claude Code's and Codex CLI's second turn, captured
from the agents against a loopback server, strings shortened, ids zeroed:
`hostile_seeds.json`; and bodies shaped as the official SDKs send them) and are mutated:
any value at any path replaced by any JSON type (null, booleans, integers past any range,
strings with lone surrogates, giant strings, arrays, objects, deep nesting), keys deleted.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hostile_support import (
    VENDOR_ENV,
    GatewayServer,
    RawUpstream,
    answer_for,
    check_error,
    check_stream,
    upstream,
)
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from stream_core.gateway import GatewayConfig
from stream_core.gateway._app import MAX_DEPTH
from stream_core.gateway._exchange import Exchange
from stream_core.provider import CARRIER_PREFIX, Inbound, RequestFieldError, dialect

SEEDS = json.loads((Path(__file__).parent / "hostile_seeds.json").read_text())
EXAMPLES = int(os.environ.get("STREAM_CORE_FUZZ_EXAMPLES", "150"))
CASES: dict[str, list[tuple[dict[str, Any], dict[str, str]]]] = {
    api: [(SEEDS[name]["body"], SEEDS[name]["headers"]) for name in names]
    for api, names in (
        ("anthropic-messages", ("claude_code", "anthropic_sdk")),
        ("openai-responses", ("codex", "responses_sdk")),
        ("openai-completions", ("chat_sdk",)),
    )
}
"""Per dialect, the requests mutated: an agent's (Claude Code, Codex CLI) and one shaped
as the official SDK sends it (images, files, thinking, tool calls and results, server
tools, citations, a state carrier, structured output, every control)."""
PATHS = {
    "anthropic-messages": "/v1/messages",
    "openai-responses": "/v1/responses",
    "openai-completions": "/v1/chat/completions",
}


def test_the_seeds_read() -> None:
    """The unmutated requests are read whole (else the mutations test little)."""
    for api, cases in CASES.items():
        for body, headers in cases:
            assert isinstance(dialect(api).parse_request(body, headers), Inbound)


# --- mutations ------------------------------------------------------------------------------

_HUGE = [10**400, -(10**400), 2**63, 2**64 + 1, -1, 0, 1e308, -1e308, 5e-324]
_WEIRD = ["", "\ud800", "a\udfffb", "\x00", "data:", "~" + CARRIER_PREFIX + "x",
          CARRIER_PREFIX + "!!", "NaN", "toolu_\u202e", "x" * 70_000]  # fmt: skip
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(_HUGE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(_WEIRD)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def nested(depth: int, leaf: Any = 1, as_list: bool = True) -> Any:
    """A value `depth` arrays (or objects) deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


def depth(value: Any) -> int:
    """How deep `value`'s arrays and objects nest (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*here, i))
    return out


def mutate(body: dict[str, Any], data: st.DataObject) -> Any:
    """`body` (a deep copy) with one to three mutations."""
    body = json.loads(json.dumps(body))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        # Any path alike (sampled_from would favour the first ones: `model`, ...).
        seed = data.draw(st.integers(0, 2**32), label="seed")
        where = random.Random(seed).choice(paths(body)[1:] or [()])
        note(f"path {where}")
        how = data.draw(st.sampled_from(["value"] * 5 + ["delete", "nest", "wrap"]), label="how")
        if how == "value":
            new = data.draw(json_values, label="value")
        elif how == "nest":
            depth = data.draw(st.sampled_from([50, 120, 130, 900]), label="depth")
            new = nested(depth, as_list=data.draw(st.booleans()))
        else:
            new = None
        if not where:
            return new if how == "value" else body
        parent = body
        for part in where[:-1]:
            parent = parent[part]
        if how == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif how == "wrap":
            parent[where[-1]] = data.draw(
                st.sampled_from([[parent[where[-1]]], {"value": parent[where[-1]]}])
            )
        elif how != "delete":
            parent[where[-1]] = new
    return body


def _case(api: str, data: st.DataObject) -> tuple[Any, dict[str, str]]:
    body, headers = data.draw(st.sampled_from(CASES[api]), label="seed")
    return mutate(body, data), headers


# --- the parsers ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", list(CASES))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_a_parser_reads_any_request_or_names_the_field(api: str, data: st.DataObject) -> None:
    body, headers = _case(api, data)
    if not isinstance(body, dict) or depth(body) > MAX_DEPTH:
        return  # the gateway refuses it before a parser sees it (see below)
    try:
        inbound = dialect(api).parse_request(body, headers)
    except RequestFieldError as e:
        assert isinstance(e.field, str) and e.field and isinstance(e.message, str)
        return
    assert isinstance(inbound, Inbound)


# --- through the gateway ------------------------------------------------------------------

FOREIGN = {
    "anthropic-messages": "openai-responses",
    "openai-responses": "anthropic-messages",
    "openai-completions": "anthropic-messages",
}
"""Per client dialect, the upstream of another vendor its requests go to."""


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[GatewayServer, RawUpstream, httpx.Client]]:
    saved = {k: os.environ.get(k) for k in VENDOR_ENV}
    os.environ.update(VENDOR_ENV)
    vendor = RawUpstream()
    vendor.script = answer_for
    try:
        with (
            GatewayServer() as gateway,
            httpx.Client(
                base_url=gateway.url, timeout=30, headers={"connection": "close"}
            ) as client,
        ):
            yield gateway, vendor, client
    finally:
        vendor.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def post(
    served: tuple[GatewayServer, RawUpstream, httpx.Client],
    api: str,
    content: bytes,
    headers: dict[str, str] | None = None,
    path: str | None = None,
) -> httpx.Response:
    """POST `content` to the gateway; checks what every answer must be: a 4xx in the
    client's dialect or an answer whose stream ends once, one access-log line, nothing
    escaping the app. Returns the response."""
    gateway, _, client = served
    gateway.reset_logs()
    sent = {"content-type": "application/json", **(headers or {})}
    response = client.post(path or PATHS[api], content=content, headers=sent)
    assert gateway.access_lines(1) and len(gateway.access) == 1, gateway.access
    assert not gateway.escaped, repr(gateway.escaped[0])
    assert not gateway.errors, gateway.errors
    if response.status_code != 200:
        error = check_error(api, response.status_code, response.content, server=True)
        # A 5xx only where the upstream's answer failed the schema the client asked for.
        assert response.status_code < 500 or error["message"].startswith("the answer"), error
    elif response.headers["content-type"].startswith("text/event-stream"):
        check_stream(api, response.content)
    else:
        assert isinstance(response.json(), dict)
    return response


@pytest.mark.slow
@pytest.mark.parametrize("route", ["same", "foreign"])
@pytest.mark.parametrize("api", list(CASES))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_the_gateway_answers_any_request_in_the_dialect(
    served: tuple[GatewayServer, RawUpstream, httpx.Client],
    api: str,
    route: str,
    data: st.DataObject,
) -> None:
    gateway, vendor, _ = served
    to = api if route == "same" else FOREIGN[api]
    gateway.serve(GatewayConfig(models={"*": upstream(to, vendor.url)}))
    body, headers = _case(api, data)
    post(served, api, json.dumps(body).encode(), headers)


def _smallest(api: str) -> dict[str, Any]:
    if api == "anthropic-messages":
        return {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    if api == "openai-responses":
        return {"model": "m", "input": "hi"}
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


NOT_REQUESTS = [
    b"",
    b" ",
    b"[]",
    b'"a string"',
    b"null",
    b"42",
    b"{",
    b'{"model": "m",',
    b"\xff\xfe\x00{",
    b"<html>hello</html>",
    b'{"model": "m", "max_tokens": NaN}',
    b'{"model": "m", "temperature": -Infinity}',
    b"[" * 10_000 + b"]" * 10_000,
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b'{"model": "m", "messages": ' + b"[" * 990 + b"]" * 990 + b"}",
    b'{"model": 1' + b"0" * 5000 + b"}",
]


@pytest.mark.parametrize("api", list(CASES))
def test_what_is_no_request_is_a_400_in_the_dialect(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str
) -> None:
    gateway, vendor, _ = served
    gateway.serve(GatewayConfig(models={"*": upstream(api, vendor.url)}))
    for content in NOT_REQUESTS:
        for media in ("application/json", "text/plain"):
            response = post(served, api, content, {"content-type": media})
            assert response.status_code == 400, (content[:40], response.text[:200])
    said = post(served, api, NOT_REQUESTS[-4]).json()["error"]["message"]
    assert "deeper than" in said
    said = post(served, api, NOT_REQUESTS[10]).json()["error"]["message"]
    assert "NaN" in said


@pytest.mark.slow
@pytest.mark.parametrize("route", ["same", "foreign"])
@pytest.mark.parametrize("api", list(CASES))
def test_any_field_nested_deep_is_answered_never_a_500(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str, route: str
) -> None:
    """Every field of the SDK-shaped request, nested to just under the limit and far over
    it (arrays and objects): the readers and writers never recurse out of their depth."""
    gateway, vendor, _ = served
    to = api if route == "same" else FOREIGN[api]
    gateway.serve(GatewayConfig(models={"*": upstream(to, vendor.url)}))
    body = CASES[api][-1][0]
    for where in paths(body)[1:]:
        for depth, as_list in ((126 - len(where), True), (126 - len(where), False), (990, False)):
            mutated = json.loads(json.dumps(body))
            parent = mutated
            for part in where[:-1]:
                parent = parent[part]
            parent[where[-1]] = "__deep__"
            deep = (
                "[" * depth + "1" + "]" * depth if as_list else '{"a":' * depth + "1" + "}" * depth
            )
            content = json.dumps(mutated).replace('"__deep__"', deep).encode()
            response = post(served, api, content, CASES[api][-1][1])
            if depth == 990:
                assert response.status_code == 400
                assert len(response.content) < 2000, response.content[:200]


@pytest.mark.parametrize("route", ["same", "foreign"])
@pytest.mark.parametrize("api", list(CASES))
def test_odd_strings_anywhere_are_answered(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str, route: str
) -> None:
    """Lone surrogates (valid JSON escapes, not UTF-8), a BOM, control characters and a
    giant string, in the model's name (echoed in every answer) and the prompt."""
    gateway, vendor, _ = served
    to = api if route == "same" else FOREIGN[api]
    gateway.serve(GatewayConfig(models={"*": upstream(to, vendor.url)}, log_prompts=True))
    for odd in ("\ud800", "a\udfffb\ud83d", "\x00\x1b[31m", "\u202etxt", "x" * 3_000_000):
        for stream in (True, False):
            body = _smallest(api)
            body["model"] = odd[:300]
            body["stream"] = stream
            if api == "openai-responses":
                body["input"] = odd
            else:
                body["messages"][0]["content"] = odd
            response = post(served, api, json.dumps(body).encode())
            assert response.status_code == 200, response.text[:300]
    body = _smallest(api)
    response = post(served, api, b"\xef\xbb\xbf" + json.dumps(body).encode())
    assert response.status_code in (200, 400)


NUMBERS = (
    *("temperature", "top_p", "top_k", "seed", "n", "presence_penalty", "frequency_penalty"),
    *("max_tokens", "max_output_tokens", "max_completion_tokens"),
)


@pytest.mark.parametrize("route", ["same", "foreign"])
@pytest.mark.parametrize("api", list(CASES))
def test_numbers_past_any_range_are_answered(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str, route: str
) -> None:
    """Every numeric control at integers past a float's range (which JSON allows), at
    floats at the edge of one, and at a boolean (an int to Python)."""
    gateway, vendor, _ = served
    to = api if route == "same" else FOREIGN[api]
    gateway.serve(GatewayConfig(models={"*": upstream(to, vendor.url)}))
    for name in NUMBERS:
        for value in (10**400, -(10**400), 1e308, True):
            body = {**_smallest(api), name: value, "stream": True}
            post(served, api, json.dumps(body).encode())


@pytest.mark.parametrize("when", ["before", "during"])
@pytest.mark.parametrize("api", list(CASES))
def test_a_defect_is_the_dialects_500_never_an_exception(
    served: tuple[GatewayServer, RawUpstream, httpx.Client],
    api: str,
    when: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last resort: an exception the gateway did not expect (here, planted) is the
    dialect's 500 before the answer started, the answer's end after; one access line says
    so; nothing leaves the app."""
    gateway, vendor, client = served
    gateway.serve(GatewayConfig(models={"*": upstream(api, vendor.url)}))

    async def broken(self: Exchange, body: Any, headers: Any, send: Any, receive: Any) -> Any:
        if when == "during":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"data: ", "more_body": True})
        raise RuntimeError("a planted defect")

    monkeypatch.setattr(Exchange, "run", broken)
    gateway.reset_logs()
    response = client.post(PATHS[api], json=_smallest(api))
    (line,) = gateway.access_lines(1)
    assert not gateway.escaped
    assert [e.startswith("gateway: POST") for e in gateway.errors] == [True]  # logged, once
    assert "error=internal" in line
    if when == "before":
        check_error(api, response.status_code, response.content, server=True)
        assert response.status_code == 500 and " 500 " in line
    else:
        assert response.status_code == 200 and response.content == b"data: "


def test_a_header_no_vendor_takes_is_a_400_naming_it(
    served: tuple[GatewayServer, RawUpstream, httpx.Client],
) -> None:
    """Anthropic's own headers go to an Anthropic upstream as sent: one that is not
    printable ASCII (latin-1 bytes, control characters) is the client's 400, by name."""
    gateway, vendor, _ = served
    gateway.serve(GatewayConfig(models={"*": upstream("anthropic-messages", vendor.url)}))
    body = json.dumps(_smallest("anthropic-messages")).encode()
    for name, value in (("anthropic-beta", b"caf\xe9"), ("anthropic-version", b"\xff\xfe")):
        response = post(served, "anthropic-messages", body, {name: value})  # type: ignore[dict-item]
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith(name)


@pytest.mark.parametrize("api", list(CASES))
def test_an_error_quoting_a_giant_value_is_cut(
    served: tuple[GatewayServer, RawUpstream, httpx.Client], api: str
) -> None:
    gateway, vendor, _ = served
    gateway.serve(GatewayConfig(models={"*": upstream(FOREIGN[api], vendor.url)}))
    body = _smallest(api)
    giant = "x" * 1_000_000
    if api == "openai-responses":
        body["input"] = [{"type": "message", "role": giant, "content": "hi"}]
        body["reasoning"] = {"effort": giant}
    else:
        body["messages"][0]["role"] = giant
    response = post(served, api, json.dumps(body).encode())
    assert response.status_code == 400 and len(response.content) < 2000, response.content[:300]
