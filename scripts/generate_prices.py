"""Generate `stream_core/prices.json` from the installed genai-prices.

    uv run python scripts/generate_prices.py [--out PATH] [--check]

genai-prices (https://github.com/pydantic/genai-prices, MIT licence, (c) Pydantic Services
Inc.) keeps the price data stream-core prices usage with. Loading it costs some 2.5 s of
CPU in one piece (importing its 1.6 MB data module, then building the snapshot), which a
first call would pay on the event loop. This script keeps, once, what `stream_core._cost`
needs of it and writes a compact JSON table that loads in milliseconds:

- per provider, in genai-prices' order: its id, `api_pattern` (a regex matched at the start
  of a base URL), `provider_match` (a clause matched against a provider id), and
  `fallback_model_providers`;
- per model, in order: its id, its `match` clause (`equals`, `starts_with`, `ends_with`,
  `contains`, `regex`, `or`, `and`, as in the data), and its prices: one price set, or a
  list of dated ones (`start_date`, or a daily `start_time`/`end_time` window, in UTC),
  plus its `service_tier` variants. A price set holds only token prices: `input`,
  `output`, `cache_read`, `cache_write`, `cache_write_5m`, `cache_write_1h`, each USD per
  million tokens, a number or `[base, [[start, price], ...]]` for prompt-size tiers; and,
  in a set without input and output prices, `"other": 1` when genai-prices prices
  something else there (searches, audio, requests): unknown for us, not free.

Variants keyed on anything but `service_tier` (batch processing, routes, search types)
are left out: nothing stream-core sends selects them. `--check` exits 1 when the file on
disk differs from what the installed genai-prices gives (tests/test_cost.py runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "stream_core" / "prices.json"

# genai-prices' price keys -> ours (the token prices `_cost.py` uses).
PRICE_KEYS = {
    "input_mtok": "input",
    "output_mtok": "output",
    "cache_read_mtok": "cache_read",
    "cache_write_mtok": "cache_write",
    "cache_write_5m_mtok": "cache_write_5m",
    "cache_write_1h_mtok": "cache_write_1h",
}


def _number(value: Decimal) -> float | int:
    f = float(value)
    return int(f) if f.is_integer() else f


def clause(logic: Any) -> Any:
    from genai_prices import types as t

    if isinstance(logic, t.ClauseOr):
        return {"or": [clause(c) for c in logic.or_]}
    if isinstance(logic, t.ClauseAnd):
        return {"and": [clause(c) for c in logic.and_]}
    for kind in ("equals", "starts_with", "ends_with", "contains", "regex"):
        if hasattr(logic, kind):
            return {kind: getattr(logic, kind)}
    raise TypeError(f"unknown match clause {logic!r}")


def price(value: Any) -> Any:
    from genai_prices import types as t

    if isinstance(value, t.TieredPrices):
        return [_number(value.base), [[tier.start, _number(tier.price)] for tier in value.tiers]]
    return _number(value)


def price_set(prices: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    other = False
    for key, value in vars(prices).items():
        if key.startswith("_") or value is None:
            continue
        if key in PRICE_KEYS:
            out[PRICE_KEYS[key]] = price(value)
        else:
            other = True
    if other and ("input" not in out or "output" not in out):
        out["other"] = 1  # priced, but not by the token: unknown here, not free
    return out


def constraint(c: Any) -> dict[str, Any]:
    from genai_prices import types as t

    if c is None:
        return {}
    if isinstance(c, t.StartDateConstraint):
        return {"start_date": c.start_date.isoformat()}
    if isinstance(c, t.TimeOfDateConstraint):
        return {
            "start_time": t._utc_timetz(c.start_time).strftime("%H:%M:%S"),
            "end_time": t._utc_timetz(c.end_time).strftime("%H:%M:%S"),
        }
    raise TypeError(f"unknown constraint {c!r}")


def model_entry(info: Any) -> dict[str, Any]:
    from genai_prices import types as t

    entry: dict[str, Any] = {"id": info.id, "match": clause(info.match)}
    if isinstance(info.prices, t.ModelPrice):
        entry["prices"] = price_set(info.prices)
    else:
        entry["prices"] = [
            {**constraint(c.constraint), "prices": price_set(c.prices)} for c in info.prices
        ]
    variants = [
        {"tier": v.when["service_tier"], **constraint(v.constraint), "prices": price_set(v.prices)}
        for v in info.price_variants or ()
        if set(v.when) == {"service_tier"}
    ]
    if variants:
        entry["variants"] = variants
    return entry


def generate() -> dict[str, Any]:
    from genai_prices import __version__
    from genai_prices.data_snapshot import _bundled_snapshot

    providers = []
    for p in _bundled_snapshot().providers:
        row: dict[str, Any] = {"id": p.id, "api_pattern": p.api_pattern}
        if p.provider_match is not None:
            row["provider_match"] = clause(p.provider_match)
        if p.fallback_model_providers:
            row["fallback"] = list(p.fallback_model_providers)
        row["models"] = [model_entry(m) for m in p.models]
        providers.append(row)
    return {
        "source": {
            "data": "https://github.com/pydantic/genai-prices",
            "genai_prices": __version__,
            "licence": "MIT (c) Pydantic Services Inc.",
        },
        "providers": providers,
    }


def render(table: dict[str, Any]) -> str:
    """Compact, stable JSON: one model per line (a price change is a one-line diff)."""

    def dump(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    lines = ["{", f'"source":{dump(table["source"])},', '"providers":[']
    for i, p in enumerate(table["providers"]):
        head = dump({k: v for k, v in p.items() if k != "models"})[:-1]
        lines.append(head + ',"models":[')
        lines.append(",\n".join(dump(m) for m in p["models"]))
        lines.append("]}" + ("," if i < len(table["providers"]) - 1 else ""))
    lines.append("]}")
    return "\n".join(line for line in lines if line) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if --out differs instead of writing it"
    )
    args = parser.parse_args(argv)
    table = generate()
    text = render(table)
    version = table["source"]["genai_prices"]
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date with genai-prices {version}", file=sys.stderr)
            return 1
        print(f"{args.out} matches genai-prices {version}")
        return 0
    args.out.write_text(text, encoding="utf-8")
    models = sum(len(p["models"]) for p in table["providers"])
    print(f"wrote {args.out}: {len(table['providers'])} providers, {models} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
