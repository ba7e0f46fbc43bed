"""Cost: genai-prices' data where it knows the model, the model's prices otherwise, None when
nobody knows, and never an exception. The data is our compact table (`prices.json`, from
scripts/generate_prices.py); genai-prices itself is the reference here."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import genai_prices
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

import stream_core
import stream_core.provider
from stream_core import (
    AssistantMessage,
    AssistantStreamEvent,
    Context,
    Model,
    ModelPrices,
    StreamOptions,
    Usage,
    UserMessage,
    get_model,
)
from stream_core import _cost as cost_module
from stream_core._cost import cost_context
from stream_core.contract_tests.kit import options, sse_response
from stream_core.provider import Assembler, CostContext, compute_cost

# Our provider name -> genai-prices' provider id, for the reference computation.
SAMPLE = [
    ("anthropic", "claude-sonnet-4-5", "anthropic"),
    ("anthropic", "claude-haiku-4-5-20251001", "anthropic"),
    ("anthropic", "claude-opus-4-1", "anthropic"),
    ("openai", "gpt-4o-2024-08-06", "openai"),
    ("openai", "gpt-5", "openai"),
    ("openai", "gpt-4.1-mini", "openai"),
    ("google", "gemini-2.5-pro", "google"),
    ("google", "gemini-2.5-flash", "google"),
    ("mistral", "mistral-large-latest", "mistral"),
    ("groq", "llama-3.3-70b-versatile", "groq"),
    ("xai", "grok-4.3", "x-ai"),
    ("deepseek", "deepseek-chat", "deepseek"),
    ("openrouter", "anthropic/claude-sonnet-4.5", "openrouter"),
    ("amazon-bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", "aws"),
]


def reference(
    model_id: str,
    provider_id: str,
    u: Usage,
    *,
    one_hour: bool = False,
    tier: str | None = None,
    at: datetime | None = None,
) -> float:
    """genai-prices' own total: its input counts cache reads and writes in."""
    usage = genai_prices.Usage(
        input_tokens=u.input + u.cache_read + u.cache_write,
        cache_read_tokens=u.cache_read,
        cache_write_tokens=u.cache_write,
        output_tokens=u.output,
    )
    if one_hour:
        usage.cache_write_1h_tokens = u.cache_write
    found = genai_prices.calc_price(
        usage,
        model_id,
        provider_id=provider_id,
        price_context={"service_tier": tier} if tier else None,
        genai_request_timestamp=at,
    )
    return float(found.total_price)


USAGES = [
    Usage(input=1_200, output=800),
    Usage(input=1_200, output=800, cache_read=30_000, cache_write=5_000),
    # Past 200k prompt tokens: tiered models switch price for every token.
    Usage(input=150_000, output=2_000, cache_read=100_000, cache_write=10_000),
]


@pytest.mark.parametrize(("provider", "model_id", "genai_id"), SAMPLE)
def test_costs_match_genai_prices_across_providers(
    provider: str, model_id: str, genai_id: str
) -> None:
    model = get_model(provider, model_id)
    at = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)  # one moment for both (DeepSeek's hours)
    for usage in USAGES:
        cost = compute_cost(model, usage, at=at)

        assert cost is not None, (model_id, usage)
        expected = reference(model_id, genai_id, usage, at=at)
        assert cost.total == pytest.approx(expected, rel=1e-12), (model_id, usage)
        parts = cost.input + cost.output + cost.cache_read + cost.cache_write
        assert cost.total == pytest.approx(parts, rel=1e-12)


def test_the_components_are_the_tokens_at_their_prices() -> None:
    model = get_model("anthropic", "claude-sonnet-4-5")
    cost = compute_cost(
        model, Usage(input=1_000, output=2_000, cache_read=10_000, cache_write=4_000)
    )

    assert cost is not None
    assert cost.input == pytest.approx(0.003)
    assert cost.output == pytest.approx(0.030)
    assert cost.cache_read == pytest.approx(0.003)
    assert cost.cache_write == pytest.approx(0.015)
    assert cost.total == pytest.approx(0.051)


