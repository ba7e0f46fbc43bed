"""What a usage costs, in USD.

genai-prices' data (pydantic's maintained prices; shipped as `prices.json`, a compact table
generated from it by scripts/generate_prices.py) prices the model where it knows it: cache
reads, cache writes by TTL, tiers by prompt size, service tiers, dated prices. Where it
does not, the model's own `prices` (the catalog's list price, or the caller's) apply. Where
nobody knows, the cost is None, never 0, and computing it never raises: a cost is advisory
and the rest of the message stands. genai-prices itself is not imported at run time.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic_core import from_json

from ._errors import KEPT_LIMIT, first_time, quote
from ._models import Model, ModelPrices, package_data
from ._types import Cost, Usage

if TYPE_CHECKING:
    from ._options import StreamOptions

__all__ = ["BATCH_PRICE", "CostContext", "compute_cost", "cost_context", "long_cache_honored"]

logger = logging.getLogger("stream_core")

# Our provider names -> genai-prices' provider ids. A provider missing here (a local
# server, a plugin's) is looked up by its base URL, which genai-prices also matches.
_GENAI_PROVIDER: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure-openai": "azure",
    "google": "google",
    "google-vertex": "google",
    "amazon-bedrock": "aws",
    "mistral": "mistral",
    "openrouter": "openrouter",
    "groq": "groq",
    "xai": "x-ai",
    "deepseek": "deepseek",
    "cerebras": "cerebras",
    "together": "together",
    "fireworks": "fireworks",
}


@dataclass(frozen=True)
class CostContext:
    """What a request chose that changes its price."""

    cache_ttl: Literal["5m", "1h"] = "5m"
    """Lifetime of the cache entries the request wrote (1h writes cost more)."""
    service_tier: str | None = None
    """OpenAI's `service_tier` ("flex", "priority", ...); None is the standard price."""
    batch: bool = False
    """Sent through the vendor's batch API: tokens at its batch price (`BATCH_PRICE`)."""


_DEFAULT = CostContext()
_warned_hosts: set[tuple[str, ...]] = set()


def long_cache_honored(model: Model) -> bool:
    """Whether `cache_retention="long"` can ask this endpoint for 1-hour cache entries.

    Anthropic's own API takes the `ttl` field; proxies and other hosts speaking its
    protocol may reject it, so they get the default 5 minutes.
    """
    if model.api != "anthropic-messages":
        return True
    return httpx.URL(model.base_url).host == "api.anthropic.com"


def cost_context(model: Model, options: StreamOptions) -> CostContext:
    """The pricing choices of one call; warns once per host when "long" cannot be had."""
    ttl: Literal["5m", "1h"] = "5m"
    if options.cache_retention == "long":
        if long_cache_honored(model):
            ttl = "1h"
        else:
            host = httpx.URL(model.base_url).host
            if first_time(_warned_hosts, host):
                logger.warning(
                    "%s: cache_retention='long' needs api.anthropic.com; "
                    "this host gets 5-minute cache entries, priced as such",
                    quote(host),
                )
    tier = options.extra.get("service_tier")
    if not isinstance(tier, str) or tier == "auto":
        tier = None
    if ttl == "5m" and tier is None:
        return _DEFAULT
    return CostContext(cache_ttl=ttl, service_tier=tier)


# --- the price table ------------------------------------------------------------------------
#
# `prices.json` is genai-prices' data cut down to token prices by scripts/generate_prices.py:
# genai-prices itself costs seconds of CPU to load (a 1.6 MB Python data module), which a
# first call would pay on the event loop. The table is read on first use: the file (400 KB,
# well under a millisecond) and each provider's header line; a provider's models are parsed
# only when a model of it is priced. The lookups below are genai-prices' own
# (`DataSnapshot.find_provider_model`, `ModelInfo.get_prices`), on that table.

_Clause = dict[str, Any]


