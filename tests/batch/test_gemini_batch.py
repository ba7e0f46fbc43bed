"""Gemini API batch mode from the user's side: the codec's whole answer read back by the
provider, its tables written by the fake vendor and read back, and `stream_core.batch`
against `fake_vendor` (fidelity against `stream()` of the same script, inline and through
an uploaded file; errors, expiry, cancel, listing, find, a lost create answer; hostile
result lines and batch objects)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from stream_core import (
    AssistantMessage,
    Citation,
    Context,
    ErrorKind,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    Usage,
    UserMessage,
    complete,
    get_model,
)
from stream_core.batch import BatchRequest, BatchSettings, submit, vendor_batches
from stream_core.batch._session import HttpSession
from stream_core.provider import (
    BatchHTTPError,
    BatchPart,
    BatchStatus,
    RawResult,
    get_provider,
    read_whole,
)
from stream_core.provider import plan as plan_call
from stream_core.providers import _gemini_batch as codec
from stream_core.providers import _gemini_whole as whole
from stream_core.providers import google
from stream_core.providers._gemini_parts import encode_grounding
from stream_core.providers._google_batch import ENDED_AS, STATES, pack_keys, unpack_keys
from stream_core.testing import (
    FakeVendor,
    fake_vendor,
    faux_error,
    faux_message,
    faux_text,
    faux_tool_call,
)

KEY = "gemini-batch-test-key"
MODEL = get_model("google", "gemini-2.5-flash")
WIRE = get_provider(MODEL.api).wire
USAGE = Usage(input=120, output=30, cache_read=10)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = Tool(
    name="weather",
    description="The weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CTX = Context(messages=[UserMessage(content="hi")])


def _options(server: FakeVendor, **more: Any) -> StreamOptions:
    return StreamOptions(api_key=KEY, base_url=server.url + "/v1beta", max_tokens=400, **more)


def _ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(messages=[UserMessage(content=text)], tools=tools or [])


def _message(*blocks: Any, usage: Usage = USAGE, **more: Any) -> AssistantMessage:
    return AssistantMessage(
        api="faux", provider="faux", model="faux", usage=usage, content=list(blocks), **more
    )


THINKING = _message(
    ThinkingContent(thinking="Let me see.", signature="c2lnLTE="),
    TextContent(text="Thought it through.", text_signature="c2lnLTI="),
    usage=Usage(input=50, output=40, reasoning=25),
)
TURNS = [
    faux_text("Hello there.", usage=USAGE),
    faux_tool_call("weather", {"city": "Paris"}, text="Checking.", usage=USAGE),
    faux_text('{"city": "Paris"}', usage=USAGE),
    faux_message(THINKING),
]


def _requests(server: FakeVendor) -> list[BatchRequest]:
    return [
        BatchRequest("plain", MODEL, _ask("Say hello."), _options(server)),
        BatchRequest("tool", MODEL, _ask("Weather?", [WEATHER]), _options(server)),
        BatchRequest(
            "structured", MODEL, _ask("Which city?"), _options(server, output_schema=SCHEMA)
        ),
        BatchRequest("thinking", MODEL, _ask("Think."), _options(server, reasoning="low")),
    ]


def _session(server: FakeVendor, **settings: Any) -> HttpSession:
    assert WIRE is not None
    model = MODEL.replace(base_url=server.url + "/v1beta")
    return HttpSession(WIRE, model, StreamOptions(api_key=KEY), BatchSettings(**settings), None, 0)


def _same(got: AssistantMessage, want: AssistantMessage) -> None:
    assert got.error is None, got.error
    assert got.content == want.content
    assert got.stop_reason == want.stop_reason
    assert got.output == want.output
    assert got.usage.model_dump(exclude={"cost"}) == want.usage.model_dump(exclude={"cost"})


# --- 1. the whole answer, written and read back -----------------------------------------------


ROUND_TRIPS = {
    "text": _message(TextContent(text="Hello.")),
    "signed": THINKING,
    "call": _message(
        TextContent(text="Checking."),
        ToolCall(id="c1", name="weather", arguments={"city": "Paris"}, thought_signature="c2ln"),
    ),
    "two calls": _message(
        ToolCall(id="a", name="f", arguments={}), ToolCall(id="b", name="g", arguments={"x": [1]})
    ),
    "cut": _message(TextContent(text="It was a dark"), stop_reason="length"),
}
CITED = [("Paris is the capital.", [Citation(url="https://ex.test/p", title="P", start=0, end=5)])]
GROUNDED = {
    "candidates": [
        {
            "content": {"role": "model", "parts": [{"text": CITED[0][0]}]},
            "finishReason": next(iter(google.WIRE.stop_reasons)),
            "groundingMetadata": encode_grounding(CITED, ["capital of France"]),
        }
    ],
    "usageMetadata": {google._PROMPT: 7, google._CANDIDATES: 5},
    "responseId": "r-1",
}


@pytest.mark.parametrize("name", [*ROUND_TRIPS, "grounded"])
def test_answer_body_reads_back_as_the_message(name: str) -> None:
    assert WIRE is not None
    p = plan_call(WIRE, MODEL.replace(base_url="https://g.test/v1beta"), CTX)
    body = GROUNDED if name == "grounded" else _stream_body(ROUND_TRIPS[name])
    first = read_whole(p, body)  # the message a stream gives
    if name == "grounded":
        assert first.usage.server_tools == {"web_search": 1}
        text = first.content[0]
        assert isinstance(text, TextContent) and text.citations
    again = read_whole(p, json.loads(json.dumps(codec.answer_body(first, MODEL))))
    _same(again, first)
    assert again.raw_stop_reason == first.raw_stop_reason


def _stream_body(message: AssistantMessage) -> Any:
    """The message as the provider reads it from a streamed answer (the scripted turn's
    bytes, every chunk in one JSON array: what `generateContent` without SSE answers)."""
    from stream_core.testing import vendor_bytes

    body = vendor_bytes(faux_message(message), MODEL.api).body.decode()
    return [json.loads(x[5:]) for x in body.splitlines() if x.startswith("data:")]


def test_a_blocked_prompt_and_a_safety_stop_read_back() -> None:
    assert WIRE is not None
    p = plan_call(WIRE, MODEL.replace(base_url="https://g.test/v1beta"), CTX)
    blocked = read_whole(p, {"promptFeedback": {"blockReason": "OTHER"}, "usageMetadata": {}})
    assert blocked.error is not None and blocked.error.kind == "content_filter"
    again = read_whole(p, codec.answer_body(blocked, MODEL))
    assert (again.raw_stop_reason, again.error) == (blocked.raw_stop_reason, blocked.error)
    word = next(w for w, r in google.WIRE.stop_reasons.items() if r == "content_filter")
    candidate = {"content": {"parts": [{"text": "x"}]}, "finishReason": word, "finishMessage": "y"}
    stopped = read_whole(p, {"candidates": [candidate]})
    again = read_whole(p, codec.answer_body(stopped, MODEL))
    assert (again.content, again.error) == (stopped.content, stopped.error)


KINDS: tuple[ErrorKind, ...] = typing.get_args(ErrorKind)


@pytest.mark.parametrize("kind", KINDS)
def test_every_request_error_reads_back_with_its_kind(kind: ErrorKind) -> None:
    sayable = set(google.ERROR_STATUSES.values()) | {"context_overflow"}
    text = "prompt is too long" if kind == "context_overflow" else "it went wrong"
    back, message, _ = whole.read_error(json.loads(json.dumps(codec.error_object(kind, text))))
    assert back == kind if kind in sayable else back in KINDS
    assert text in message


@pytest.mark.parametrize("word", list(STATES))
def test_every_state_word_reads_back(word: str) -> None:
    said = codec.batch_resource(
        "batches/b1", tag="t", model="m", state="running", ended_as=None, stats=(9, 4, 3),
        created=1_700_000_000.5, output=None,
    )  # fmt: skip
    said["metadata"]["state"] = word
    back = codec._status(json.loads(json.dumps(said)))
    assert back is not None and back.state == STATES[word] and back.vendor_state == word
    assert (back.counts.total, back.counts.succeeded, back.counts.errored) == (9, 4, 3)
    rest = 2 if word in ENDED_AS else 0
    assert back.counts.expired == (rest if ENDED_AS.get(word) == "expired" else 0)
    assert back.counts.cancelled == (rest if ENDED_AS.get(word) == "cancelled" else 0)
    assert back.created_at == pytest.approx(1_700_000_000.5)
    assert (back.tag, back.model) == ("t", "m")


@pytest.mark.parametrize(
    "keys", [["t_0", "t_1", "t_2"], ["a", "b"], ["x_7", "x_8"], ["x_1", "x_3"], [], ["007"]]
)
def test_custom_ids_are_kept_compactly_and_read_back(keys: list[str]) -> None:
    packed = pack_keys(keys)
    assert unpack_keys(json.loads(json.dumps(packed))) == keys
    if keys[:1] == ["t_0"]:
        assert packed == {"prefix": "t_", "start": 0, "count": 3}


# --- 2. the fake vendor end to end through the engine ----------------------------------------


def _fidelity(tmp_path: Path) -> tuple[list[AssistantMessage], list[Any], Any, list[Any]]:
    with fake_vendor(scenarios={MODEL.id: TURNS + TURNS}, batch_delay=0.05) as server:
        requests = _requests(server)

        async def run() -> tuple[list[AssistantMessage], list[Any]]:
            streamed = [await complete(r.model, r.context, r.options) for r in requests]
            job = await submit(requests, store=tmp_path, name="fidelity")
            return streamed, await job.collect(interval=0.02, timeout=20)

        streamed, results = anyio.run(run)
        (batch,) = server.batches.listing("gemini")
        sent = [r.body for r in server.requests if r.path.endswith(":streamGenerateContent")]
        with server.batches.lock:
            left = list(server.batches.files.values())
    return streamed, results, batch, [sent, left]


def _check_fidelity(streamed: list[AssistantMessage], results: list[Any], batch: Any) -> None:
    assert [r.custom_id for r in results] == ["plain", "tool", "structured", "thinking"]
    for want, got in zip(streamed, results, strict=True):
        assert got.outcome == "succeeded"
        _same(got.message, want)
        cost, full = got.message.usage.cost, want.usage.cost
        assert cost is not None and full is not None
        assert cost.total == pytest.approx(full.total / 2)
    assert results[1].message.stop_reason == "tool_use"
    assert results[2].message.output == {"city": "Paris"}
    thinking = results[3].message.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.signature == "c2lnLTE="
    assert batch.meta["model"] == MODEL.id and batch.meta["tag"].startswith("sc")


def test_inline_results_are_the_streamed_messages_at_half_the_price(tmp_path: Path) -> None:
    streamed, results, batch, (sent, left) = _fidelity(tmp_path)
    _check_fidelity(streamed, results, batch)
    assert batch.meta["mode"] == "inline"
    # Each request is the streaming request as it was sent.
    assert [payload for _, _, _, payload in batch.requests] == sent
    assert left == []


def test_file_results_are_the_streamed_messages_and_the_files_are_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec, "INLINE_BYTES", 0)
    streamed, results, batch, (sent, left) = _fidelity(tmp_path)
    _check_fidelity(streamed, results, batch)
    assert batch.meta["mode"] == "file"
    assert [payload for _, _, _, payload in batch.requests] == sent
    assert left == []  # the input file and the results file, deleted once collected
    journal = (tmp_path / "fidelity" / "journal.jsonl").read_text().splitlines()
    steps = [json.loads(x) for x in journal if '"step"' in x]
    assert any(str(s.get("gemini_file", "")).startswith("files/") for s in steps)


def test_errored_and_expired_requests_are_messages_with_their_kind(tmp_path: Path) -> None:
    script = [faux_text("first", usage=USAGE), faux_error("overloaded"), faux_text("later")]
    with fake_vendor(scenarios={MODEL.id: script}, batch_delay=0.2, batch_expiry=0.05) as server:
        server.batches.expire_after = 2
        requests = [BatchRequest(f"r{i}", MODEL, _ask(f"q{i}"), _options(server)) for i in range(3)]

        async def run() -> tuple[list[Any], int, list[Any]]:
            job = await submit(requests, store=tmp_path, name="fates")
            first = await job.collect(interval=0.02, timeout=20)
            server.batches.expiry = None
            again = await job.resubmit_expired()
            return first, again, await job.collect(interval=0.02, timeout=20)

        first, again, second = anyio.run(run)

    assert [r.outcome for r in first] == ["succeeded", "errored", "expired"]
    assert first[0].message.text() == "first"
    errored, expired = first[1].message, first[2].message
    assert errored.error is not None and errored.error.kind == "overloaded"
    assert expired.error is not None and expired.error.kind == "expired"
    assert errored.stop_reason == expired.stop_reason == "error"
    assert again == 1
    assert [r.outcome for r in second] == ["succeeded", "errored", "succeeded"]
    assert second[2].message.text() == "later"


def test_a_cancelled_job_gives_aborted_messages(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["never"] * 2}, batch_delay=3600) as server:
        requests = [BatchRequest(f"c{i}", MODEL, _ask("q"), _options(server)) for i in range(2)]

        async def run() -> tuple[list[Any], Any]:
            job = await submit(requests, store=tmp_path, name="cancel")
            await job.cancel()
            return await job.collect(interval=0.02, timeout=20), await job.poll()

        results, progress = anyio.run(run)
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    error = results[0].message.error
    assert error is not None and error.kind == "aborted"
    assert progress.cancelled == 2


def test_listing_pages_through_every_batch() -> None:
    with fake_vendor(scenarios={MODEL.id: ["x"]}, batch_delay=3600) as server:
        backend = server.batches
        for i in range(130):
            req: list[tuple[str, str, str, dict[str, Any]]] = [
                (f"l_{i}", "google-generative-ai", MODEL.id, {})
            ]
            backend.create("gemini", req, prefix="gb", meta={"tag": f"t{i}", "model": MODEL.id})
        model = MODEL.replace(base_url=server.url + "/v1beta")
        found = anyio.run(
            lambda: vendor_batches(model, options=StreamOptions(api_key=KEY), limit=1000)
        )
        want = [b.id for b in backend.listing("gemini")]
    assert [s.id for s in found] == want and len(want) == 130
    assert all(s.state == "running" and s.counts.total == 1 for s in found)
    assert found[0].tag == "t129"


def test_find_matches_the_part_s_display_name() -> None:
    with fake_vendor(scenarios={MODEL.id: ["a"] * 4}, batch_delay=3600) as server:
        session = _session(server)
        model = session.model

        def part(tag: str) -> BatchPart:
            line = codec.line(f"{tag}_0", plan_call(WIRE, model, CTX).request, model)  # type: ignore[arg-type]
            return BatchPart(tag, model, [line])

        async def run() -> tuple[str, str, list[str], list[str]]:
            try:
                mine = await codec.submit(session, part("mine"))
                other = await codec.submit(session, part("other"))
                return (
                    mine,
                    other,
                    await codec.find(session, part("mine"), 0.0),
                    (await codec.find(session, part("nobody"), 0.0)),
                )
            finally:
                await session.aclose()

        mine, other, found, none = anyio.run(run)
    assert found == [mine] and other != mine and none == []


def test_a_create_whose_answer_was_lost_is_found_not_made_twice(tmp_path: Path) -> None:
    with fake_vendor(scenarios={MODEL.id: ["one", "two", "three"]}, batch_delay=0.05) as server:
        requests = [BatchRequest(f"f{i}", MODEL, _ask("q"), _options(server)) for i in range(3)]
        pattern = r"/v1beta/models/[^/]+:batchGenerateContent"
        hold = server.batches.holds.add("POST", pattern, when="after")

        async def crash() -> None:
            async with anyio.create_task_group() as tg:

                async def lose() -> None:
                    await anyio.to_thread.run_sync(hold.wait)
                    tg.cancel_scope.cancel()

                tg.start_soon(lose)
                await submit(requests, store=tmp_path, name="lost")

        anyio.run(crash)
        hold.release()

        async def again() -> list[Any]:
            job = await submit(requests, store=tmp_path, name="lost")
            return await job.collect(interval=0.02, timeout=20)

        results = anyio.run(again)
        assert server.batches.created == 1
    assert [r.message.text() for r in results] == ["one", "two", "three"]


def test_the_upload_url_s_host_is_never_followed() -> None:
    assert codec._same_host("https://evil.test/upload/v1beta/files?upload_id=1", "http://x:1") == (
        "http://x:1/upload/v1beta/files?upload_id=1"
    )


# --- 3. hostile vendor bytes ---------------------------------------------------------------


class _Canned:
    """A session whose every GET answers `body`, and records what was recorded."""

    model = MODEL.replace(base_url="https://g.test/v1beta")
    settings = BatchSettings()

    def __init__(self, body: bytes, keys: list[str] | None = None) -> None:
        self.body = body
        self.recorded: dict[str, Any] = {} if keys is None else {"keys": pack_keys(keys)}

    async def send(self, method: str, url: str, **_: Any) -> httpx.Response:
        return httpx.Response(200, content=self.body)

    def record(self, **fields: Any) -> None:
        self.recorded.update(fields)

    def url(self, path: str) -> str:
        return "https://g.test/v1beta/" + path


def _read(
    session: _Canned, where: dict[str, Any], vendor_state: str = "BATCH_STATE_SUCCEEDED"
) -> list[RawResult]:
    status = BatchStatus(id="h", state=STATES[vendor_state], vendor_state=vendor_state,
                         where=where)  # fmt: skip

    async def read() -> list[RawResult]:
        return [r async for r in codec.results(session, status)]

    return anyio.run(read)


FILE_LINES = [
    b"not json at all",  # line 0: k_0 by its place
    b'{"key": "k_1", "response": "a string"}',
    b'{"key": "k_2", "error": 12}',
    b'{"key": "k_3", "response": {"candidates": 5, "usageMetadata": {"promptTokenCount": 1e400}}}',
    b'{"key": "stranger", "response": {}}',
    b'{"key": "k_1", "response": {}}',  # a repeat: not a second result
    b'{"response": {"candidates": []}}',  # line 6: k_6 by its place
    b'{"key": "k_7", "error": {"code": 8, "message": "slow down"}}',
    b'{"key": "k_8", "status": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "x"}}',
    b"[" * 100_000 + b"]" * 100_000,  # line 9
    b'{"key": "k_10"}',
    b'"just a string"',  # line 11
]


def test_hostile_file_lines_never_raise_and_every_request_has_one_result() -> None:
    keys = [f"k_{i}" for i in range(13)]
    found = _read(_Canned(b"\n".join(FILE_LINES) + b"\n\n", keys), {"responses_file": "files/r"})
    by_id: dict[str, list[RawResult]] = {}
    for r in found:
        by_id.setdefault(r.custom_id, []).append(r)
    assert sorted(k for k in by_id if k) == sorted(keys)
    assert all(len(v) == 1 for k, v in by_id.items() if k)
    assert len(by_id[""]) == 1  # the stranger's line, kept with no id
    for k in ("k_0", "k_1", "k_9", "k_10", "k_11", "k_12"):
        assert (by_id[k][0].outcome, by_id[k][0].kind) == ("errored", "protocol"), k
    assert by_id["k_2"][0].outcome == "errored"
    assert by_id["k_3"][0].outcome == by_id["k_6"][0].outcome == "succeeded"
    assert (by_id["k_7"][0].kind, by_id["k_8"][0].kind) == ("rate_limit", "rate_limit")
    assert by_id["k_8"][0].status == 429


def test_inline_responses_without_their_key_are_matched_by_place() -> None:
    items = [
        {"response": {"candidates": []}},
        {"response": {"candidates": []}, "metadata": {"key": "k_2"}},
        {"error": {"code": 3, "message": "bad"}, "metadata": {}},
        7,
    ]
    body = json.dumps({"name": "batches/h", "response": {"inlinedResponses": {
        "inlinedResponses": items}}}).encode()  # fmt: skip
    found = _read(_Canned(body, ["k_0", "k_1", "k_2", "k_3", "k_4"]), {"inline": True},
                  "BATCH_STATE_EXPIRED")  # fmt: skip
    outcomes = {r.custom_id: (r.outcome, r.kind) for r in found}
    assert outcomes == {
        "k_0": ("succeeded", None), "k_2": ("succeeded", None),
        "k_3": ("errored", "protocol"), "k_1": ("expired", "expired"),
        "k_4": ("expired", "expired"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        b"null", b"[]", b"{}", b'{"name": 5}', b'{"name": "batches/../../x"}',
        b'{"name": "batches/a?b"}', b"not json", b'{"name": "files/a"}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
)  # fmt: skip
def test_a_batch_without_a_usable_name_is_a_protocol_error(body: bytes) -> None:
    session = _Canned(body)
    with pytest.raises(BatchHTTPError) as caught:
        anyio.run(codec.status, session, "ok")
    assert caught.value.kind == "protocol"


@pytest.mark.parametrize(
    "meta",
    [
        {"state": 5, "batchStats": {"requestCount": "9" * 40, "successfulRequestCount": -3}},
        {"state": "BATCH_STATE_WHATEVER", "batchStats": [1], "createTime": "9999-99-99T00:00Z"},
        {"state": None, "batchStats": {"requestCount": 1e400}, "createTime": 12,
         "output": {"responsesFile": "files/../x"}, "displayName": ["t"], "model": 3},
    ],
)  # fmt: skip
def test_a_hostile_batch_reads_as_a_running_batch(meta: dict[str, Any]) -> None:
    back = codec._status({"name": "batches/b", "metadata": meta})
    assert back is not None and back.state == "running"
    assert back.counts.succeeded == back.counts.errored == 0
    assert back.created_at is None and back.where == {} and back.tag is None


def test_an_id_that_would_move_the_request_is_refused() -> None:
    session = _Canned(b"{}")
    for bad in ("batches/../files/x", "https://evil.test/x", "batches/a/b", "..", "a?b"):
        with pytest.raises(BatchHTTPError):
            anyio.run(codec.status, session, bad)
