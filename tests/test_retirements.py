"""Retirement dates (issue 37): `retirement(model)` from the shipped `retirements.json`, one
warning in the `stream_core` log when a call goes to a model past its date, and the dates
in `stream-core models`. Every test pins the date (`_retirements.clock`): none depends on
today's."""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import stream_core
from stream_core import (
    Context,
    StreamOptions,
    UserMessage,
    _retirements,
    complete,
    get_model,
    list_models,
    retirement,
)
from stream_core import _models as models_module
from stream_core.testing import fake_vendor

CONTEXT = Context(messages=[UserMessage(content="hi")])
BEFORE = datetime.date(2026, 11, 29)
AFTER = datetime.date(2026, 12, 1)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test warns afresh and reads the shipped table (a test may swap it)."""
    monkeypatch.setattr(_retirements, "_warned", set())
    monkeypatch.setattr(_retirements, "_table", None)
    yield


def _on(monkeypatch: pytest.MonkeyPatch, day: datetime.date) -> None:
    monkeypatch.setattr(_retirements, "clock", lambda: day)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "stream_core" and r.levelno == logging.WARNING and "retired" in r.getMessage()
    ]


# --- the data -----------------------------------------------------------------------------


def test_claude_sonnet_4_5_retires_on_2026_11_30() -> None:
    for model_id in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"):
        found = retirement(get_model("anthropic", model_id))
        assert found is not None
        assert found.date == datetime.date(2026, 11, 30)
        assert found.replacement == "claude-sonnet-5-5"
        assert found.source.startswith("https://platform.claude.com/")
        assert found.retired(AFTER) and not found.retired(BEFORE)
        assert found.retired(found.date)  # from that day on
    assert retirement(("anthropic", "claude-sonnet-4-5")) == retirement(
        get_model("anthropic", "claude-sonnet-4-5")
    )
    # Partner platforms keep their own schedules; a model with no row has none.
    assert retirement(get_model("anthropic-vertex", "claude-sonnet-4-5@20250929")) is None
    assert retirement(get_model("anthropic", "claude-sonnet-4-6")) is None
    assert retirement(("nobody", "nothing")) is None
    assert stream_core.Retirement is _retirements.Retirement


def test_every_row_names_a_catalog_model_a_date_and_its_source() -> None:
    data = json.loads(models_module.package_data("retirements.json"))
    rows = data["retirements"]
    assert len(rows) >= 10
    keys = set()
    for row in rows:
        assert set(row) <= {"provider", "model", "date", "replacement", "source", "note"}, row
        datetime.date.fromisoformat(row["date"])
        assert row["source"].startswith("https://"), row
        # The catalog knows every model listed, or (an older snapshot id such as
        # gpt-4-0613, which the vendor also names) the model it is a snapshot of.
        try:
            assert get_model(row["provider"], row["model"]).id == row["model"]
        except KeyError:
            ids = {m.id for m in list_models(row["provider"])}
            assert any(row["model"].startswith(f"{i}-") for i in ids), row
        keys.add((row["provider"], row["model"]))
    assert len(keys) == len(rows)  # one row a model


def test_the_data_file_ships_in_the_package() -> None:
    # Package data is read through the package's loader, as catalog.json is: a wheel built
    # from `packages = ["stream_core"]` carries every file of the folder.
    assert models_module.package_data("retirements.json").startswith(b"{")


def test_a_table_that_does_not_read_is_left_out_row_by_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows: list[Any] = [
        {"provider": "p", "model": "ok", "date": "2026-01-02", "replacement": 7, "source": None},
        {"provider": "p", "model": "bad date", "date": "2026-13-45"},
        {"provider": "p", "model": 1, "date": "2026-01-02"},
        ["not", "a", "row"],
        None,
        {"provider": "p", "model": "big", "date": "9" * 400},
    ]
    data = json.dumps({"retirements": rows}).encode()
    monkeypatch.setattr(models_module, "package_data", lambda name: data)
    found = retirement(("p", "ok"))
    assert found is not None and found.replacement is None and found.source == ""
    assert retirement(("p", "bad date")) is None and retirement(("p", "big")) is None
    for junk in (b"", b"[1, 2]", b'{"retirements": 5}', b"\xff\xfe"):
        monkeypatch.setattr(_retirements, "_table", None)
        monkeypatch.setattr(models_module, "package_data", lambda name, junk=junk: junk)
        assert retirement(("p", "ok")) is None


# --- the warning --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_call_to_a_retired_model_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _on(monkeypatch, AFTER)
    model = get_model("anthropic", "claude-sonnet-4-5")
    with fake_vendor(scenarios={model.id: ["one", "two"]}) as server:
        opts = StreamOptions(api_key="sk-test-secret", base_url=server.url)
        with caplog.at_level(logging.WARNING, logger="stream_core"):
            first = await complete(model, CONTEXT, opts)
            second = await complete(model, CONTEXT, opts)
    # Sent as asked: the vendor (here, the fake) decides; the call is not refused.
    assert (first.text(), second.text()) == ("one", "two")
    said = _warnings(caplog)
    assert len(said) == 1
    assert "anthropic/claude-sonnet-4-5" in said[0] and "2026-11-30" in said[0]
    assert "claude-sonnet-5-5" in said[0] and "https://" in said[0]
    assert "sk-test-secret" not in caplog.text


@pytest.mark.anyio
async def test_no_warning_before_the_date_or_for_a_model_with_none(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _on(monkeypatch, BEFORE)
    retiring = get_model("anthropic", "claude-sonnet-4-5")
    current = get_model("anthropic", "claude-sonnet-4-6")
    with fake_vendor(scenarios={"*": ["a", "b"]}) as server:
        opts = StreamOptions(api_key="k", base_url=server.url)
        with caplog.at_level(logging.WARNING, logger="stream_core"):
            await complete(retiring, CONTEXT, opts)
            await complete(current, CONTEXT, opts)
    assert _warnings(caplog) == []
    # The day it retires, the next call says so.
    _on(monkeypatch, datetime.date(2026, 11, 30))
    _retirements.warn_if_retired(retiring)
    _retirements.warn_if_retired(retiring)
    assert len(_warnings(caplog)) == 1


def test_a_retired_model_raises_no_python_warning(
    monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    # The suite runs with warnings as errors: a retired model in a fixture must not fail it.
    _on(monkeypatch, AFTER)
    _retirements.warn_if_retired(get_model("openai", "gpt-4-turbo"))
    assert len(recwarn) == 0


# --- stream-core models -------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    from stream_core._cli import main

    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _notes(out: str, provider: str) -> dict[str, str]:
    lines = out.splitlines()
    start = lines.index(f"{provider}: retirement dates (the vendor's; calls fail from that day on)")
    notes: dict[str, str] = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        model_id, _, note = line.strip().partition("  ")
        notes[model_id] = note.strip()
    return notes


def test_models_lists_the_dates_with_a_note(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _on(monkeypatch, BEFORE)
    notes = _notes(_cli(capsys, "models", "anthropic"), "anthropic")
    assert notes["claude-sonnet-4-5"] == "retires on 2026-11-30; replacement claude-sonnet-5-5"
    assert notes["claude-sonnet-4-0"] == "retired 2026-06-15; replacement claude-sonnet-4-6"
    assert "claude-sonnet-4-6" not in notes
    _on(monkeypatch, AFTER)
    out = _cli(capsys, "models", "anthropic")
    assert _notes(out, "anthropic")["claude-sonnet-4-5"] == (
        "retired 2026-11-30; replacement claude-sonnet-5-5"
    )
    # The table itself is unchanged: the notes follow it.
    row = next(line.split() for line in out.splitlines() if line.startswith("claude-sonnet-4-5 "))
    assert row[:2] == ["claude-sonnet-4-5", "anthropic-messages"]
    # Only the models shown are listed; a provider with no dates gets no notes.
    listed = {m.id for m in list_models("anthropic")}
    assert set(notes) <= listed
    assert "retirement dates" not in _cli(capsys, "models", "groq")