def _is_match(clause: _Clause, text: str) -> bool:
    """genai-prices' match clauses, against an already lower-cased `text`."""
    ((kind, value),) = clause.items()
    if kind == "or":
        return any(_is_match(c, text) for c in value)
    if kind == "and":
        return all(_is_match(c, text) for c in value)
    if kind == "equals":
        return bool(text == value.lower())
    if kind == "starts_with":
        return text.startswith(value.lower())
    if kind == "ends_with":
        return text.endswith(value.lower())
    if kind == "contains":
        return bool(value.lower() in text)
    if kind == "regex":
        return re.search(value, text) is not None
    raise ValueError(f"unknown match clause {kind!r}")


class _PricedModel:
    """One model of the table: its match rule and prices (genai-prices' `ModelInfo`)."""

    __slots__ = ("id", "match", "prices", "variants")

    def __init__(self, entry: dict[str, Any]) -> None:
        self.id: str = entry["id"]
        self.match: _Clause = entry["match"]
        self.prices: dict[str, Any] | list[dict[str, Any]] = entry["prices"]
        self.variants: list[dict[str, Any]] = entry.get("variants", [])


class _PriceProvider:
    """One provider of the table; its models are parsed on first use."""

    __slots__ = ("_models", "_raw", "api_pattern", "fallback", "id", "provider_match")

    def __init__(self, head: dict[str, Any], models: bytes) -> None:
        self.id: str = head["id"]
        self.api_pattern: str = head["api_pattern"]
        self.provider_match: _Clause | None = head.get("provider_match")
        self.fallback: list[str] = head.get("fallback", [])
        self._raw = models
        self._models: list[_PricedModel] | None = None

    @property
    def models(self) -> list[_PricedModel]:
        if self._models is None:
            self._models = [_PricedModel(e) for e in from_json(b"[" + self._raw + b"]")]
            self._raw = b""
        return self._models

    def match_model(self, ref: str, table: dict[str, _PriceProvider] | None) -> _PricedModel | None:
        for model in self.models:
            if _is_match(model.match, ref):
                return model
        if table is not None:
            for provider_id in self.fallback:
                other = table.get(provider_id)
                # One step of fallback only, as genai-prices.
                if other is not None and (hit := other.match_model(ref, None)) is not None:
                    return hit
        return None


_table_cache: dict[str, _PriceProvider] | None = None


def _table() -> dict[str, _PriceProvider]:
    """The price table's providers by id, in genai-prices' order; read once per process."""
    global _table_cache
    if _table_cache is None:
        data = package_data("prices.json")
        table: dict[str, _PriceProvider] = {}
        # The generator's layout: after the source line, each provider is a header line
        # ending with `"models":[`, its models one per line (commas between them), then `]}`.
        _, _, body = data.partition(b'"providers":[\n')
        for block in body.split(b"\n]}"):
            head_line, _, models = block.lstrip(b",\n").partition(b"\n")
            if head_line.endswith(b'"models":['):
                head = from_json(head_line + b"]}")
                table[head["id"]] = _PriceProvider(head, models)
        _table_cache = table
    return _table_cache


def prices_source() -> dict[str, str]:
    """Where the price table comes from (genai-prices' version and licence)."""
    data = package_data("prices.json")
    line = data.split(b"\n", 2)[1].rstrip(b",")
    source: dict[str, str] = from_json(b"{" + line + b"}")["source"]
    return source


def _find_provider(
    table: dict[str, _PriceProvider], provider_id: str | None, base_url: str
) -> _PriceProvider | None:
    """genai-prices' provider: by id (or its `provider_match`), else by API URL."""
    if provider_id is not None:
        if (found := table.get(provider_id)) is not None:
            return found
        return next(
            (
                p
                for p in table.values()
                if p.provider_match is not None and _is_match(p.provider_match, provider_id)
            ),
            None,
        )
    return next((p for p in table.values() if re.match(p.api_pattern, base_url)), None)


_COMPACT_DATE = re.compile(r"(-)(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=-|:|$)")


