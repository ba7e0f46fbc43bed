"""From requests to parts: each request planned as `stream()` would send it, grouped
into vendor batches, and what reading each answer needs written down.

A request that `stream()` would refuse raises here, at submission, naming its custom id
and the field. Requests go to one vendor batch when they share a batch codec, endpoint
and credentials (and, where the vendor asks it, a model), up to the vendor's request
and byte limits. Each part gets a tag (where the vendor keeps a name, so a crash can be
recovered) and each request a vendor-side id `<tag>_<n>` that every vendor accepts.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from stream_core import (
    AssistantMessage,
    Model,
    StreamOptions,
    Usage,
    estimate_context_tokens,
)
from stream_core.provider import (
    BatchPart,
    BatchWire,
    CostContext,
    Plan,
    WireAPI,
    batch_wire,
    compute_cost,
    get_provider,
    output_spec,
    plan,
)

from ._types import BatchRequest

__all__ = ["PartPlan", "decode_plan", "decode_row", "make_parts", "wire_of", "worst_cost"]

_MAX_ID = 512

_LINE_ENVELOPE = 512
"""Bytes a codec's line may add around its payload (the custom id, at most 64 characters;
a method and URL; the keys that wrap them): the most a line counts beyond `Plan.size`
toward a vendor's bytes per batch."""


def wire_of(model: Model) -> WireAPI:
    wire = get_provider(model.api).wire
    if wire is None:
        raise ValueError(f"model: {model.api} is not built on the shared pipeline; no batch")
    return wire


@dataclass
class PartPlan:
    """One vendor batch to be: its codec, tag, model, lines and the requests in it."""

    n: int
    codec: BatchWire
    tag: str
    model: Model
    options: StreamOptions
    headers: dict[str, str]
    endpoint: str
    ids: list[str] = field(default_factory=list)
    """The caller's custom ids, in line order."""
    lines: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    worst_usd: float = 0.0

    def part(self) -> BatchPart:
        return BatchPart(self.tag, self.model, self.lines, self.headers, self.endpoint)


def worst_cost(p: Plan) -> float | None:
    """The most the request can cost at the batch price: its estimated input and its whole
    output limit (None when the model has no prices)."""
    out = p.options.max_tokens or p.model.max_tokens
    usage = Usage(input=estimate_context_tokens(p.context), output=out)
    cost = compute_cost(p.model, usage, p.pricing)
    return None if cost is None else cost.total


def _group_key(codec: BatchWire, p: Plan) -> tuple[Any, ...]:
    path = re.sub(r"^https?://[^/]+", "", p.request.url.split("?", 1)[0])
    if codec.one_model:
        path = re.sub(r"/models?/[^/:]+", "/model", path)
    model_key = p.model.id if codec.one_model else ""
    key = p.options.api_key or ""
    creds = hashlib.sha256(key.encode()).hexdigest()[:16]
    return (codec.name, p.model.provider, p.model.base_url, path, model_key, creds)


def _check_id(custom_id: object, seen: set[str]) -> str:
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > _MAX_ID:
        raise ValueError(
            f"BatchRequest.custom_id: {custom_id!r} is not a custom id (a non-empty string "
            f"of at most {_MAX_ID} characters)"
        )
    if custom_id in seen:
        raise ValueError(f"BatchRequest.custom_id: {custom_id!r} is used twice in this job")
    seen.add(custom_id)
    return custom_id