def test_tiered_prices_follow_the_prompt_size() -> None:
    model = get_model("google", "gemini-2.5-pro")
    small = compute_cost(model, Usage(input=100_000, output=1_000))
    large = compute_cost(model, Usage(input=300_000, output=1_000))

    assert small is not None and large is not None
    # Past 200k prompt tokens every token costs more, output included.
    assert large.input / 300_000 > small.input / 100_000
    assert large.output > small.output
    assert large.total == pytest.approx(
        reference("gemini-2.5-pro", "google", Usage(input=300_000, output=1_000))
    )


def test_long_cache_retention_costs_writes_at_the_one_hour_price() -> None:
    model = get_model("anthropic", "claude-sonnet-4-5")
    usage = Usage(input=100, output=100, cache_write=100_000)  # under the 200k tier
    short = compute_cost(model, usage)
    long = compute_cost(model, usage, CostContext(cache_ttl="1h"))

    assert short is not None and long is not None
    assert short.cache_write == pytest.approx(0.375)
    assert long.cache_write == pytest.approx(0.6)  # 2x input for 1-hour entries
    assert long.total == pytest.approx(
        reference("claude-sonnet-4-5", "anthropic", usage, one_hour=True)
    )


def test_service_tier_changes_the_price() -> None:
    model = get_model("openai", "gpt-5")
    usage = Usage(input=1_000_000, output=1_000_000)
    standard = compute_cost(model, usage)
    flex = compute_cost(model, usage, CostContext(service_tier="flex"))

    assert standard is not None and flex is not None
    assert flex.total == pytest.approx(standard.total / 2)
    assert flex.total == pytest.approx(reference("gpt-5", "openai", usage, tier="flex"))
    # The option reaches the pricing through StreamOptions.extra; "auto" is standard.
    assert cost_context(model, StreamOptions(extra={"service_tier": "flex"})).service_tier == (
        "flex"
    )
    assert cost_context(model, StreamOptions(extra={"service_tier": "auto"})) == CostContext()


# --- where genai-prices does not know the model ---------------------------------------------

CUSTOM = Model(
    id="my-finetune",
    api="openai-completions",
    provider="mylab",
    base_url="http://127.0.0.1:8000/v1",
    prices=ModelPrices(input=1.0, output=2.0),
)


def test_the_models_own_prices_apply_where_genai_prices_has_none() -> None:
    cost = compute_cost(CUSTOM, Usage(input=1_000_000, output=500_000))

    assert cost is not None
    assert (cost.input, cost.output, cost.total) == (1.0, 1.0, 2.0)


def test_unknown_prices_give_none_never_zero() -> None:
    unpriced = CUSTOM.model_copy(update={"prices": ModelPrices()})

    assert compute_cost(unpriced, Usage(input=10, output=10)) is None
    # A price needed for the tokens used is missing: unknown too.
    assert compute_cost(CUSTOM, Usage(input=10, output=10, cache_read=5)) is None


def test_a_catalog_model_genai_prices_lacks_uses_the_catalog_price() -> None:
    model = get_model("lmstudio", stream_core.list_models("lmstudio")[0].id)
    priced = model.model_copy(update={"prices": ModelPrices(input=0.5, output=1.5)})

    cost = compute_cost(priced, Usage(input=2_000_000, output=1_000_000))
    assert cost is not None and cost.total == pytest.approx(2.5)


def test_a_model_listed_free_costs_zero() -> None:
    free = next(m for m in stream_core.list_models("openrouter") if m.id.endswith(":free"))
    cost = compute_cost(free, Usage(input=1_000, output=1_000))

    assert cost is not None and cost.total == 0.0


# --- totality -------------------------------------------------------------------------------

HUGE = 10**400


@pytest.mark.parametrize("model", [get_model("openai", "gpt-4o"), CUSTOM], ids=["genai", "own"])
@pytest.mark.parametrize("field", ["input", "output", "cache_read", "cache_write"])
def test_a_400_digit_usage_gives_none_instead_of_raising(model: Model, field: str) -> None:
    assert compute_cost(model, Usage(**{field: HUGE})) is None
    assert compute_cost(model, Usage(**{field: -5})) is None