def _dashed_date(ref: str) -> str:
    """`gpt-5.2-20251211` -> `gpt-5.2-2025-12-11` (genai-prices' second try)."""

    def replace(m: re.Match[str]) -> str:
        try:
            date(int(m[2]), int(m[3]), int(m[4]))
        except ValueError:
            return m[0]
        return f"-{m[2]}-{m[3]}-{m[4]}"

    return _COMPACT_DATE.sub(replace, ref)


@dataclass(frozen=True)
class _Found:
    model: _PricedModel
    fallback: bool
    """Found through a `fallback_model_providers` entry: genai-prices then ignores the
    request's service tier (its variants are the other provider's)."""


_found: dict[tuple[str, str, str], _Found | None] = {}


def _genai_model(model: Model) -> _Found | None:
    """The price table's entry for `model`, or None; looked up once per model (misses too)."""
    key = (model.provider, model.id, model.base_url)
    try:
        return _found[key]  # first: parsing the URL costs more than the rest of a lookup
    except KeyError:
        pass
    if model.provider not in _GENAI_PROVIDER and _local_host(model.base_url):
        # A server on this machine or network: nobody prices it, so the table is not even
        # read for it.
        found = None
    else:
        found = _lookup(_GENAI_PROVIDER.get(model.provider), model.base_url, model.id)
    if len(_found) < KEPT_LIMIT * 4:  # bounded: models made on the fly are looked up anew
        _found[key] = found
    return found


def _lookup(provider_id: str | None, base_url: str, model_id: str) -> _Found | None:
    """genai-prices' `find_provider_model(model_id, None, provider_id, base_url)`."""
    table = _table()
    provider = _find_provider(table, provider_id, base_url)
    if provider is None:
        return None
    ref = model_id.lower()
    hit = provider.match_model(ref, table)
    if hit is None and (dashed := _dashed_date(ref)) != ref:
        hit = provider.match_model(dashed, table)
    if hit is None:
        return None
    return _Found(hit, not any(hit is m for m in provider.models))


def _local_host(base_url: str) -> bool:
    try:
        host = httpx.URL(base_url).host
    except Exception:  # noqa: BLE001 - an odd URL is simply not a known vendor's
        return True
    if not host or host == "localhost" or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


def _active(entry: dict[str, Any], now: datetime) -> bool:
    """genai-prices' `StartDateConstraint` / `TimeOfDateConstraint`, all in UTC."""
    if "start_date" in entry:
        return now.date().isoformat() >= str(entry["start_date"])
    if "start_time" in entry:
        moment = now.strftime("%H:%M:%S.%f")
        start, end = str(entry["start_time"]), str(entry["end_time"])
        if end < start:
            return moment >= start or moment < end
        return bool(start <= moment < end)
    return True


def _prices_at(found: _Found, now: datetime, tier: str | None) -> dict[str, Any]:
    """The model's prices for a request at `now` (UTC) in service tier `tier`."""
    prices = found.model.prices
    if isinstance(prices, dict):
        standard = prices
    else:
        # The last active dated price wins; before all of them, the first.
        standard = next((p for p in reversed(prices) if _active(p, now)), prices[0])["prices"]
    if tier is None or found.fallback or not found.model.variants:
        return standard
    resolved = dict(standard)
    overrides: dict[str, Any] = {}
    for variant in found.model.variants:
        if variant["tier"] == tier and _active(variant, now):
            for k, v in variant["prices"].items():
                overrides.setdefault(k, v)
    resolved.update(overrides)
    return resolved


# USD per million tokens from the first token, then from each tier's start (exclusive).
_Rate = tuple[float, tuple[tuple[int, float], ...]]
_FREE: tuple[_Rate, ...] = ()
_rates_cache: dict[tuple[int, str, str | None], tuple[_Rate, ...] | None] = {}


def _rate(price: Any) -> _Rate:
    if isinstance(price, list):
        base, tiers = price
        return (float(base), tuple((int(start), float(p)) for start, p in tiers))
    return (float(price), ())


