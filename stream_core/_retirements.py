"""The vendors' retirement dates: `retirement(model)`, and the warning a call to a retired
model logs.

The dates are `retirements.json` (shipped in the package, read on first use): one row per
(provider, model id) as the catalog names them, with the date calls start failing, the
vendor's recommended replacement and the page the date was read from. A model on a
partner platform (Bedrock, Vertex AI, Azure) has that platform's own date and no row.

A call to a model past its date (by `today()`, which tests pin) logs one warning per model
and process on the `stream_core` logger, and is sent as asked: the vendor answers it (an
error, usually `not_found`), and a model the vendor still serves under a gateway keeps
working. The library reports what it sees in that log, never with `warnings.warn` (under
a test suite's `-W error` a retired model in an old fixture would fail the suite).
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["Retirement", "retirement", "today", "warn_if_retired"]

logger = logging.getLogger("stream_core")


@dataclass(frozen=True, slots=True)
class Retirement:
    """When the vendor retires a model (`date`, UTC: calls fail from that day on), what it
    recommends instead (`replacement`, None when it names none) and where that was read
    (`source`, a URL)."""

    provider: str
    model: str
    date: datetime.date
    replacement: str | None
    source: str

    def retired(self, on: datetime.date | None = None) -> bool:
        """Whether the model is retired on `on` (default: `today()`)."""
        return (on or today()) >= self.date

    def describe(self, on: datetime.date | None = None) -> str:
        """'retired 2026-11-30' or 'retires on 2027-01-14', and the replacement if any."""
        text = (
            f"retired {self.date.isoformat()}"
            if self.retired(on)
            else f"retires on {self.date.isoformat()}"
        )
        return text + (f"; replacement {self.replacement}" if self.replacement else "")


def _utc_today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


clock = _utc_today
"""What `today()` asks: the UTC date. Tests replace it (`monkeypatch.setattr`)."""


def today() -> datetime.date:
    """The date retirements are judged by (`clock`)."""
    return clock()


_table: dict[tuple[str, str], Retirement] | None = None
_warned: set[tuple[str, str]] = set()


def _load() -> dict[tuple[str, str], Retirement]:
    """The shipped rows, parsed once; a row that does not read is left out, never raised."""
    global _table
    if _table is not None:
        return _table
    from pydantic_core import from_json

    from ._models import package_data

    table: dict[tuple[str, str], Retirement] = {}
    try:
        data: Any = from_json(package_data("retirements.json"))
    except (OSError, ValueError):
        data = {}
    rows = data.get("retirements") if isinstance(data, dict) else None
    for row in rows if isinstance(rows, list) else ():
        found = _row(row)
        if found is not None:
            table[(found.provider, found.model)] = found
    _table = table
    return table


def _row(row: Any) -> Retirement | None:
    if not isinstance(row, dict):
        return None
    provider, model, date = row.get("provider"), row.get("model"), row.get("date")
    replacement, source = row.get("replacement"), row.get("source")
    if not (isinstance(provider, str) and isinstance(model, str) and isinstance(date, str)):
        return None
    try:
        when = datetime.date.fromisoformat(date)
    except ValueError:
        return None
    return Retirement(
        provider=provider,
        model=model,
        date=when,
        replacement=replacement if isinstance(replacement, str) and replacement else None,
        source=source if isinstance(source, str) else "",
    )


def retirement(model: Any) -> Retirement | None:
    """The vendor's retirement of `model` (a `Model`, or `(provider, model id)`), whether
    past or announced, or None when none is known."""
    if isinstance(model, tuple) and len(model) == 2:
        key = (str(model[0]), str(model[1]))
    else:
        key = (str(getattr(model, "provider", "")), str(getattr(model, "id", "")))
    return _load().get(key)


def warn_if_retired(model: Any) -> None:
    """Log, once per model and process, that a call goes to a model past its retirement
    date (`check_call` calls it as each call starts; a dict lookup once loaded)."""
    key = (model.provider, model.id)
    if key in _warned:
        return
    found = _load().get(key)
    if found is None or not found.retired():
        return
    _warned.add(key)
    instead = f"; the vendor recommends {found.replacement}" if found.replacement else ""
    logger.warning(
        "%s/%s was retired by its vendor on %s: calls to it fail%s (source: %s)",
        found.provider,
        found.model,
        found.date.isoformat(),
        instead,
        found.source or "stream_core/retirements.json",
    )
