"""Seeing and clearing what the limiter holds (issue 37), without reading Redis keys by
hand: `inspect_limits` shows a 429's pause, a learned limit, a route's cooldown and
failures, a budget with its reservation and the tallies, from the in-process store, a
file and a real `redis-server`; `clear_limits` forgets keys with or without budgets; the
`stream-core limits show|clear` command does the same. No credential in any of it."""

from __future__ import annotations

import gc
import json
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from limited_vendor import LimitedVendor
from redis_server import session_url

from stream_core import (
    Context,
    LimitsView,
    Model,
    Route,
    StreamOptions,
    UserMessage,
    clear_limits,
    complete,
    configure_limits,
    hold_budget,
    inspect_limits,
    tally,
)
from stream_core._cli import main

SECRET = "sk-test-" + "hunter2" * 5
CTX = Context(messages=[UserMessage(content="hi")])


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    url, server = session_url()
    yield url
    if server is not None:
        server.stop()


@pytest.fixture
def vendors() -> Iterator[tuple[LimitedVendor, LimitedVendor, LimitedVendor]]:
    learned = LimitedVendor(requests=100, window=3600.0).start()
    # Always a 429 with no rate-limit headers, and a Retry-After of up to an hour.
    failing = LimitedVendor(requests=100, headers=False, concurrency=0, window=3600.0).start()
    fine = LimitedVendor(requests=100).start()
    yield learned, failing, fine
    for v in (learned, failing, fine):
        v.stop()


def _model(v: LimitedVendor, name: str = "m-1") -> Model:
    return Model(
        id=name, api="openai-completions", provider="openai", base_url=v.url, max_tokens=20
    )


async def _fill(vendors: tuple[LimitedVendor, LimitedVendor, LimitedVendor]) -> None:
    """A learned limit, a 429's pause with a route's cooldown, a held budget, a tally."""
    learned, failing, fine = vendors
    opts = StreamOptions(api_key=SECRET, max_retries=0)
    assert (await complete(_model(learned, "m-learn"), CTX, opts)).error is None
    routed = await complete(Route([_model(failing), _model(fine)]), CTX, opts)
    assert routed.error is None and [a.kind for a in routed.attempts or []] == [
        "rate_limit",
        None,
    ]
    assert await hold_budget([("eval", 0.25, "batch-9", 3600.0)]) is None
    await tally("run-3", done=1)


def _no_secret(text: str) -> None:
    assert "hunter2" not in text


def _check(view: LimitsView, failing: LimitedVendor, shared: bool = True) -> None:
    now = view.now
    by_model = {k.model: k for k in view.keys if k.model == "m-learn"}
    learned = by_model["m-learn"]
    assert learned.limits["requests"].limit == 100
    assert learned.limits["requests"].remaining <= 99
    assert learned.paused_until is None and learned.failures == 0
    (paused,) = [k for k in view.keys if k.base_url == failing.url]
    assert paused.paused_until is not None and paused.paused_until > now
    if shared:  # a route's cooldowns are in the store only when it is shared
        assert paused.cooling_until is not None and paused.cooling_until > now
        assert paused.failures == 1
    else:  # (the in-process store: the Route object keeps them)
        assert paused.cooling_until is None and paused.failures == 0
    for k in view.keys:
        assert re.fullmatch(r"[0-9a-f]{24}", k.key_hash), k.key_hash
        assert k.provider == "openai" and k.key == f"openai|{k.base_url}|{k.key_hash}|{k.model}"
    budget = next(b for b in view.budgets if b.name == "eval")
    assert budget.cap == 1.0
    assert budget.spent == pytest.approx(0.25)
    (held,) = budget.reservations
    assert (held.id, held.amount) == ("batch-9", 0.25)
    assert held.expires_at == pytest.approx(now + 3600, abs=60)
    assert "run-3" in view.tallies
    _no_secret(repr(view))
    _no_secret(json.dumps(view.to_dict()))