def _rates(
    found: _Found, context: CostContext, now: datetime | None = None
) -> tuple[_Rate, ...] | None:
    """(input, output, cache read, cache write) rates for a call at `now` (default: now);
    `_FREE` for a model listed without prices, None when input or output has no price."""
    tier = context.service_tier
    # Plain prices never change between calls; dated or tiered-by-service ones may.
    fixed = (
        now is None
        and isinstance(found.model.prices, dict)
        and (tier is None or found.fallback or not found.model.variants)
    )
    key = (id(found.model), context.cache_ttl, None if found.fallback else tier)
    if fixed and key in _rates_cache:
        return _rates_cache[key]
    prices = _prices_at(found, now or datetime.now(tz=UTC), tier)
    base, output = prices.get("input"), prices.get("output")
    result: tuple[_Rate, ...] | None
    if base is None or output is None:
        # Listed without a single price means free (`:free` routes, Gemma on Google).
        result = _FREE if not prices else None
    else:
        write = prices.get("cache_write")
        if context.cache_ttl == "1h" and prices.get("cache_write_1h") is not None:
            write = prices["cache_write_1h"]
        elif write is None:
            write = prices.get("cache_write_5m")
        read = prices.get("cache_read")
        # An unpriced cache read or write is billed as plain input (as genai-prices does).
        result = (
            _rate(base),
            _rate(output),
            _rate(base if read is None else read),
            _rate(base if write is None else write),
        )
    if fixed:
        if len(_rates_cache) < KEPT_LIMIT * 4:
            _rates_cache[key] = result
    return result


def _by_the_hour(found: _Found) -> bool:
    """Whether the price depends on the time of day (DeepSeek's off-peak discount)."""
    prices = found.model.prices
    return isinstance(prices, list) and any("start_time" in p for p in prices)


def _genai_cost(
    found: _Found, usage: Usage, context: CostContext, now: datetime | None = None
) -> Cost | None:
    if found.fallback and _by_the_hour(found):
        # Borrowed from another vendor's table (Azure's DeepSeek R1 from DeepSeek's): its
        # hours are that vendor's, not this one's, which prices flat. The model's own
        # list price applies.
        return None
    rates = _rates(found, context, now)
    if rates is None:
        return None
    if rates is _FREE:
        return Cost()
    # genai-prices counts input with cache reads and writes in it; tiers key off that sum,
    # and crossing one reprices every token.
    prompt = usage.input + usage.cache_read + usage.cache_write
    parts = []
    for tokens, (price, tiers) in zip(
        (usage.input, usage.output, usage.cache_read, usage.cache_write), rates, strict=True
    ):
        for start, tier_price in reversed(tiers):
            if prompt > start:
                price = tier_price
                break
        parts.append(tokens * price / 1_000_000)
    return Cost(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total=math.fsum(parts),
    )


# --- the model's own prices -----------------------------------------------------------------


def _list_cost(model: Model, usage: Usage) -> Cost | None:
    """The cost at the model's own prices; None when it has none (`prices=None` set past
    validation included: an unknown price is never 0) or one is not a price (negative)."""
    p = model.prices
    if not isinstance(p, ModelPrices) or p.input is None or p.output is None:
        return None
    parts = []
    for tokens, price in (
        (usage.input, p.input),
        (usage.output, p.output),
        (usage.cache_read, p.cache_read),
        (usage.cache_write, p.cache_write),
    ):
        if price is None:
            if tokens:
                return None
            parts.append(0.0)
        elif not isinstance(price, (int, float)) or not 0 <= price < math.inf:
            return None
        else:
            parts.append(tokens * price / 1_000_000)
    return Cost(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total=math.fsum(parts),
    )