@given(
    st.integers(min_value=-(10**30), max_value=10**500),
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from(["genai", "own", "1h"]),
)
def test_compute_cost_never_raises(big: int, small: int, which: str) -> None:
    model = CUSTOM if which == "own" else get_model("anthropic", "claude-sonnet-4-5")
    context = CostContext(cache_ttl="1h") if which == "1h" else None
    cost = compute_cost(model, Usage(input=big, output=small, cache_write=small), context)

    if cost is not None:
        assert cost.total >= 0 and cost.total != float("inf")


def test_a_failing_price_lookup_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model: Model) -> Any:
        raise RuntimeError("price data went wrong")

    monkeypatch.setattr(cost_module, "_genai_model", broken)

    assert compute_cost(get_model("openai", "gpt-4o"), Usage(input=1, output=1)) is None


def test_the_assembler_keeps_the_message_when_cost_cannot_be_computed() -> None:
    model = get_model("anthropic", "claude-sonnet-4-5")
    message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
    out: deque[AssistantStreamEvent] = deque()
    asm = Assembler(message, model, {"end_turn": "stop"}, out)
    asm.text("t", "hello")
    asm.set_usage(input=HUGE, output=3)
    message.raw_stop_reason = "end_turn"

    final = asm.finalize()

    assert final.usage.cost is None
    assert final.usage.input == HUGE and final.usage.total_tokens == HUGE + 3
    assert final.text() == "hello" and final.stop_reason == "stop"


# --- through a stream -----------------------------------------------------------------------


def _body(usage: dict[str, Any]) -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


async def _complete(model: Model, usage: dict[str, Any], **opts: Any) -> AssistantMessage:
    with respx.mock(assert_all_mocked=True) as router:
        router.post(model.base_url.rstrip("/") + "/v1/messages").mock(
            return_value=sse_response([_body(usage)])
        )
        context = Context(messages=[UserMessage(content="hi")])
        return await stream_core.complete(model, context, options(**opts))


@pytest.mark.anyio
async def test_a_stream_with_long_retention_prices_cache_writes_at_one_hour() -> None:
    model = get_model("anthropic", "claude-sonnet-4-5")
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 100_000}

    short = await _complete(model, usage)
    long = await _complete(model, usage, cache_retention="long")

    assert short.usage.cost is not None and long.usage.cost is not None
    assert short.usage.cost.cache_write == pytest.approx(0.375)
    assert long.usage.cost.cache_write == pytest.approx(0.6)


@pytest.mark.anyio
async def test_a_proxy_falls_back_to_five_minutes_and_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cost_module, "_warned_hosts", set())
    model = get_model("anthropic", "claude-sonnet-4-5").model_copy(
        update={"base_url": "https://llm-proxy.example"}
    )
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 100_000}

    with caplog.at_level(logging.WARNING, logger="stream_core"):
        first = await _complete(model, usage, cache_retention="long")
        await _complete(model, usage, cache_retention="long")

    assert first.usage.cost is not None
    assert first.usage.cost.cache_write == pytest.approx(0.375)  # what the proxy was asked for
    warnings = [r for r in caplog.records if "cache_retention='long'" in r.getMessage()]
    assert len(warnings) == 1
    assert "llm-proxy.example" in warnings[0].getMessage()


@pytest.mark.anyio
async def test_a_400_digit_usage_from_the_vendor_ends_the_stream_normally() -> None:
    model = get_model("anthropic", "claude-sonnet-4-5")
    message = await _complete(model, {"input_tokens": HUGE, "output_tokens": 1})

    assert message.text() == "ok"
    assert message.stop_reason == "stop" and message.error is None
    # Clamped to the context window (no vendor-run tool was asked for), priced; the
    # vendor's count is kept.
    assert message.usage.input == model.context_window
    assert message.usage.clamped == {"input": HUGE}
    assert message.usage.cost is not None


def test_long_cache_is_honored_by_anthropic_itself_and_other_apis() -> None:
    assert stream_core.provider.long_cache_honored(get_model("anthropic", "claude-haiku-4-5"))
    assert stream_core.provider.long_cache_honored(get_model("openai", "gpt-4o"))
    proxy = Model(
        id="c", api="anthropic-messages", provider="anthropic", base_url="https://x.example"
    )
    assert not stream_core.provider.long_cache_honored(proxy)


