"""`stream-core serve` answers every built-in provider with its recordings over loopback,
and `stream-core record` writes what it receives as a scrubbed recording."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import stream_core
from stream_core._cli import main
from stream_core.contract_tests.grammar import assert_valid_event_stream
from stream_core.contract_tests.kit import FIXTURES, check_expect, load_fixtures
from stream_core.testing._serve import FakeVendor

# Where each API's client puts its path under the base URL (the default: the server root).
_BASE_SUFFIX = {"openai-completions": "/v1"}


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    server = FakeVendor(FIXTURES, log=io.StringIO())
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _model(
    server: FakeVendor, api: str, model_id: str, structured_output: str | None = None
) -> stream_core.Model:
    return stream_core.Model(
        id=model_id, api=api, provider="served",
        base_url=server.url + _BASE_SUFFIX.get(api, ""), structured_output=structured_output,
    )  # fmt: skip


def _with_tools(tools: list | None) -> dict:
    """`on_payload` asking for the vendor-run tools the recorded request asked for, as the
    kit's replay does (their answers may hold more input than one context window)."""
    if not tools:
        return {}
    return {"on_payload": lambda payload, model: {**payload, "tools": tools}}


async def _stream(
    model: stream_core.Model, call: dict | None = None, tools: list | None = None
) -> tuple[list, stream_core.AssistantMessage]:
    # `call`: how the recorded call was made (a fixture's output schema), as the kit does.
    options = stream_core.StreamOptions(
        api_key="test-key", max_retries=0, **(call or {}), **_with_tools(tools)
    )
    with anyio.fail_after(20):  # a guard against hangs, not a timing assertion
        async with stream_core.stream(
            model, {"messages": [{"role": "user", "content": "hi"}]}, options
        ) as s:
            events = [e async for e in s]
            return events, await s.result()


@pytest.mark.parametrize(
    "api", [e.api for e in stream_core.list_providers() if load_fixtures(e.api)]
)
def test_serve_answers_each_provider_with_its_recordings(vendor: FakeVendor, api: str) -> None:
    cases = load_fixtures(api)
    for case in cases:
        call = case.call
        mode = call.pop("structured_output", None)
        tools = case.meta.get("request_tools")
        events, message = anyio.run(_stream, _model(vendor, api, case.name, mode), call, tools)
        assert_valid_event_stream(events)
        try:
            check_expect(message, case.expect)
        except AssertionError as exc:
            raise AssertionError(f"{api}/{case.name}: {exc}") from None
    assert len(vendor.requests) == len(cases)
    assert {r.model for r in vendor.requests} == {c.name for c in cases}
    log = vendor.log.getvalue()  # type: ignore[union-attr]
    assert f"{api}/{cases[0].name} 200" in log
    assert "error answering" not in log


@pytest.mark.parametrize(
    "api", [e.api for e in stream_core.list_providers() if load_fixtures(e.api)]
)
def test_an_unknown_model_gets_the_vendors_404(vendor: FakeVendor, api: str) -> None:
    _, message = anyio.run(_stream, _model(vendor, api, "no-such-model"))
    assert message.error is not None and message.error.kind == "not_found"
    assert "no-such-model" in message.error.message
    assert "-> 404" in vendor.log.getvalue()  # type: ignore[union-attr]


def test_chunk_size_and_delay_keep_the_message() -> None:
    server = FakeVendor(FIXTURES, chunk_size=3, delay=0.0001)
    server.start()
    try:
        case = load_fixtures("anthropic-messages")[0]
        events, message = anyio.run(_stream, _model(server, case.api, case.name))
    finally:
        server.shutdown()
        server.server_close()
    assert_valid_event_stream(events)
    check_expect(message, case.expect)


def test_record_writes_the_body_and_expect(
    vendor: FakeVendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-ant-api03-recordtestkey0123456789abcdef"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    name = "vercel-ai__anthropic-text"
    out = tmp_path / "new" / "rec"
    status = main(["record", f"anthropic/{name}", "hi", "-o", str(out), "--base-url", vendor.url])
    assert status == 0
    original = FIXTURES / "anthropic-messages" / f"{name}.body"
    assert (tmp_path / "new" / "rec.body").read_bytes() == original.read_bytes()
    meta = json.loads((tmp_path / "new" / "rec.json").read_text())
    assert meta["api"] == "anthropic-messages" and meta["model"] == name
    assert meta["status"] == 200 and meta["licence"] == "recorded by the user"
    assert set(meta["headers"]) <= {"content-type", "retry-after", "retry-after-ms"}
    want = json.loads(original.with_suffix(".json").read_text())["expect"]
    assert meta["expect"]["content"] == want["content"]
    assert meta["expect"]["usage"] == want["usage"]
    assert meta["expect"]["stop_reason"] == want["stop_reason"]
    # The new recording replays to what it says, through the same kit.
    (case,) = [f for f in _load_flat(tmp_path / "new")]
    events, message = anyio.run(_stream_replay, case)
    check_expect(message, meta["expect"])
    assert key not in (tmp_path / "new" / "rec.json").read_text()


def _load_flat(folder: Path) -> list[tuple[bytes, dict]]:
    return [
        (b.read_bytes(), json.loads(b.with_suffix(".json").read_text()))
        for b in folder.glob("*.body")
    ]


async def _stream_replay(case: tuple[bytes, dict]) -> tuple[list, stream_core.AssistantMessage]:
    from stream_core.testing import replay_client

    body, meta = case
    model = stream_core.Model(id="m", api=meta["api"], provider="x", base_url="http://x")
    options = stream_core.StreamOptions(api_key="k", client=replay_client(body), max_retries=0)
    context = {"messages": [{"role": "user", "content": "hi"}]}
    async with stream_core.stream(model, context, options) as s:
        events = [e async for e in s]
        return events, await s.result()


def test_record_scrubs_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-or-v1-0123456789abcdef0123456789abcdef"
    folder = tmp_path / "served" / "openai-completions"
    folder.mkdir(parents=True)
    leak = (
        f"echo {key} and sk-proj-ABCDEFGHIJKLMNOPQRSTUV and Bearer abcdefghijklmnopqrstuvwxyz "
        "in arn:aws:bedrock:us-east-1:123456789012:foundation-model/x, AKIAABCDEFGHIJKLMNOP"
    )
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": leak}}]}
    end = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n"
    (folder / "leaky.body").write_text(body)
    (folder / "leaky.json").write_text(
        json.dumps({"api": "openai-completions", "headers": {
            "content-type": "text/event-stream", "set-cookie": "session=abc",
            "openai-organization": "org-secret"}})
    )  # fmt: skip
    server = FakeVendor(tmp_path / "served")
    server.start()
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    try:
        out = tmp_path / "rec"
        status = main(
            ["record", "openrouter/leaky", "hi", "-o", str(out), "--base-url", server.url + "/v1"]
        )
    finally:
        server.shutdown()
        server.server_close()
    assert status == 0
    written = (tmp_path / "rec.body").read_bytes() + (tmp_path / "rec.json").read_bytes()
    for secret in (key, "sk-proj-ABCDEF", "abcdefghijklmnopqrstuvwxyz", "123456789012",
                   "AKIAABCDEFGHIJKLMNOP", "session=abc", "org-secret"):  # fmt: skip
        assert secret.encode() not in written, secret
    assert b"[scrubbed]" in written and b"arn:aws:bedrock:us-east-1:000000000000:" in written
