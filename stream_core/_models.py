"""Model descriptions and the small built-in catalog.

A `Model` is plain data: which wire API speaks to it, where, and what it costs. Custom
models (a local vLLM, a fine-tune, a proxy) are ordinary constructors; the catalog only
saves typing for the common ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Model", "ModelPrices", "get_model", "list_models", "register_model"]


class ModelPrices(BaseModel):
    """USD per million tokens. A price left None is unknown, and so is the cost."""

    model_config = ConfigDict(extra="forbid")

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    """The id sent on the wire."""
    name: str = ""
    api: str = Field(min_length=1)
    """Wire API: selects the provider module (e.g. "anthropic-messages")."""
    provider: str = Field(min_length=1)
    """Who serves and bills it (e.g. "anthropic", "groq"); picks the API-key variable."""
    base_url: str = Field(min_length=1)
    reasoning: bool = False
    input: list[Literal["text", "image"]] = Field(default_factory=lambda: ["text"])  # type: ignore[arg-type]
    prices: ModelPrices = Field(default_factory=ModelPrices)
    context_window: int = 128_000
    max_tokens: int = 8_192
    headers: dict[str, str] = Field(default_factory=dict)
    compat: dict[str, Any] = Field(default_factory=dict)
    """Per-endpoint flags overriding the provider's detected defaults, field by field."""

    def __repr__(self) -> str:
        return f"Model(provider={self.provider!r}, id={self.id!r}, api={self.api!r})"


def _m(
    provider: str,
    api: str,
    base_url: str,
    id: str,
    name: str,
    *,
    prices: tuple[float, float, float | None, float | None],
    context: int,
    max_tokens: int,
    reasoning: bool = False,
    image: bool = True,
) -> Model:
    inp, out, cr, cw = prices
    return Model(
        id=id,
        name=name,
        api=api,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        input=["text", "image"] if image else ["text"],
        prices=ModelPrices(input=inp, output=out, cache_read=cr, cache_write=cw),
        context_window=context,
        max_tokens=max_tokens,
    )


_ANTHROPIC = ("anthropic", "anthropic-messages", "https://api.anthropic.com")
_OPENAI = ("openai", "openai-completions", "https://api.openai.com/v1")
_GROQ = ("groq", "openai-completions", "https://api.groq.com/openai/v1")
_XAI = ("xai", "openai-completions", "https://api.x.ai/v1")
_DEEPSEEK = ("deepseek", "openai-completions", "https://api.deepseek.com")
_OPENAI_RESPONSES = ("openai", "openai-responses", "https://api.openai.com/v1")
# `RESOURCE` is replaced from AZURE_OPENAI_RESOURCE_NAME (or the whole URL from
# AZURE_OPENAI_BASE_URL); the id is the deployment name unless `extra["deployment"]` says.
_AZURE = ("azure-openai", "openai-responses", "https://RESOURCE.openai.azure.com/openai/v1")