def make_parts(
    requests: list[BatchRequest], nonce: str, *, whole: bool = True
) -> tuple[list[PartPlan], dict[str, Plan], list[dict[str, Any]]]:
    """(the parts, each request's plan by custom id, the rows of `requests.jsonl`).
    `whole=False`: the requests are some of a job's (its plans are wanted, not new parts),
    so a vendor's fewest requests per batch is not checked."""
    seen: set[str] = set()
    plans: dict[str, Plan] = {}
    groups: dict[tuple[Any, ...], list[PartPlan]] = {}
    parts: list[PartPlan] = []
    rows: list[dict[str, Any]] = []
    for r in requests:
        if not isinstance(r, BatchRequest):
            raise TypeError(f"requests: {type(r).__name__} is not a BatchRequest")
        cid = _check_id(r.custom_id, seen)
        try:
            codec = batch_wire(r.model) if isinstance(r.model, Model) else None
            if codec is None:
                raise TypeError(f"model must be a stream_core.Model, not {type(r.model).__name__}")
            p = plan(wire_of(r.model), r.model, r.context, r.options)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"request {cid!r}: {exc}") from exc
        worst = worst_cost(p)
        opts = p.options
        if opts.max_cost_usd is not None and worst is not None and worst > opts.max_cost_usd:
            raise ValueError(
                f"request {cid!r}: StreamOptions.max_cost_usd: its worst case at the batch "
                f"price (${worst:.4f}) is over ${opts.max_cost_usd}"
            )
        if worst is None and (opts.budget is not None or opts.max_cost_usd is not None):
            raise ValueError(
                f"request {cid!r}: {p.model.provider}/{p.model.id} has no prices, so a budget "
                "cannot bound its cost"
            )
        # The payload was serialized once by plan(); a line is that payload (less its
        # streaming fields) inside the codec's envelope.
        size = p.size + _LINE_ENVELOPE
        key = _group_key(codec, p)
        chain = groups.setdefault(key, [])
        current = chain[-1] if chain else None
        if (
            current is None
            or len(current.ids) >= codec.max_requests
            or current.size + size > codec.max_bytes
        ):
            n = len(parts)
            current = PartPlan(
                n=n, codec=codec, tag=f"sc{nonce}p{n}", model=p.model, options=opts,
                headers={}, endpoint=p.request.url,
            )  # fmt: skip
            chain.append(current)
            parts.append(current)
        vid = f"{current.tag}_{len(current.ids)}"
        try:
            line = codec.line(vid, p.request, p.model)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"request {cid!r}: {exc}") from exc
        current.ids.append(cid)
        current.lines.append(line)
        current.size += size
        current.worst_usd += worst or 0.0
        for k, v in p.request.headers.items():
            _merge_header(current.headers, k, v)
        plans[cid] = p
        rows.append(decode_row(cid, vid, current.n, p))
    for part in parts if whole else ():
        if len(part.ids) < part.codec.min_requests:
            raise ValueError(
                f"requests: {part.codec.name} takes at least {part.codec.min_requests} "
                f"requests per batch; the part for {part.model.provider}/{part.model.id} has "
                f"{len(part.ids)}"
            )
    return parts, plans, rows


def _merge_header(into: dict[str, str], key: str, value: str) -> None:
    """Requests' API headers, merged: comma lists (`anthropic-beta`) joined, once each."""
    k = key.lower()
    if k not in into:
        into[k] = value
        return
    have = [x.strip() for x in into[k].split(",") if x.strip()]
    for x in value.split(","):
        if x.strip() and x.strip() not in have:
            have.append(x.strip())
    into[k] = ",".join(have)


def _schema(options: StreamOptions) -> Any:
    schema = options.output_schema
    if schema is None or isinstance(schema, dict):
        return schema
    return schema.model_json_schema()


def decode_row(cid: str, vid: str, part: int, p: Plan) -> dict[str, Any]:
    """What reading the request's answer needs, without the request: never a key."""
    o = p.options
    opts: dict[str, Any] = {
        "max_tokens": o.max_tokens,
        "reasoning": o.reasoning,
        "thinking_budgets": o.thinking_budgets or None,
        "cache_retention": o.cache_retention,
        "service_tier": o.extra.get("service_tier"),
        "output_schema": _schema(o) if p.output is not None else None,
        "budget": o.budget,
    }
    return {
        "id": cid,
        "vid": vid,
        "part": part,
        "size": p.size,
        "server_tools": p.server_tools,
        "o": {k: v for k, v in opts.items() if v is not None},
        # As priced when planned: `cost_context` gives a host that cannot keep 1-hour cache
        # entries 5-minute prices, and treats tier "auto" as the standard price.
        "pricing": {"cache_ttl": p.pricing.cache_ttl, "service_tier": p.pricing.service_tier},
    }


def decode_plan(row: dict[str, Any], model: Model) -> Plan:
    """A plan good for reading an answer, rebuilt from a `requests.jsonl` row."""
    from stream_core import Context

    o = row.get("o") if isinstance(row.get("o"), dict) else {}
    assert isinstance(o, dict)
    extra = {"service_tier": o["service_tier"]} if isinstance(o.get("service_tier"), str) else {}
    options = StreamOptions(
        max_tokens=o.get("max_tokens"),
        reasoning=o.get("reasoning"),
        thinking_budgets=o.get("thinking_budgets") or {},
        cache_retention=o.get("cache_retention", "short"),
        output_schema=o.get("output_schema"),
    )
    wire = wire_of(model)
    output = output_spec(wire, model, options)
    tier = extra.get("service_tier")
    ttl: Literal["5m", "1h"] = "1h" if options.cache_retention == "long" else "5m"
    priced = row.get("pricing")
    if isinstance(priced, dict):
        ttl = "1h" if priced.get("cache_ttl") == "1h" else "5m"
        found = priced.get("service_tier")
        tier = found if isinstance(found, str) else None
    from stream_core.provider import WireRequest

    return Plan(
        wire=wire,
        model=model,
        context=Context(messages=[]),
        options=options,
        output=output,
        request=WireRequest(url="", payload={}),
        size=int(row.get("size") or 0),
        server_tools=bool(row.get("server_tools")),
        pricing=CostContext(cache_ttl=ttl, service_tier=tier, batch=True),
    )


def message_cost(message: AssistantMessage) -> float:
    cost = message.usage.cost
    return cost.total if cost is not None else 0.0