@pytest.mark.parametrize(
    "base_url",
    ["http://localhost:8000/v1", "http://127.0.0.1:1234/v1", "http://192.168.1.20:11434"],
)
def test_a_local_server_is_priced_by_its_own_prices_without_loading_the_price_data(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model served on this machine or the local network never reads the price table
    # (nobody prices it), whatever its name.
    def no_lookup() -> Any:
        raise AssertionError("price table consulted for a local server")

    monkeypatch.setattr(cost_module, "_table", no_lookup)
    local = Model(
        id="gpt-4o",
        api="openai-completions",
        provider="vllm",
        base_url=base_url,
        prices=ModelPrices(input=1.0, output=2.0),
    )
    cost = compute_cost(local, Usage(input=1_000_000, output=1_000_000))
    assert cost is not None and cost.total == 3.0


# --- the price table against genai-prices ---------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_prices", ROOT / "scripts" / "generate_prices.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_price_table_is_what_the_installed_genai_prices_gives(tmp_path: Path) -> None:
    gen = _generator()
    shipped = ROOT / "stream_core" / "prices.json"
    assert gen.main(["--check", "--out", str(shipped)]) == 0, (
        "stream_core/prices.json is stale: run `uv run python scripts/generate_prices.py`"
    )
    stale = tmp_path / "prices.json"
    stale.write_text(shipped.read_text(encoding="utf-8").replace('"input":3,', '"input":4,', 1))
    assert gen.main(["--check", "--out", str(stale)]) == 1


def test_the_price_table_is_small_and_names_its_source() -> None:
    size = (ROOT / "stream_core" / "prices.json").stat().st_size
    assert size < 600_000
    source = cost_module.prices_source()
    assert source["genai_prices"] == genai_prices.__version__


def _snapshot() -> Any:
    from genai_prices.data_snapshot import get_snapshot

    return get_snapshot()


def _pairs() -> list[tuple[Any, Any, Any]]:
    """(genai-prices' provider, its ModelInfo, our table's model), for every model."""
    table = cost_module._table()
    out = []
    for provider in _snapshot().providers:
        ours = table[provider.id].models
        assert [m.id for m in ours] == [m.id for m in provider.models]
        out += [(provider, info, mine) for info, mine in zip(provider.models, ours, strict=True)]
    return out


def _genai_usage(u: Usage, one_hour: bool) -> Any:
    usage = genai_prices.Usage(
        input_tokens=u.input + u.cache_read + u.cache_write,
        cache_read_tokens=u.cache_read,
        cache_write_tokens=u.cache_write,
        output_tokens=u.output,
    )
    if one_hour:
        usage.cache_write_1h_tokens = u.cache_write
    return usage


def _check(
    provider: Any,
    info: Any,
    found: cost_module._Found,
    context: CostContext,
    when: datetime | None = None,
) -> str:
    """Our cost of `found` against genai-prices' `calc_price` for `info`, for each usage;
    returns what kind of model it was."""
    now = when or datetime.now(tz=UTC)
    kind = "priced"
    for usage in USAGES:
        ours = cost_module._genai_cost(found, usage, context, now)
        ref = info.calc_price(
            _genai_usage(usage, context.cache_ttl == "1h"),
            provider,
            genai_request_timestamp=now,
            price_context={"service_tier": context.service_tier} if context.service_tier else None,
        )
        prices = {k for k, v in vars(ref.model_price).items() if v is not None}
        if ours is None:
            # Unknown for us: genai-prices lacks an input or output price here.
            assert not {"input_mtok", "output_mtok"} <= prices, (provider.id, info.id)
            return "unpriced"
        if "requests_kcount" in prices:
            # A price per request (Perplexity's sonar models) is not a token price: we leave
            # it out, and so does the comparison.
            expected = float(ref.total_price - ref.model_price.requests_kcount / 1000)
            kind = "per request"
        else:
            expected = float(ref.total_price)
        assert ours.total == pytest.approx(expected, rel=1e-9, abs=1e-15), (
            provider.id,
            info.id,
            usage,
            context,
            now,
        )
        if not prices:
            kind = "free"
    return kind


@pytest.mark.parametrize(
    "context",
    [CostContext(), CostContext(cache_ttl="1h")],
    ids=["5m", "1h"],
)
def test_every_model_of_the_table_costs_what_genai_prices_says(context: CostContext) -> None:
    seen: dict[str, int] = {}
    providers = set()
    for provider, info, mine in _pairs():
        kind = _check(provider, info, cost_module._Found(mine, False), context)
        seen[kind] = seen.get(kind, 0) + 1
        providers.add(provider.id)
    assert seen["priced"] > 2000 and seen.get("free", 0) > 0, seen
    assert len(providers) == len(_snapshot().providers)


def test_service_tier_variants_cost_what_genai_prices_says() -> None:
    checked = 0
    for provider, info, mine in _pairs():
        tiers = {
            v.when["service_tier"]
            for v in info.price_variants or ()
            if set(v.when) == {"service_tier"}
        }
        for tier in tiers:
            _check(provider, info, cost_module._Found(mine, False), CostContext(service_tier=tier))
            checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    "when",
    [
        datetime(2024, 1, 1, 12, tzinfo=UTC),
        datetime(2025, 6, 1, 2, 30, tzinfo=UTC),
        datetime(2025, 12, 1, 17, tzinfo=UTC),
        datetime(2026, 3, 1, 8, tzinfo=UTC),
        datetime(2026, 9, 1, 0, 45, tzinfo=UTC),
    ],
)
def test_dated_prices_cost_what_genai_prices_says_at_each_date(when: datetime) -> None:
    checked = 0
    for provider, info, mine in _pairs():
        if isinstance(mine.prices, list):
            _check(provider, info, cost_module._Found(mine, False), CostContext(), when)
            checked += 1
    assert checked > 100