def compute_cost(
    model: Model,
    usage: Usage,
    context: CostContext | None = None,
    *,
    at: datetime | None = None,
) -> Cost | None:
    """USD for `usage` on `model` at the moment `at` (for a dated or time-of-day price;
    default now); None when a needed price is unknown or the numbers are beyond pricing (negative,
    or too large for a float). Never raises."""
    if min(usage.input, usage.output, usage.cache_read, usage.cache_write) < 0:
        return None
    if at is not None:
        at = at.astimezone(UTC)  # prices change on UTC dates and hours; naive is local
    try:
        found = _genai_model(model)
        cost = None if found is None else _genai_cost(found, usage, context or _DEFAULT, at)
        if cost is None:
            cost = _list_cost(model, usage)
    except Exception:  # noqa: BLE001 - price data must not break a message
        logger.debug("cost of %s/%s could not be computed", model.provider, model.id)
        return None
    if cost is None or not math.isfinite(cost.total):
        return None
    if context is not None and context.batch:
        cost = _at_batch_price(model, cost)
    if usage.server_tools:
        return _with_server_tools(model, usage.server_tools, cost)
    return cost


BATCH_PRICE: dict[str, float] = {
    "anthropic": 0.5,
    "openai": 0.5,
    "google": 0.5,
    "google-vertex": 0.5,
    "mistral": 0.5,
    "amazon-bedrock": 0.5,
}
"""A batch's token price as a share of the standard one, by provider, from the vendors'
price pages: Anthropic Message Batches, OpenAI Batch, Gemini batch mode, Vertex AI batch
prediction, Mistral batch and Bedrock batch inference each bill half (cache reads and
writes included, Anthropic's cache multipliers stacking on it). Vendor-run tool calls are
billed at their own price. A provider missing here is priced at 1.0 (no discount known)."""


def _at_batch_price(model: Model, cost: Cost) -> Cost:
    share = BATCH_PRICE.get(model.provider, 1.0)
    if share == 1.0:
        return cost
    return Cost(
        input=cost.input * share,
        output=cost.output * share,
        cache_read=cost.cache_read * share,
        cache_write=cost.cache_write * share,
        total=(cost.input + cost.output + cost.cache_read + cost.cache_write) * share,
    )


SERVER_TOOL_PRICES: dict[str, dict[str, float]] = {
    "anthropic": {"web_search": 0.01, "web_fetch": 0.0},
    "openai": {"web_search": 0.01, "file_search": 0.0025},
    "azure-openai-responses": {"web_search": 0.01, "file_search": 0.0025},
    "google": {"web_search": 0.014},
}
"""USD per call of a vendor-run tool, by provider and kind, from the vendors' price pages
(Anthropic web search $10 / 1,000 searches, web fetch free; OpenAI web search $10 / 1,000
calls, file search $2.50 / 1,000; Gemini 3 grounding with Google Search $14 / 1,000
queries). A count without a price here is reported in `Usage.server_tools`, not priced."""


def _with_server_tools(model: Model, counts: dict[str, int], cost: Cost) -> Cost:
    prices = SERVER_TOOL_PRICES.get(model.provider, {})
    extra = math.fsum(n * prices[kind] for kind, n in counts.items() if kind in prices)
    if not extra or not math.isfinite(extra):
        return cost
    return cost.model_copy(
        update={"server_tools": cost.server_tools + extra, "total": cost.total + extra}
    )


def list_prices(model: Model) -> ModelPrices:
    """USD per million tokens that `compute_cost` starts from for `model` (the base tier,
    standard service, 5-minute cache writes): genai-prices' where it knows the model."""
    try:
        found = _genai_model(model)
        if found is not None and not (found.fallback and _by_the_hour(found)):
            p = _prices_at(found, datetime.now(tz=UTC), None)

            def base(value: Any) -> float | None:
                if isinstance(value, list):
                    value = value[0]
                return None if value is None else float(value)

            write = p.get("cache_write")
            found_prices = ModelPrices(
                input=base(p.get("input")),
                output=base(p.get("output")),
                cache_read=base(p.get("cache_read")),
                cache_write=base(write if write is not None else p.get("cache_write_5m")),
            )
            if found_prices.input is not None and found_prices.output is not None:
                return found_prices
    except Exception:  # noqa: BLE001 - as in compute_cost
        pass
    return model.prices if isinstance(model.prices, ModelPrices) else ModelPrices()
