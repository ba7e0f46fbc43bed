"""A vendor's batch id never bends a URL: `..` in a path, control characters, or a giant
id are refused before anything is sent, for every codec."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from stream_core import StreamOptions, get_model
from stream_core.batch import BatchHTTPError, BatchSettings
from stream_core.batch._plans import wire_of
from stream_core.batch._session import HttpSession
from stream_core.provider import batch_wire

MODELS = [
    ("anthropic", "claude-haiku-4-5"),
    ("openai", "gpt-4.1-mini"),
    ("mistral", "mistral-small-latest"),
]


@pytest.mark.parametrize(("provider", "model_id"), MODELS)
@pytest.mark.parametrize("bad", ["..", ".", "a/../..", "x\r\nHost: evil", "x" * 10_000])
def test_a_bent_batch_id_is_never_sent(provider: str, model_id: str, bad: str) -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(404, json={"error": {"type": "not_found_error", "message": "no"}})

    model = get_model(provider, model_id)
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    options = StreamOptions(api_key="sk-test", client=client)
    session = HttpSession(wire_of(model), model, options, BatchSettings(), None, None)
    codec = batch_wire(model)

    async def run(call: Any) -> None:
        await call(session, bad)

    for call in (codec.status, codec.cancel):
        with pytest.raises(BatchHTTPError) as found:
            anyio.run(run, call)
        assert found.value.kind in ("protocol", "not_found", "invalid_request")
    bent = [r for r in sent if r.url.path.rstrip("/") in ("", "/v1", "/v1/messages", "/v1/batch")]
    assert not bent, [str(r.url) for r in bent]
    assert all(len(str(r.url)) < 8192 for r in sent)
