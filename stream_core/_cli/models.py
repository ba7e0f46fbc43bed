"""`stream-core models [PROVIDER]`: the catalog's models, one table per provider."""

from __future__ import annotations

import argparse
from typing import TextIO

from .._capabilities import Capabilities
from .._cost import list_prices, prices_source
from .._models import catalog_source, list_models, model_apis
from .._retirements import retirement
from ._common import usage_error
from ._render import table

__all__ = ["run"]

_HEAD = (
    "ID",
    "API",
    "CONTEXT",
    "MAX OUT",
    "IN",
    "OUT",
    "CACHE R",
    "CACHE W",
    "REASONING",
    "IMG",
    "REFUSES",
)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    models = list_models(args.provider)
    if not models:
        known = sorted({m.provider for m in list_models()})
        return usage_error(
            err, f"no models for provider {args.provider!r}; known: {', '.join(known)}"
        )
    for provider in sorted({m.provider for m in models}):
        rows = [_HEAD]
        for m in (m for m in models if m.provider == provider):
            p = list_prices(m)
            caps = m.capabilities()
            rows.append(
                (
                    m.id,
                    ",".join(model_apis(m.provider, m.id)) or m.api,
                    _tokens(m.context_window),
                    _tokens(m.max_tokens),
                    _usd(p.input),
                    _usd(p.output),
                    _usd(p.cache_read),
                    _usd(p.cache_write),
                    _levels(caps.reasoning, caps.thinking),
                    "yes" if "image" in m.input else "no",
                    _refuses(caps),
                )
            )
        table(out, f"{provider} ({len(rows) - 1} models; prices in USD per million tokens)", rows)
        _retirements(out, provider, [m.id for m in models if m.provider == provider])
    prices_version = prices_source()["genai_prices"]

    source = catalog_source()
    out.write(
        f"catalog: models.dev {source['revision'][:12]} ({source['licence']}); prices: "
        f"genai-prices {prices_version} where it knows the model, else the catalog's\n"
        "REFUSES: what stream() raises for, per model (Model.capabilities())\n"
    )
    return 0


def _retirements(out: TextIO, provider: str, ids: list[str]) -> None:
    """The provider's models its vendor retired or set a date for, under its table."""
    found = [(i, r) for i in ids if (r := retirement((provider, i))) is not None]
    if not found:
        return
    width = max(len(i) for i, _ in found)
    out.write(f"{provider}: retirement dates (the vendor's; calls fail from that day on)\n")
    for model_id, r in found:
        out.write(f"  {model_id.ljust(width)}  {r.describe()}\n")
    out.write("\n")


def _levels(levels: list[str], thinking: str | None) -> str:
    if not levels:
        return "no"
    shown = "all" if len(levels) == 4 else ",".join(levels)
    return f"{shown} ({thinking})" if thinking else shown


def _refuses(caps: Capabilities) -> str:
    """The controls `stream()` refuses for the model, from its capability query."""
    parts = sorted(caps.refused)
    parts += [f"{c}={v}" for c, values in sorted(caps.refused_values.items()) for v in values]
    parts += ["+".join(pair) for pair in caps.together]
    return ", ".join(parts) or "-"


def _tokens(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000:
        return f"{n / 1_000:.0f}k"
    return str(n)


def _usd(price: float | None) -> str:
    return "-" if price is None else f"{price:g}"
