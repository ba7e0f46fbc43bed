"""Caller mistakes raise at `stream()`, naming the field, before any I/O (CONTRACT 1).

Each case is a value no vendor would accept, or one that would never reach it: a key with a
newline read from a file, a header that splits the request, a base URL that is not an
http(s) URL, an image that is not an image, tool names the vendors refuse, no message at
all. Each must raise `ValueError`/`TypeError` naming the field, never showing a key, with a
client whose transport fails the test if it is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import stream_core
from stream_core import Context, ImageContent, Model, StreamOptions, TextContent, Tool, UserMessage
from stream_core.contract_tests.kit import API_KEY, apis_under_test, contract_model, options

APIS = apis_under_test()
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)
SECRET = "sk-caller-mistake-secret-42"


@dataclasses.dataclass
class Case:
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Fields replaced on the contract model after it was made (as `model_copy` does)."""
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Fields assigned on valid options after they were made: `stream()` checks again."""
    context: Context | None = None
    error: type[Exception] = ValueError
    match: str = ""


def _user(*blocks: Any) -> Context:
    return Context(messages=[UserMessage(content=[TextContent(text="look"), *blocks])])


def _tools(*names: str) -> Context:
    return Context(
        messages=[UserMessage(content="hi")], tools=[Tool(name=n, description="t") for n in names]
    )


CASES: dict[str, Case] = {
    "key-trailing-newline": Case(
        options={"api_key": SECRET + "\n"}, match=r"StreamOptions\.api_key"
    ),
    "key-inner-space": Case(options={"api_key": "sk-a b"}, match=r"StreamOptions\.api_key"),
    "key-non-ascii": Case(options={"api_key": "sk-clé-1234"}, match=r"StreamOptions\.api_key"),
    "key-not-a-string": Case(options={"api_key": 1234}, error=TypeError, match=r"api_key"),
    "header-value-crlf": Case(
        options={"headers": {"x-trace": "a\r\nx-injected: 1"}}, match=r"StreamOptions\.headers"
    ),
    "header-value-lf": Case(
        options={"headers": {"x-trace": "a\nb"}}, match=r"StreamOptions\.headers"
    ),
    "header-name-space": Case(
        options={"headers": {"x trace": "1"}}, match=r"StreamOptions\.headers"
    ),
    "header-name-colon": Case(options={"headers": {"x-a:b": "1"}}, match=r"StreamOptions\.headers"),
    "header-value-non-ascii": Case(
        options={"headers": {"x-note": "café"}}, match=r"StreamOptions\.headers"
    ),
    "base-url-not-a-url": Case(options={"base_url": "not a url"}, match=r"StreamOptions\.base_url"),
    "base-url-file": Case(
        options={"base_url": "file:///etc/passwd"}, match=r"StreamOptions\.base_url"
    ),
    "base-url-no-host": Case(options={"base_url": "http://"}, match=r"StreamOptions\.base_url"),
    "base-url-no-scheme": Case(
        options={"base_url": "api.example.com/v1"}, match=r"StreamOptions\.base_url"
    ),
    "base-url-trailing-newline": Case(
        options={"base_url": "https://api.example.com\n"}, match=r"StreamOptions\.base_url"
    ),
    "model-base-url": Case(model={"base_url": "not a url"}, match=r"model\.base_url"),
    "model-base-url-ftp": Case(model={"base_url": "ftp://x.test"}, match=r"model\.base_url"),
    "model-header-crlf": Case(model={"headers": {"x-a": "1\r\n2"}}, match=r"model\.headers"),
    "image-not-base64": Case(
        context=_user(ImageContent(data="this is not base64!", mime_type="image/png")),
        match=r"context\.messages\[0\]\.content\[1\]\.data",
    ),
    "image-data-url": Case(
        context=_user(ImageContent(data="data:image/png;base64," + PNG, mime_type="image/png")),
        match=r"context\.messages\[0\]\.content\[1\]\.data",
    ),
    "image-mime-text": Case(
        context=_user(ImageContent(data=PNG, mime_type="text/plain")),
        match=r"context\.messages\[0\]\.content\[1\]\.mime_type",
    ),
    "image-mime-bare": Case(
        context=_user(ImageContent(data=PNG, mime_type="png")),
        match=r"context\.messages\[0\]\.content\[1\]\.mime_type",
    ),
    "tool-name-space": Case(context=_tools("get weather"), match=r"context\.tools\[0\]\.name"),
    "tool-name-slash": Case(context=_tools("ok", "fs/read"), match=r"context\.tools\[1\]\.name"),
    "tool-name-65": Case(context=_tools("t" * 65), match=r"context\.tools\[0\]\.name"),
    "tool-name-dot": Case(context=_tools("a.b"), match=r"context\.tools\[0\]\.name"),
    "tool-name-duplicate": Case(
        context=_tools("read", "write", "read"), match=r"context\.tools\[2\]\.name.*unique"
    ),
    "messages-empty": Case(context=Context(messages=[]), match=r"context\.messages"),
    "messages-empty-with-system": Case(
        context=Context(system_prompt="Be brief.", messages=[]), match=r"context\.messages"
    ),
}


def _failing_client() -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        pytest.fail(f"a request was made: {request.method} {request.url}")

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), sent


def _raises_before_io(
    api: str,
    case: Case,
    *,
    opts: StreamOptions | None = None,
    model: Model | None = None,
) -> pytest.ExceptionInfo[Exception]:
    client, sent = _failing_client()
    model = model or contract_model(api)
    if case.model:
        model = model.model_copy(update=case.model)  # skips validation, as assignment does
    opts = opts or options(client=client)
    opts.client = client
    for name, value in case.options.items():
        setattr(opts, name, value)
    context = case.context or Context(messages=[UserMessage(content="hi")])
    with pytest.raises(case.error, match=case.match) as info:
        stream_core.stream(model, context, opts)
    assert not sent
    return info


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("api", APIS)
def test_a_caller_mistake_raises_at_stream_naming_the_field(api: str, name: str) -> None:
    info = _raises_before_io(api, CASES[name])
    assert SECRET not in str(info.value) and API_KEY not in str(info.value)


@pytest.mark.parametrize("api", APIS)
def test_valid_values_next_to_the_mistakes_are_accepted(api: str) -> None:
    """The checks refuse mistakes only: the ordinary values around them still go."""
    client, sent = _failing_client()
    context = Context(
        messages=[
            UserMessage(
                content=[TextContent(text="look"), ImageContent(data=PNG, mime_type="image/png")]
            )
        ],
        # An API without tools (WireAPI.takes_tools=False) refuses any: none are sent to it.
        tools=[Tool(name="get_weather-2"), Tool(name="t" * 64)] if _takes_tools(api) else [],
    )
    opts = options(
        client=client,
        headers={"x-trace": "a b\tc", "X-Custom_Header.v1": "1"},
        base_url="http://127.0.0.1:9/prefix",
    )
    stream_core.stream(contract_model(api), context, opts)
    assert not sent


def _takes_tools(api: str) -> bool:
    wire = stream_core.provider.get_provider(api).wire
    return wire is None or wire.takes_tools


def _key_variable(api: str) -> str | None:
    wire = stream_core.provider.get_provider(api).wire
    return wire.api_key_env(contract_model(api)) if wire is not None else None


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("key", [SECRET[:10] + "\n" + SECRET[10:], "sk-a b", "sk-clé"])
def test_a_bad_key_in_the_environment_raises_naming_the_variable(
    api: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variable = _key_variable(api)
    if variable is None:
        pytest.skip(f"{api} reads no key from the environment")
    monkeypatch.setenv(variable, key)
    info = _raises_before_io(
        api, Case(match=variable + r" \(from the environment\)"), opts=options(api_key=None)
    )
    assert SECRET not in str(info.value) and SECRET[:10] not in str(info.value)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("padding", ["\n", "\r\n", "  "])
def test_surrounding_whitespace_of_an_environment_key_is_removed(
    api: str, padding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `.env` file or `$(cat key)` leaves a newline; no key has one: it is dropped."""
    variable = _key_variable(api)
    if variable is None:
        pytest.skip(f"{api} reads no key from the environment")
    monkeypatch.setenv(variable, SECRET + padding)
    client, sent = _failing_client()
    s = stream_core.stream(
        contract_model(api),
        Context(messages=[UserMessage(content="hi")]),
        options(api_key=None, client=client),
    )
    request = s._request  # built in stream(): what would be sent
    assert request is not None and not sent
    values = [v for _, v in request.headers.items()] + [str(request.url)]
    assert any(SECRET in v for v in values), "the key is sent"
    assert not any(SECRET + padding in v for v in values)
    assert all("\n" not in v and "\r" not in v for v in values)