def test_every_model_id_is_found_as_genai_prices_finds_it() -> None:
    # By each provider and each model's own id (some ids do not match their own rules:
    # then neither finds them).
    found_some = 0
    for provider, info, _ in _pairs():
        ours = cost_module._lookup(provider.id, "", info.id)
        try:
            _, expected = _snapshot().find_provider_model(info.id, None, provider.id, None)
        except LookupError:
            expected = None
        assert (ours and ours.model.id) == (expected and expected.id), (provider.id, info.id)
        found_some += ours is not None
    assert found_some > 2000


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        # Through a fallback provider (Azure serves OpenAI's models), or the provider's own.
        ("azure-openai", "gpt-4o"),
        ("azure-openai", "gpt-5"),
        ("google-vertex", "claude-sonnet-4-5"),
        # A compact date retried dashed, as genai-prices does.
        ("openai", "gpt-4.1-mini-20250414"),
    ],
)
def test_lookups_through_fallbacks_and_dates_find_genai_prices_model(
    provider: str, model_id: str
) -> None:
    genai_id = cost_module._GENAI_PROVIDER[provider]
    genai_provider, info = _snapshot().find_provider_model(model_id, None, genai_id, None)
    found = cost_module._lookup(genai_id, "", model_id)
    assert found is not None and found.model.id == info.id
    assert found.fallback == (not any(info is m for m in genai_provider.models))
    assert found.fallback == provider.startswith("azure")
    assert genai_provider.id == genai_id
    _check(genai_provider, info, found, CostContext(service_tier="flex"))


@pytest.mark.parametrize(
    "base_url",
    [
        "https://api.perplexity.ai",
        "https://api.together.xyz/v1",
        "https://api.anthropic.com",
        "https://nowhere.example/v1",
    ],
)
def test_a_provider_by_api_url_is_genai_prices_one(base_url: str) -> None:
    found = cost_module._find_provider(cost_module._table(), None, base_url)
    try:
        expected = _snapshot().find_provider(None, None, base_url).id
    except LookupError:
        expected = None
    assert (found.id if found is not None else None) == expected


def test_stream_core_never_imports_genai_prices() -> None:
    code = (
        "import sys, stream_core\n"
        "from stream_core import Usage, get_model, list_models\n"
        "from stream_core._cost import compute_cost, list_prices\n"
        "m = get_model('anthropic', 'claude-sonnet-4-5')\n"
        "assert compute_cost(m, Usage(input=10, output=10)).total > 0\n"
        "assert list_prices(get_model('openai', 'gpt-4o')).input == 2.5\n"
        "assert 'genai_prices' not in sys.modules, 'genai_prices imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
