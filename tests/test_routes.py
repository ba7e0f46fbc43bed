"""Routes (issue 25): one call over several deployments, falling over before content and
never after, with exact cooldowns, balancing, session affinity and a record per attempt.
Faux models are the deployments; every test runs under asyncio and trio."""

from __future__ import annotations

import collections
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stream_core
from stream_core import (
    AssistantMessage,
    Context,
    Route,
    StreamOptions,
    TextContent,
    UserMessage,
    complete,
    complete_sync,
)
from stream_core.testing import faux_cut, faux_error, faux_model, faux_text

pytestmark = pytest.mark.anyio
CONTEXT = Context(messages=[UserMessage(content="hi")])
FAST = StreamOptions(retry_backoff=0.001)


class Clock:
    """A clock the test moves: cooldown deadlines without real waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _events(route: Route, options: StreamOptions = FAST) -> tuple[list[Any], Any]:
    events = []
    async with stream_core.stream(route, CONTEXT, options) as s:
        async for event in s:
            events.append(event)
    return events, s.message


def _one_start_one_end(events: list[Any]) -> None:
    kinds = [e.type for e in events]
    assert kinds.count("message_start") == 1 and kinds[0] == "message_start", kinds
    assert kinds.count("message_end") == 1 and kinds[-1] == "message_end", kinds


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("rate_limit", 429),
        ("overloaded", 529),
        ("server", 503),
        ("server", None),
        ("overloaded", None),
        ("network", None),
        ("timeout", None),
        ("auth", 401),
        ("not_found", 404),
    ],
)
async def test_a_failure_before_content_moves_to_the_next_deployment(
    kind: Any, status: int | None
) -> None:
    first = faux_model([faux_error(kind, status=status)])
    second = faux_model([faux_text("from the second")])
    events, message = await _events(Route([first, second]))
    _one_start_one_end(events)
    assert message.error is None and message.text() == "from the second"
    assert message.model == second.id
    assert [a.kind for a in message.attempts] == [kind, None]
    assert [a.model for a in message.attempts] == [first.id, second.id]
    assert message.attempts[0].sent and not message.attempts[0].content_started
    assert first.remaining == 0 and len(first.requests) == 1  # sent once, no retry


async def test_a_429_with_retry_after_30_is_answered_by_the_next_vendor_at_once() -> None:
    first = faux_model([faux_error("rate_limit", status=429, retry_after=30)])
    second = faux_model([faux_text("ok")])
    started = time.monotonic()
    message = await complete(Route([first, second]), CONTEXT, FAST)
    assert time.monotonic() - started < 1.0
    assert message.text() == "ok" and len(first.requests) == 1
    assert message.attempts[0].retry_after == 30


async def test_the_next_call_skips_a_cooled_deployment_until_its_deadline() -> None:
    clock = Clock()
    first = faux_model([faux_error("rate_limit", status=429, retry_after=30), "back"])
    second = faux_model(["two", "three"])
    route = Route([first, second], clock=clock)
    assert (await complete(route, CONTEXT, FAST)).text() == "two"
    # Within the 30 s the first is not sent anything.
    clock.now += 29
    message = await complete(route, CONTEXT, FAST)
    assert message.text() == "three" and len(first.requests) == 1
    assert [a.model for a in message.attempts] == [second.id]
    # After it, it serves again.
    clock.now += 2
    assert (await complete(route, CONTEXT, FAST)).text() == "back"


async def test_a_shorter_later_retry_after_never_shortens_a_deadline() -> None:
    clock = Clock()
    only = faux_model([])
    route = Route([only], clock=clock)
    (d,) = route.deployments
    route.cool(d, "rate_limit", 60)
    deadline = d.cool_until
    route.cool(d, "rate_limit", 5)
    assert d.cool_until == deadline
    route.cool(d, "rate_limit", 120)
    assert d.cool_until == clock.now + 120


async def test_default_cooldowns_grow_on_repeats_and_auth_is_out_for_long() -> None:
    clock = Clock()
    route = Route([faux_model([]), faux_model([])], clock=clock, cooldown=2, long_cooldown=900)
    a, b = route.deployments
    waits = []
    for _ in range(4):
        route.cool(a, "server", None)
        waits.append(a.cool_until - clock.now)
    assert waits == [2, 4, 8, 16]
    route.cool(b, "auth", None)
    assert b.cool_until - clock.now == 900


async def test_overflow_skips_a_small_window_unsent_and_moves_to_one_that_fits() -> None:
    small = faux_model(["never"])
    small.context_window = 10
    large = faux_model(["fits"])
    big = Context(messages=[UserMessage(content="word " * 400)])
    message = await complete(Route([small, large]), big, FAST)
    assert message.text() == "fits" and small.requests == []
    assert message.attempts is not None
    assert [(a.kind, a.sent) for a in message.attempts] == [
        ("context_overflow", False),
        (None, True),
    ]


async def test_a_vendor_overflow_moves_on_to_the_next_deployment() -> None:
    first = faux_model([faux_error("context_overflow", status=400)])
    second = faux_model(["fits"])
    message = await complete(Route([first, second]), CONTEXT, FAST)
    assert message.text() == "fits"
    assert message.attempts[0].kind == "context_overflow"


@pytest.mark.parametrize("kind", ["invalid_request", "protocol"])
async def test_a_caller_mistake_fails_at_once_without_touching_the_second(kind: Any) -> None:
    first = faux_model([faux_error(kind, status=400 if kind == "invalid_request" else None)])
    second = faux_model(["never"])
    events, message = await _events(Route([first, second]))
    _one_start_one_end(events)
    assert message.error is not None and message.error.kind == kind
    assert second.requests == [] and len(message.attempts) == 1


async def test_a_bad_option_raises_at_the_call_as_for_one_model() -> None:
    first = faux_model(["x"])
    with pytest.raises((TypeError, ValueError), match="max_tokens"):
        stream_core.stream(Route([first]), CONTEXT, StreamOptions(max_tokens=-1))


@pytest.mark.parametrize("kind", ["refusal", "content_filter"])
async def test_refusals_fall_over_only_when_the_route_is_told_to(kind: Any) -> None:
    message = await complete(
        Route([faux_model([faux_error(kind)]), faux_model(["other"])]), CONTEXT, FAST
    )
    assert message.error is not None and message.error.kind == kind
    told = Route([faux_model([faux_error(kind)]), faux_model(["other"])], refusals_fall_over=True)
    assert (await complete(told, CONTEXT, FAST)).text() == "other"


async def test_a_drop_after_three_deltas_keeps_exactly_those_and_never_splices() -> None:
    five = AssistantMessage(
        api="faux", provider="faux", model="m", content=[TextContent(text=t) for t in "abcde"]
    )
    first = faux_model([faux_cut(five, after=5)])  # three texts reach the caller
    second = faux_model(["SPLICED"])
    events, message = await _events(Route([first, second]))
    _one_start_one_end(events)
    deltas = [
        e.delta.delta for e in events if e.type == "message_update" and hasattr(e.delta, "delta")
    ]
    assert message.error is not None and message.error.kind == "network"
    assert "SPLICED" not in message.text() and second.requests == []
    assert deltas == ["a", "b", "c"] and message.text() == "abc"
    assert first.id in message.error.message and "skips it" in message.error.message
    assert message.attempts[-1].content_started


async def test_every_deployment_down_ends_with_the_last_kind_in_bounded_time() -> None:
    route = Route(
        [
            faux_model([faux_error("server", status=503)]),
            faux_model([faux_error("overloaded", status=529)]),
            faux_model([faux_error("rate_limit", status=429)]),
        ]
    )
    started = time.monotonic()
    events, message = await _events(route)
    assert time.monotonic() - started < 2.0
    _one_start_one_end(events)
    assert message.error is not None and message.error.kind == "rate_limit"
    assert [a.kind for a in message.attempts] == ["server", "overloaded", "rate_limit"]


async def test_when_every_deployment_cools_the_call_ends_rate_limit_with_the_wait() -> None:
    clock = Clock()
    route = Route([faux_model(["a"]), faux_model(["b"])], clock=clock)
    a, b = route.deployments
    route.cool(a, "rate_limit", 90)
    route.cool(b, "rate_limit", 40)
    events, message = await _events(route, StreamOptions(max_retry_delay=5))
    _one_start_one_end(events)
    assert message.error is not None and message.error.kind == "rate_limit"
    assert message.error.retry_after == pytest.approx(40)


async def test_when_every_deployment_cools_briefly_the_call_waits_for_the_first() -> None:
    route = Route([faux_model(["a"]), faux_model(["b"])])
    a, b = route.deployments
    route.cool(a, "rate_limit", 0.2)
    route.cool(b, "rate_limit", 5)
    started = time.monotonic()
    message = await complete(route, CONTEXT, FAST)
    assert message.text() == "a" and 0.15 < time.monotonic() - started < 2


async def test_weighted_shuffle_follows_the_weights() -> None:
    route = Route([faux_model([]), faux_model([])], strategy="weighted", weights=[3, 1])
    firsts = collections.Counter(route.plan()[0].index for _ in range(2000))
    assert 0.70 < firsts[0] / 2000 < 0.80  # 3:1 -> 75 %


async def test_least_busy_and_fastest_order_the_deployments() -> None:
    route = Route([faux_model([]), faux_model([]), faux_model([])], strategy="least_busy")
    a, b, c = route.deployments
    a.in_flight, b.in_flight, c.in_flight = 2, 0, 1
    assert [d.index for d in route.plan()] == [1, 2, 0]
    fast = Route([faux_model([]), faux_model([])], strategy="fastest")
    x, y = fast.deployments
    fast.served(x, 900.0, None)
    assert fast.plan()[0] is y  # unmeasured first
    fast.served(y, 1500.0, None)
    assert fast.plan()[0] is x


async def test_least_busy_balances_concurrent_calls() -> None:
    import anyio

    models = [faux_model(["x"] * 20, delay=0.01, chunk_size=1) for _ in range(2)]
    route = Route(models, strategy="least_busy")
    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(complete, route, CONTEXT, FAST)
    served = [20 - m.remaining for m in models]
    assert abs(served[0] - served[1]) <= 4, served


async def test_a_session_stays_on_its_deployment_and_moves_when_it_cools() -> None:
    clock = Clock()
    models = [faux_model(["a1", "a2", "a3"]), faux_model(["b1", "b2", "b3"])]
    route = Route(models, strategy="weighted", weights=[1, 1000], clock=clock)
    opts = StreamOptions(session_id="s-1", retry_backoff=0.001)
    first = await complete(route, CONTEXT, opts)
    for _ in range(2):
        assert (await complete(route, CONTEXT, opts)).model == first.model
    held = next(d for d in route.deployments if d.model.id == first.model)
    route.cool(held, "rate_limit", 60)
    moved = await complete(route, CONTEXT, opts)
    assert moved.model != first.model and moved.error is None


async def test_attempts_round_trip_through_jsonl_and_stay_out_while_unset() -> None:
    plain = AssistantMessage(api="faux", provider="faux", model="m")
    assert "attempts" not in plain.model_dump_json()
    message = await complete(
        Route([faux_model([faux_error("server", status=503)]), faux_model(["ok"])]),
        CONTEXT,
        FAST,
    )
    again = AssistantMessage.model_validate_json(message.model_dump_json())
    assert again.attempts == message.attempts and len(again.attempts or []) == 2


def test_a_route_works_without_an_event_loop() -> None:
    route = Route([faux_model([faux_error("overloaded", status=529)]), faux_model(["sync"])])
    message = complete_sync(route, CONTEXT, FAST)
    assert message.text() == "sync" and [a.kind for a in message.attempts or []] == [
        "overloaded",
        None,
    ]


def test_a_route_refuses_what_is_not_a_list_of_models() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Route([])
    with pytest.raises(TypeError, match=r"deployments\[1\]"):
        Route([faux_model([]), "gpt-4o"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="strategy"):
        Route([faux_model([])], strategy="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"weights\[0\]"):
        Route([faux_model([])], weights=[0])


async def test_one_conversation_falls_over_across_all_eight_apis() -> None:
    import httpx

    from contract_tests.kit import apis_under_test, contract_model, options, text_case

    apis = apis_under_test()
    assert len(apis) == 8, apis
    serving: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down.test":
            return httpx.Response(503, json={"error": {"message": "down for maintenance"}})
        json.loads(request.content)  # every payload the next vendor gets is JSON it reads
        case = text_case(serving[-1])
        return httpx.Response(200, headers=case.headers, content=case.body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    context = Context(system_prompt="Be brief.", messages=[UserMessage(content="Hello")])
    previous = apis[-1]
    for api in apis:
        serving.append(api)
        down = contract_model(previous).model_copy(update={"base_url": "https://down.test"})
        route = Route([down, contract_model(api)])
        message = await complete(route, context, options(client=client))
        assert message.error is None, (api, message.error)
        assert message.api == api and message.text()
        first, served = message.attempts or []
        assert first.kind in ("server", "overloaded") and served.kind is None
        context.messages += [message, UserMessage(content=f"and now {api}?")]
        previous = api
    assert {m.api for m in context.messages if isinstance(m, AssistantMessage)} == set(apis)


FAILURES = st.one_of(
    st.tuples(st.just("status"), st.sampled_from([400, 401, 404, 408, 429, 500, 503, 529])),
    st.tuples(
        st.just("event"),
        st.sampled_from(["rate_limit", "overloaded", "server", "invalid_request", "refusal"]),
    ),
    st.tuples(st.just("cut"), st.integers(min_value=0, max_value=7)),
)


@settings(max_examples=60, deadline=None)
@given(failure=FAILURES, second_fails=st.booleans())
def test_wherever_a_deployment_fails_no_delta_is_ever_duplicated_or_spliced(
    failure: tuple[str, Any], second_fails: bool
) -> None:
    how, value = failure
    five = AssistantMessage(
        api="faux", provider="faux", model="m", content=[TextContent(text=t) for t in "abcde"]
    )
    if how == "status":
        turn = faux_error("server" if value >= 500 else "invalid_request", status=value)
    elif how == "event":
        turn = faux_error(value)
    else:
        turn = faux_cut(five, after=value)
    second = faux_model([faux_error("server", status=500) if second_fails else "XYZ"])
    route = Route([faux_model([turn]), second])
    with stream_core.stream_sync(route, CONTEXT, FAST) as s:
        events = list(s)
    _one_start_one_end(events)
    message = events[-1].message
    updates = [e.delta for e in events if e.type == "message_update"]
    deltas = [u.delta for u in updates if u.type == "text_delta"]
    assert "".join(deltas) == message.text()
    assert not ("XYZ" in message.text() and any(c in message.text() for c in "abcde"))
    assert len(second.requests) <= 1 + FAST.max_retries  # the last one keeps its retries


async def test_one_parent_span_per_route_call_and_a_child_per_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from stream_core import _otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(_otel, "_tracer", provider.get_tracer("stream_core"))
    route = Route([faux_model([faux_error("server", status=503)]), faux_model(["ok"])])
    message = await complete(route, CONTEXT, FAST)
    assert message.text() == "ok"
    spans = exporter.get_finished_spans()
    (parent,) = [s for s in spans if s.name == "route"]
    children = [s for s in spans if s.name.startswith("chat ")]
    assert len(children) == 2
    assert all(
        c.parent is not None and c.parent.span_id == parent.context.span_id for c in children
    )
    assert parent.attributes is not None and parent.attributes["stream_core.route.attempts"] == 2


def test_the_readme_route_runs_offline_and_records_both_vendors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import re
    from pathlib import Path

    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    found = re.search(r"### Two vendors, one call\n.*?```python\n(.*?)```", readme, re.S)
    assert found is not None
    namespace: dict[str, Any] = {
        "model": stream_core.get_model("anthropic", "claude-sonnet-4-5"),
        "context": CONTEXT,
        "complete_sync": complete_sync,
        "get_model": stream_core.get_model,
    }
    exec(found.group(1), namespace)  # no keys: both end `auth` before any request
    answer = namespace["answer"]
    assert [a.provider for a in answer.attempts] == ["anthropic", "openai"]
    assert answer.error is not None and answer.error.kind == "auth"


@pytest.mark.parametrize("fails", [False, True])
async def test_an_answer_still_streaming_when_it_started_is_recorded_at_its_end(
    fails: bool,
) -> None:
    clock = Clock()
    long = AssistantMessage(
        api="faux", provider="faux", model="m", content=[TextContent(text=t) for t in "abcdef"]
    )
    turn = faux_cut(long, after=4) if fails else long
    first = faux_model([turn], chunk_size=1, delay=0.005)
    route = Route([first, faux_model(["never"])], clock=clock)
    events, message = await _events(route)
    _one_start_one_end(events)
    assert events[-1].message is message and message.attempts is not None
    (attempt,) = message.attempts
    assert attempt.content_started and attempt.ms > 0
    assert attempt.kind == ("network" if fails else None)
    (d, _) = route.deployments
    assert d.in_flight == 0 and (d.cool_until > clock.now) is fails
    if fails:
        assert message.error is not None and "skips it" in message.error.message


async def test_options_cancel_ends_a_wait_for_a_cooling_deployment_at_once() -> None:
    import anyio

    route = Route([faux_model(["a"])])
    route.cool(route.deployments[0], "rate_limit", 20)
    cancel = anyio.Event()
    opts = StreamOptions(cancel=cancel, max_retry_delay=60, retry_backoff=0.001)
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _set_later(cancel))
        events, message = await _events(route, opts)
    _one_start_one_end(events)
    assert message.error is not None and message.error.kind == "aborted"
    assert time.monotonic() - started < 2


async def _set_later(event: Any) -> None:
    import anyio

    await anyio.sleep(0.1)
    event.set()
