"""An upstream's URL (its host, its deployment path) never reaches a gateway's client, in
an error before content or after it: the library's messages name the request they failed
on, which is the operator's to know."""

from __future__ import annotations

import httpx
import pytest
from ops_upstreams import gateway_in_thread

from stream_core.gateway import GatewayConfig, Upstream, create_app
from stream_core.gateway._scrub import scrub
from stream_core.testing import fake_vendor, faux_error


def test_scrub_replaces_every_url() -> None:
    text = "HTTP 503 from POST http://10.0.0.7:9000/v1/chat/completions (see https://x.io/a?b=c)"
    assert scrub(text) == "HTTP 503 from POST <upstream> (see <upstream>)"


@pytest.mark.parametrize("stream", [True, False])
def test_an_upstream_error_names_no_upstream_url(
    stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    scripts = {"gpt-4o-mini": [faux_error("server", status=500)] * 3}
    with fake_vendor(scenarios=scripts) as vendor:
        upstream = Upstream("openai/gpt-4o-mini", base_url=vendor.url + "/v1")
        app = create_app(GatewayConfig(models={"m": upstream}))
        with gateway_in_thread(app) as base:
            body = {"model": "m", "max_tokens": 50, "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
            r = httpx.post(base + "/v1/messages", json=body, timeout=30)
    assert r.status_code == 500, r.text
    assert "127.0.0.1" not in r.text and "/v1/chat/completions" not in r.text
