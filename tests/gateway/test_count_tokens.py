"""`POST /v1/messages/count_tokens` through the gateway: the vendor's own count where the
upstream has one (Anthropic, Gemini), stream-core's estimate elsewhere, and which one it
was in `x-stream-core-count`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from ops_upstreams import ChatUpstream, JsonUpstream, gateway_in_thread

from stream_core import Context, UserMessage, estimate_context_tokens
from stream_core.gateway import GatewayConfig, Upstream, create_app

VENDOR_KEY = "sk-vendor-count-4b9e1f27"
KEY_ENV = "OPS_TEST_VENDOR_KEY"
HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "context-management-2025-06-27"}
BODY: dict[str, Any] = {
    "model": "claude-x",
    "system": "Be brief.",
    "messages": [{"role": "user", "content": "How many tokens is this?"}],
    "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
}


@pytest.fixture(autouse=True)
def vendor_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, VENDOR_KEY)


def count(upstream: Upstream, body: dict[str, Any] | None = None) -> httpx.Response:
    app = create_app(GatewayConfig(models={"claude-x": upstream}))
    with gateway_in_thread(app) as base:
        return httpx.post(base + "/v1/messages/count_tokens", json=body or BODY, headers=HEADERS)


def test_an_anthropic_upstream_counts_the_clients_own_body() -> None:
    vendor = JsonUpstream({"input_tokens": 42})
    try:
        r = count(Upstream("anthropic/claude-sonnet-4-5", base_url=vendor.url, api_key_env=KEY_ENV))
    finally:
        vendor.close()
    assert r.status_code == 200 and r.json() == {"input_tokens": 42}
    assert r.headers["x-stream-core-count"] == "exact"
    (seen,) = vendor.requests
    assert seen.request_line.startswith("POST /v1/messages/count_tokens ")
    assert seen.headers["x-api-key"] == VENDOR_KEY
    assert seen.headers["anthropic-beta"] == HEADERS["anthropic-beta"]
    sent = json.loads(seen.body)
    assert sent == {**BODY, "model": "claude-sonnet-4-5"}  # as sent, its own model id


def test_a_gemini_upstream_counts_with_count_tokens() -> None:
    vendor = JsonUpstream({"totalTokens": 17})
    try:
        r = count(Upstream("google/gemini-2.5-pro", base_url=vendor.url, api_key_env=KEY_ENV))
    finally:
        vendor.close()
    assert r.status_code == 200 and r.json() == {"input_tokens": 17}
    assert r.headers["x-stream-core-count"] == "exact"
    (seen,) = vendor.requests
    assert seen.request_line.startswith("POST /models/gemini-2.5-pro:countTokens ")
    assert seen.headers["x-goog-api-key"] == VENDOR_KEY
    sent = json.loads(seen.body)["generateContentRequest"]
    assert sent["model"] == "models/gemini-2.5-pro"
    assert sent["contents"][0]["parts"][0]["text"] == "How many tokens is this?"
    assert sent["systemInstruction"]["parts"][0]["text"] == "Be brief."


def test_another_upstream_gets_the_documented_estimate() -> None:
    vendor = ChatUpstream()
    try:
        body = {k: v for k, v in BODY.items() if k != "context_management"}
        r = count(Upstream("openai/gpt-4o-mini", base_url=vendor.url, api_key_env=KEY_ENV), body)
    finally:
        vendor.close()
    assert r.status_code == 200 and r.headers["x-stream-core-count"] == "estimate"
    expected = estimate_context_tokens(
        Context(
            system_prompt="Be brief.",
            messages=[UserMessage(content="How many tokens is this?")],
        )
    )
    assert r.json() == {"input_tokens": expected}
    assert vendor.requests == []  # nothing is sent to count


def test_a_count_the_vendor_refuses_is_its_error_without_the_key() -> None:
    refusal = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    refusal["error"]["message"] = f"messages: bad (key {VENDOR_KEY})"
    vendor = JsonUpstream(refusal, status=400)
    try:
        r = count(Upstream("anthropic/claude-sonnet-4-5", base_url=vendor.url, api_key_env=KEY_ENV))
    finally:
        vendor.close()
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert VENDOR_KEY not in r.text and "messages: bad" in r.text


def test_a_count_endpoint_that_fails_falls_back_to_the_estimate() -> None:
    vendor = JsonUpstream({"type": "error", "error": {"type": "api_error"}}, status=500)
    try:
        r = count(Upstream("anthropic/claude-sonnet-4-5", base_url=vendor.url, api_key_env=KEY_ENV))
    finally:
        vendor.close()
    assert r.status_code == 200 and r.headers["x-stream-core-count"] == "estimate"
    assert r.json()["input_tokens"] > 0


def test_an_unknown_model_and_a_bad_body_are_anthropic_errors() -> None:
    app = create_app(GatewayConfig())
    with gateway_in_thread(app) as base:
        missing = httpx.post(base + "/v1/messages/count_tokens", json=BODY, headers=HEADERS)
        bad = httpx.post(
            base + "/v1/messages/count_tokens", json={"model": "x", "messages": 3}, headers=HEADERS
        )
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
