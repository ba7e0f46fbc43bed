"""A base URL that carries credentials (`user:password@`, `?api_key=`) never reaches a
log line: httpx logs every request's URL at INFO, and an application logging at INFO
would have written them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from stream_core import Context, Model, StreamOptions, UserMessage, complete
from stream_core.testing import FakeVendor, fake_vendor, faux_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    with fake_vendor(scenarios={"m-1": [faux_text("hi")]}) as server:
        yield server


async def test_no_credential_of_a_base_url_reaches_httpx_log_lines(
    vendor: FakeVendor, caplog: pytest.LogCaptureFixture
) -> None:
    url = vendor.url.replace("http://", "http://base-user:base-pw-3@") + "/v1?api_key=qk-4"
    model = Model(id="m-1", api="openai-completions", provider="openai", base_url=url)
    context = Context(messages=[UserMessage(content="hello")])
    with caplog.at_level(logging.DEBUG):
        await complete(model, context, StreamOptions(api_key="k"))
    lines = [r.getMessage() for r in caplog.records]
    assert any("HTTP Request" in line for line in lines)  # httpx did log the request
    text = "\n".join(lines)
    assert "base-pw-3" not in text and "qk-4" not in text