@pytest.fixture(params=["memory", "file", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str | None, str]:
    found: str | None = None
    if request.param == "file":
        found = str(tmp_path / "limits.json")
    elif request.param == "redis":
        found = request.getfixturevalue("redis_url")
    prefix = f"t{uuid.uuid4().hex[:12]}"
    configure_limits(store=found, prefix=prefix, budgets={"eval": 1.0, "other": 2.0})
    return found, prefix


@pytest.mark.anyio
async def test_inspect_shows_pauses_limits_cooldowns_budgets_and_tallies(
    where: tuple[str | None, str], vendors: Any
) -> None:
    await _fill(vendors)
    view = await inspect_limits()
    _check(view, vendors[1], shared=where[0] is not None)
    # This process's concurrency cap, learned from the 429 with no rate-limit headers.
    (paused,) = [k for k in view.keys if k.base_url == vendors[1].url]
    assert paused.concurrency_cap is not None


@pytest.mark.anyio
async def test_clear_forgets_keys_and_budgets_only_when_asked(
    where: tuple[str | None, str], vendors: Any
) -> None:
    await _fill(vendors)
    assert await hold_budget([("other", 0.5, "batch-10", 3600.0)]) is None
    # A model's keys only: every API key and base URL of it.
    await clear_limits(_model(vendors[2], "m-learn"))  # another base URL: all the same
    view = await inspect_limits()
    assert {k.model for k in view.keys} == {"m-1"}
    await clear_limits()
    view = await inspect_limits()
    assert view.keys == [] and "run-3" in view.tallies  # tallies are kept
    assert {b.name: len(b.reservations) for b in view.budgets} == {"eval": 1, "other": 1}
    await clear_limits(budgets="eval")
    view = await inspect_limits()
    eval_ = next(b for b in view.budgets if b.name == "eval")  # its cap is still configured
    assert (eval_.spent, eval_.reservations) == (0.0, [])
    assert next(b for b in view.budgets if b.name == "other").spent == pytest.approx(0.5)
    await clear_limits(budgets=True)
    view = await inspect_limits()
    assert all(b.spent == 0.0 and not b.reservations for b in view.budgets)
    with pytest.raises(TypeError):
        await clear_limits(budgets="")


@pytest.mark.anyio
async def test_a_store_written_by_hand_shows_no_credential(tmp_path: Path) -> None:
    """A store holds what another program wrote: a key with a password in its URL and
    a raw API key where the hash goes is shown without either."""
    path = tmp_path / "limits.json"
    key = f"openai|https://user:{SECRET}@h.example/v1?api_key={SECRET}|{SECRET}|m"
    data = {"keys": {key: {"p": 4e9, "n": {"requests": "junk"}}}, "budgets": {}, "held": {}}
    path.write_text(json.dumps(data))
    configure_limits(store=str(path))
    view = await inspect_limits()
    (k,) = view.keys
    assert k.key_hash == "***" and k.limits == {}
    _no_secret(repr(view))


@pytest.mark.anyio
async def test_a_store_that_cannot_be_reached_is_said_so() -> None:
    configure_limits(store="redis://u:hunter2@127.0.0.1:1/0", timeout=0.2)
    with pytest.raises(ConnectionError) as caught:
        await inspect_limits()
    _no_secret(str(caught.value))


# --- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "redis"])
def test_the_cli_shows_and_clears(
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    vendors: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = (
        str(tmp_path / "limits.json") if kind == "file" else request.getfixturevalue("redis_url")
    )
    prefix = f"t{uuid.uuid4().hex[:12]}"
    configure_limits(store=store, prefix=prefix, budgets={"eval": 1.0})
    anyio.run(_fill, vendors)
    at = ["--store", store, "--prefix", prefix]

    assert main(["limits", "show", *at, "--json"]) == 0
    shown = capsys.readouterr().out
    _no_secret(shown)
    found = json.loads(shown)
    assert {k["model"] for k in found["keys"]} == {"m-learn", "m-1"}
    (budget,) = found["budgets"]
    assert budget["name"] == "eval" and budget["reservations"][0]["id"] == "batch-9"
    assert budget["cap"] is None  # the command configured no caps
    assert "run-3" in found["tallies"]

    assert main(["limits", "show", *at]) == 0
    text = capsys.readouterr().out
    _no_secret(text)
    for seen in ("m-learn", "requests", "batch-9", "eval", "run-3", "in "):
        assert seen in text, seen

    # Clearing asks first; with no terminal to ask on, --yes is needed.
    assert main(["limits", "clear", *at, "--budgets"]) == 2
    assert "--yes" in capsys.readouterr().err
    assert main(["limits", "clear", *at, "--model", "openai/m-learn", "--yes"]) == 0
    assert "m-learn" in capsys.readouterr().out
    assert main(["limits", "show", *at, "--json"]) == 0
    assert {k["model"] for k in json.loads(capsys.readouterr().out)["keys"]} == {"m-1"}
    assert main(["limits", "clear", *at, "--budget", "eval", "--yes"]) == 0
    capsys.readouterr()
    assert main(["limits", "show", *at, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["budgets"] == [] or found["budgets"][0]["spent"] == 0.0


def test_the_cli_needs_a_store_and_hides_its_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["limits", "show"]) == 2
    assert "--store" in capsys.readouterr().err
    assert main(["limits", "show", "--store", "redis://u:hunter2@127.0.0.1:1/0"]) == 1
    said = capsys.readouterr()
    _no_secret(said.out + said.err)
    assert "cannot be" in said.err
    assert main(["limits", "clear", "--store", "redis://u:hunter2@127.0.0.1:1/0", "--yes"]) == 1
    said = capsys.readouterr()
    _no_secret(said.out + said.err)
    assert main(["limits", "clear", "--store", "x.json", "--model", "nomodel", "--yes"]) == 2


def test_a_loop_that_ends_under_a_routes_count_leaves_no_socket(
    redis_url: str, vendors: Any
) -> None:
    """A route counts its answer in the shared store on a task of its own; the loop can
    end while the count is opening its connection. That socket, found by the garbage
    collector much later, was an unraisable ResourceWarning in unrelated code (once in
    the middle of `ast.parse`, which CPython 3.11 then failed)."""
    seen: list[str] = []
    before = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(f"{u.exc_value!r}")
    try:
        for _ in range(5):
            prefix = f"t{uuid.uuid4().hex[:12]}"
            configure_limits(store=redis_url, prefix=prefix, budgets={"eval": 1.0})
            anyio.run(_fill, vendors)
            gc.collect()
    finally:
        configure_limits()
        gc.collect()
        sys.unraisablehook = before
    assert not [u for u in seen if "unclosed" in u], seen
