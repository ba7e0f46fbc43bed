"""What a usage costs, in USD.

genai-prices (pydantic's maintained price data) prices the model where it knows it: cache
reads, cache writes by TTL, tiers by prompt size, service tiers. Where it does not, the
model's own `prices` (the catalog's list price, or the caller's) apply. Where nobody knows,
the cost is None, never 0, and computing it never raises: a cost is advisory and the rest
of the message stands.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import httpx

from ._models import Model, ModelPrices
from ._types import Cost, Usage

if TYPE_CHECKING:
    from ._options import StreamOptions

__all__ = ["CostContext", "compute_cost", "cost_context", "long_cache_honored"]

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


_DEFAULT = CostContext()
_warned_hosts: set[str] = set()


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
            if host not in _warned_hosts:
                _warned_hosts.add(host)
                logger.warning(
                    "%s: cache_retention='long' needs api.anthropic.com; "
                    "this host gets 5-minute cache entries, priced as such",
                    host,
                )
    tier = options.extra.get("service_tier")
    if not isinstance(tier, str) or tier == "auto":
        tier = None
    if ttl == "5m" and tier is None:
        return _DEFAULT
    return CostContext(cache_ttl=ttl, service_tier=tier)


# --- genai-prices ---------------------------------------------------------------------------

_snapshot: Any = None
_found: dict[tuple[str, str, str], Any] = {}


def _genai_model(model: Model) -> Any:
    """genai-prices' entry for `model`, or None; looked up once per model (misses too),
    and again only if genai-prices' data snapshot is replaced (its auto-update)."""
    global _snapshot
    if model.provider not in _GENAI_PROVIDER and _local_host(model.base_url):
        # A server on this machine or network: nobody prices it, and loading the price
        # data (tens of MB) for nothing would double a small process's memory.
        return None
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    if snapshot is not _snapshot:
        _found.clear()
        _rates_cache.clear()
        _snapshot = snapshot
    key = (model.provider, model.id, model.base_url)
    if key in _found:
        return _found[key]
    provider_id = _GENAI_PROVIDER.get(model.provider)
    try:
        if provider_id is not None:
            _, found = snapshot.find_provider_model(model.id, None, provider_id, None)
        else:
            _, found = snapshot.find_provider_model(model.id, None, None, model.base_url)
    except LookupError:
        found = None
    _found[key] = found
    return found


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


# USD per million tokens from the first token, then from each tier's start (exclusive).
_Rate = tuple[float, tuple[tuple[int, float], ...]]
_FREE: tuple[_Rate, ...] = ()
_rates_cache: dict[tuple[int, str, str | None], tuple[_Rate, ...] | None] = {}


def _rate(price: Any) -> _Rate:
    tiers = getattr(price, "tiers", None)
    if tiers is None:
        return (float(price), ())
    return (float(price.base), tuple((t.start, float(t.price)) for t in tiers))


def _rates(info: Any, context: CostContext) -> tuple[_Rate, ...] | None:
    """(input, output, cache read, cache write) rates for this call; `_FREE` for a model
    listed without prices, None when input or output has no price."""
    tier = context.service_tier
    # Plain prices never change between calls; dated or tiered-by-service ones may.
    fixed = not isinstance(info.prices, list) and (tier is None or not info.price_variants)
    key = (id(info), context.cache_ttl, tier)
    if fixed and key in _rates_cache:
        return _rates_cache[key]
    prices = info.get_prices(datetime.now(tz=UTC), {"service_tier": tier} if tier else None)
    base, output = prices.input_mtok, prices.output_mtok
    found: tuple[_Rate, ...] | None
    if base is None or output is None:
        # Listed without a single price means free (`:free` routes, Gemma on Google).
        found = _FREE if not any(v is not None for v in vars(prices).values()) else None
    else:
        write = prices.cache_write_mtok
        if context.cache_ttl == "1h" and prices.cache_write_1h_mtok is not None:
            write = prices.cache_write_1h_mtok
        elif write is None:
            write = prices.cache_write_5m_mtok
        read = prices.cache_read_mtok
        # An unpriced cache read or write is billed as plain input (as genai-prices does).
        found = (
            _rate(base),
            _rate(output),
            _rate(base if read is None else read),
            _rate(base if write is None else write),
        )
    if fixed:
        _rates_cache[key] = found
    return found


def _genai_cost(info: Any, usage: Usage, context: CostContext) -> Cost | None:
    rates = _rates(info, context)
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
    p = model.prices
    if p.input is None or p.output is None:
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
        else:
            parts.append(tokens * price / 1_000_000)
    return Cost(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total=math.fsum(parts),
    )


def compute_cost(model: Model, usage: Usage, context: CostContext | None = None) -> Cost | None:
    """USD for `usage` on `model`; None when a needed price is unknown or the numbers are
    beyond pricing (negative, or too large for a float). Never raises."""
    if min(usage.input, usage.output, usage.cache_read, usage.cache_write) < 0:
        return None
    try:
        info = _genai_model(model)
        cost = None if info is None else _genai_cost(info, usage, context or _DEFAULT)
        if cost is None:
            cost = _list_cost(model, usage)
    except Exception:  # noqa: BLE001 - third-party price data must not break a message
        logger.debug("cost of %s/%s could not be computed", model.provider, model.id)
        return None
    if cost is None or not math.isfinite(cost.total):
        return None
    return cost


def list_prices(model: Model) -> ModelPrices:
    """USD per million tokens that `compute_cost` starts from for `model` (the base tier,
    standard service, 5-minute cache writes): genai-prices' where it knows the model."""
    try:
        info = _genai_model(model)
        if info is not None:
            p = info.get_prices(datetime.now(tz=UTC))

            def base(value: Any) -> float | None:
                value = getattr(value, "base", value)
                return None if value is None else float(value)

            write = p.cache_write_mtok if p.cache_write_mtok is not None else p.cache_write_5m_mtok
            found = ModelPrices(
                input=base(p.input_mtok),
                output=base(p.output_mtok),
                cache_read=base(p.cache_read_mtok),
                cache_write=base(write),
            )
            if found.input is not None and found.output is not None:
                return found
    except Exception:  # noqa: BLE001 - as in compute_cost
        pass
    return model.prices