def test_a_model_made_with_a_bad_base_url_or_header_raises_at_once() -> None:
    make: Callable[..., Model] = Model
    with pytest.raises(ValueError, match="base_url"):
        make(id="m", api="openai-completions", provider="p", base_url="not a url")
    with pytest.raises(ValueError, match="base_url"):
        make(id="m", api="openai-completions", provider="p", base_url="file:///tmp/x")
    with pytest.raises(ValueError, match="headers"):
        make(
            id="m",
            api="openai-completions",
            provider="p",
            base_url="https://x.test",
            headers={"x-a": "1\n2"},
        )


def test_options_made_with_a_mistake_raise_at_once() -> None:
    with pytest.raises(ValueError, match=r"StreamOptions\.api_key") as info:
        StreamOptions(api_key=SECRET + "\n")
    assert SECRET not in str(info.value)
    with pytest.raises(ValueError, match=r"StreamOptions\.headers"):
        StreamOptions(headers={"x-a": "1\r\n2"})
    with pytest.raises(ValueError, match=r"StreamOptions\.base_url"):
        StreamOptions(base_url="not a url")
    # A secret header's value is not shown either.
    with pytest.raises(ValueError, match=r"StreamOptions\.headers") as info:
        StreamOptions(headers={"authorization": "Bearer " + SECRET + "\n"})
    assert SECRET not in str(info.value)