# Published list prices (USD / million tokens) at the time of writing; check before billing.
_CATALOG: list[Model] = [
    _m(
        *_ANTHROPIC,
        "claude-opus-4-5",
        "Claude Opus 4.5",
        prices=(5, 25, 0.5, 6.25),
        context=200_000,
        max_tokens=64_000,
        reasoning=True,
    ),
    _m(
        *_ANTHROPIC,
        "claude-sonnet-4-5",
        "Claude Sonnet 4.5",
        prices=(3, 15, 0.3, 3.75),
        context=200_000,
        max_tokens=64_000,
        reasoning=True,
    ),
    _m(
        *_ANTHROPIC,
        "claude-haiku-4-5",
        "Claude Haiku 4.5",
        prices=(1, 5, 0.1, 1.25),
        context=200_000,
        max_tokens=64_000,
        reasoning=True,
    ),
    _m(
        *_ANTHROPIC,
        "claude-opus-4-1",
        "Claude Opus 4.1",
        prices=(15, 75, 1.5, 18.75),
        context=200_000,
        max_tokens=32_000,
        reasoning=True,
    ),
    _m(
        *_ANTHROPIC,
        "claude-sonnet-4-0",
        "Claude Sonnet 4",
        prices=(3, 15, 0.3, 3.75),
        context=200_000,
        max_tokens=64_000,
        reasoning=True,
    ),
    _m(
        *_ANTHROPIC,
        "claude-3-5-haiku-latest",
        "Claude Haiku 3.5",
        prices=(0.8, 4, 0.08, 1),
        context=200_000,
        max_tokens=8_192,
    ),
    _m(
        *_OPENAI,
        "gpt-4o",
        "GPT-4o",
        prices=(2.5, 10, 1.25, None),
        context=128_000,
        max_tokens=16_384,
    ),
    _m(
        *_OPENAI,
        "gpt-4o-mini",
        "GPT-4o mini",
        prices=(0.15, 0.6, 0.075, None),
        context=128_000,
        max_tokens=16_384,
    ),
    _m(
        *_OPENAI,
        "gpt-4.1",
        "GPT-4.1",
        prices=(2, 8, 0.5, None),
        context=1_047_576,
        max_tokens=32_768,
    ),
    _m(
        *_OPENAI,
        "gpt-4.1-mini",
        "GPT-4.1 mini",
        prices=(0.4, 1.6, 0.1, None),
        context=1_047_576,
        max_tokens=32_768,
    ),
    _m(
        *_OPENAI,
        "gpt-4.1-nano",
        "GPT-4.1 nano",
        prices=(0.1, 0.4, 0.025, None),
        context=1_047_576,
        max_tokens=32_768,
    ),
    _m(
        *_OPENAI,
        "gpt-5",
        "GPT-5",
        prices=(1.25, 10, 0.125, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI,
        "gpt-5-mini",
        "GPT-5 mini",
        prices=(0.25, 2, 0.025, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI,
        "o4-mini",
        "o4-mini",
        prices=(1.1, 4.4, 0.275, None),
        context=200_000,
        max_tokens=100_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI_RESPONSES,
        "gpt-5.1",
        "GPT-5.1",
        prices=(1.25, 10, 0.125, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI_RESPONSES,
        "gpt-5-codex",
        "GPT-5 Codex",
        prices=(1.25, 10, 0.125, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI_RESPONSES,
        "gpt-5-nano",
        "GPT-5 nano",
        prices=(0.05, 0.4, 0.005, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_OPENAI_RESPONSES,
        "o3",
        "o3",
        prices=(2, 8, 0.5, None),
        context=200_000,
        max_tokens=100_000,
        reasoning=True,
    ),
    _m(
        *_AZURE,
        "gpt-5-mini",
        "GPT-5 mini (Azure)",
        prices=(0.25, 2, 0.025, None),
        context=400_000,
        max_tokens=128_000,
        reasoning=True,
    ),
    _m(
        *_GROQ,
        "llama-3.3-70b-versatile",
        "Llama 3.3 70B (Groq)",
        prices=(0.59, 0.79, None, None),
        context=131_072,
        max_tokens=32_768,
        image=False,
    ),
    _m(
        *_GROQ,
        "qwen/qwen3-32b",
        "Qwen3 32B (Groq)",
        prices=(0.29, 0.59, None, None),
        context=131_072,
        max_tokens=40_960,
        reasoning=True,
        image=False,
    ),
    _m(
        *_GROQ,
        "openai/gpt-oss-120b",
        "gpt-oss-120b (Groq)",
        prices=(0.15, 0.6, None, None),
        context=131_072,
        max_tokens=65_536,
        reasoning=True,
        image=False,
    ),
    _m(
        *_XAI,
        "grok-3-mini",
        "Grok 3 mini",
        prices=(0.3, 0.5, 0.075, None),
        context=131_072,
        max_tokens=16_384,
        reasoning=True,
        image=False,
    ),
    _m(
        *_XAI,
        "grok-4",
        "Grok 4",
        prices=(3, 15, 0.75, None),
        context=256_000,
        max_tokens=64_000,
        reasoning=True,
    ),
    _m(
        *_DEEPSEEK,
        "deepseek-chat",
        "DeepSeek V3 (chat)",
        prices=(0.27, 1.1, 0.07, None),
        context=128_000,
        max_tokens=8_192,
        image=False,
    ),
    _m(
        *_DEEPSEEK,
        "deepseek-reasoner",
        "DeepSeek R1 (reasoner)",
        prices=(0.55, 2.19, 0.14, None),
        context=128_000,
        max_tokens=64_000,
        reasoning=True,
        image=False,
    ),
]

_BY_KEY: dict[tuple[str, str], Model] = {(m.provider, m.id): m for m in _CATALOG}


def get_model(provider: str, model_id: str) -> Model:
    """The catalog entry for `provider`/`model_id`; `KeyError` naming what exists otherwise."""
    try:
        return _BY_KEY[(provider, model_id)]
    except KeyError:
        known = sorted(m.id for m in _BY_KEY.values() if m.provider == provider)
        hint = f"known for {provider!r}: {', '.join(known)}" if known else "unknown provider"
        raise KeyError(f"no model {model_id!r} for provider {provider!r} ({hint})") from None


def list_models(provider: str | None = None) -> list[Model]:
    return [m for m in _BY_KEY.values() if provider is None or m.provider == provider]


def register_model(model: Model) -> None:
    """Add or replace a catalog entry (plugins use this for their models)."""
    _BY_KEY[(model.provider, model.id)] = model
