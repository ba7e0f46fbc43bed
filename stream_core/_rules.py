"""Per-model request rules, as data: what a model refuses or takes differently from what its
wire API can say, each with its source.

A wire API's `controls` say what the API can express; a model decides what it accepts
(Claude Opus 4.7 takes adaptive thinking only and refuses `temperature`; OpenAI's
reasoning models take only the default temperature). `check_rules` applies the table at
`stream()`, before any I/O, with the project's one rule: a control the model cannot take
raises, naming the model and the control; one with a faithful equivalent is converted by
the provider (`thinking_mode`, `image_types`). A model no rule names keeps its API's
behaviour. `Model.capabilities()` reads the same table, so it never disagrees with
`stream()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ._models import Model
    from ._options import StreamOptions

__all__ = [
    "ADAPTIVE_EFFORTS",
    "BEDROCK_IMAGE_FORMATS",
    "ALL_EFFORTS",
    "IMAGE_TYPES",
    "RULES",
    "Rule",
    "check_rules",
    "image_note",
    "image_types",
    "reasoning_levels",
    "rules_for",
    "thinking_level",
    "thinking_mode",
]

ALL_EFFORTS = ("minimal", "low", "medium", "high")

ADAPTIVE_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
"""`reasoning` -> Claude's `output_config.effort` under adaptive thinking (it has no
"minimal": its lowest, `low`, skips thinking on simple problems)."""

ThinkingMode = Literal["budget", "adaptive", "level", "effort"]

_CLAUDE = frozenset({"anthropic-messages", "bedrock-converse-stream"})
_OPENAI = frozenset({"openai-completions", "openai-responses"})

BEDROCK_IMAGE_FORMATS: dict[str, str] = {
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
}
"""Bedrock's `ImageBlock.format` for each image type it takes (its own list of types)."""

IMAGE_TYPES: dict[str, frozenset[str]] = {
    # https://docs.anthropic.com/en/docs/build-with-claude/vision (jpeg, png, gif, webp)
    "anthropic-messages": frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    # https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ImageBlock.html
    "bedrock-converse-stream": frozenset(BEDROCK_IMAGE_FORMATS),
    # https://platform.openai.com/docs/guides/images-vision (png, jpeg, webp, non-animated gif)
    "openai-completions": frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    "openai-responses": frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    # https://ai.google.dev/gemini-api/docs/image-understanding (png, jpeg, webp, heic, heif)
    "google-generative-ai": frozenset(
        {"image/jpeg", "image/png", "image/webp", "image/heic", "image/heif"}
    ),
    # https://docs.mistral.ai/capabilities/vision/ (png, jpeg, webp, non-animated gif)
    "mistral-conversations": frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
}
"""The image types each API's vendor documents; an image of another type is sent as a note
naming it (as the Bedrock provider always did), never a request the vendor refuses."""


@dataclass(frozen=True)
class Rule:
    """What the models whose id matches `pattern` (on `apis`) take differently."""

    name: str
    apis: frozenset[str]
    pattern: str
    source: str
    refuses: frozenset[str] = frozenset()
    """Controls the model refuses outright (a call that sets one raises)."""
    refuses_together: frozenset[str] = frozenset()
    """Controls it refuses in the same request (each alone is fine)."""
    only_temperature: float | None = None
    """The one temperature it takes (any other raises; this one is sent as nothing)."""
    thinking: ThinkingMode | None = None
    """How it is asked to think: a token budget, adaptive thinking with an effort, a level."""
    efforts: tuple[str, ...] | None = None
    """The `reasoning` values it takes (None: all of them)."""
    levels: dict[str, str] = field(default_factory=dict)
    """`reasoning` -> the vendor's level, where the model takes a level."""


RULES: tuple[Rule, ...] = (
    Rule(
        name="claude-adaptive-only",
        apis=_CLAUDE,
        # Claude Opus 4.7 and later, the Mythos and Fable models, every Claude 5.
        pattern=r"claude-(?:opus-4-[7-9]|opus-[5-9]|sonnet-[5-9]|haiku-[5-9]|mythos|fable)"
        r"|claude-[5-9]",
        source="https://docs.aws.amazon.com/bedrock/latest/userguide/"
        "claude-messages-adaptive-thinking.html ('only support adaptive thinking'); the "
        "vendor's 400 'temperature is deprecated for this model'",
        refuses=frozenset({"temperature", "top_p", "top_k"}),
        thinking="adaptive",
    ),
    Rule(
        name="claude-4.6-adaptive",
        apis=_CLAUDE,
        pattern=r"claude-(?:opus|sonnet)-4-6",
        source="https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking "
        "(budget_tokens deprecated on Opus 4.6 and Sonnet 4.6: use adaptive with an effort)",
        thinking="adaptive",
    ),
    Rule(
        name="claude-4.5-sampling",
        apis=_CLAUDE,
        pattern=r"claude-(?:sonnet-4-5|opus-4-1|opus-4-5|haiku-4-5)",
        source="the vendor's 400 'temperature and top_p cannot both be specified for this "
        "model' (validated against Sonnet 4.5 and Opus 4.1)",
        refuses_together=frozenset({"temperature", "top_p"}),
    ),
    Rule(
        name="openai-o-series",
        apis=_OPENAI,
        pattern=r"(?:^|/)o[1-9](?:-|$)",
        source="https://platform.openai.com/docs/guides/reasoning (o-series: "
        "reasoning_effort low, medium, high; only the default temperature)",
        only_temperature=1.0,
        efforts=("low", "medium", "high"),
    ),
    Rule(
        name="openai-gpt-5",
        apis=_OPENAI,
        pattern=r"(?:^|/)gpt-5(?!-chat)",
        source="https://platform.openai.com/docs/guides/reasoning (GPT-5 reasoning models: "
        "400 'Only the default (1) value is supported' for temperature)",
        only_temperature=1.0,
    ),
    Rule(
        name="gemini-3-pro-levels",
        apis=frozenset({"google-generative-ai"}),
        pattern=r"gemini-3(?:\.\d+)?-pro",
        source="https://ai.google.dev/gemini-api/docs/thinking (Gemini 3 Pro and 3.1 Pro: "
        "thinkingLevel low or high)",
        thinking="level",
        levels={"minimal": "low", "low": "low", "medium": "high", "high": "high"},
    ),
    Rule(
        name="gemini-3-levels",
        apis=frozenset({"google-generative-ai"}),
        pattern=r"gemini-3(?:\.\d+)?-(?!pro)",
        source="https://ai.google.dev/gemini-api/docs/thinking (Gemini 3 Flash: "
        "thinkingLevel minimal, low, medium, high)",
        thinking="level",
        levels={"minimal": "minimal", "low": "low", "medium": "medium", "high": "high"},
    ),
)
"""Every rule, most specific first (the first rule that sets a field wins for it)."""

_COMPILED = tuple((rule, re.compile(rule.pattern)) for rule in RULES)


@lru_cache(maxsize=4096)
def _rules(api: str, model_id: str) -> tuple[Rule, ...]:
    found = []
    taken: set[str] = set()
    for rule, pattern in _COMPILED:
        if api in rule.apis and pattern.search(model_id):
            # A later, more general rule never overrides what an earlier one set.
            if rule.thinking is not None and "thinking" in taken:
                continue
            if rule.thinking is not None:
                taken.add("thinking")
            found.append(rule)
    return tuple(found)


def rules_for(model: Model) -> tuple[Rule, ...]:
    """The rules that name `model` (empty for a model the table does not know)."""
    return _rules(model.api, model.id)


def thinking_mode(model: Model) -> ThinkingMode | None:
    """How the model is asked to think when a rule says (None: its API's default)."""
    for rule in rules_for(model):
        if rule.thinking is not None:
            return rule.thinking
    return None


def thinking_level(model: Model, effort: str) -> str | None:
    """The vendor's level for `effort`, for a model that takes levels."""
    for rule in rules_for(model):
        if rule.levels:
            return rule.levels.get(effort)
    return None


def reasoning_levels(model: Model) -> tuple[str, ...]:
    """The `reasoning` values the model takes: none when it does not reason."""
    if not model.reasoning:
        return ()
    for rule in rules_for(model):
        if rule.efforts is not None:
            return rule.efforts
    return ALL_EFFORTS


def image_types(model: Model) -> frozenset[str] | None:
    """The image types the model's vendor documents (None: not known, all are sent)."""
    return IMAGE_TYPES.get(model.api)


def image_note(model: Model, mime_type: str) -> str | None:
    """The text sent in place of an image whose type `model`'s vendor does not take (None:
    send the image)."""
    allowed = image_types(model)
    if allowed is None or mime_type.lower() in allowed:
        return None
    kinds = ", ".join(sorted({t.removeprefix("image/").replace("jpg", "jpeg") for t in allowed}))
    return f"(image omitted: {model.id} takes {kinds} images, not {mime_type})"


def check_rules(model: Model, options: StreamOptions) -> None:
    """Raise `ValueError` for a control `model` cannot take, naming the model, the control
    and the rule's source."""
    label = f"{model.provider}/{model.id}"
    if options.reasoning is not None:
        levels = reasoning_levels(model)
        if not levels:
            raise ValueError(
                f"StreamOptions.reasoning: {label} does not reason (Model.reasoning is "
                "False); leave reasoning unset for it"
            )
        if options.reasoning not in levels:
            raise ValueError(
                f"StreamOptions.reasoning: {label} takes {', '.join(map(repr, levels))}, "
                f"not {options.reasoning!r}"
            )
    if options.max_tokens is not None:
        from ._models import catalog_output_limit

        limit = catalog_output_limit(model.provider, model.id)
        if limit is not None and options.max_tokens > limit:
            raise ValueError(
                f"StreamOptions.max_tokens: {label} writes at most {limit:,} tokens (the "
                f"catalog's output limit), not {options.max_tokens:,}"
            )
    for rule in rules_for(model):
        for control in sorted(rule.refuses):
            if getattr(options, control, None) is not None:
                raise ValueError(
                    f"StreamOptions.{control}: {label} does not take it (rule "
                    f"{rule.name}: {rule.source})"
                )
        together = [c for c in sorted(rule.refuses_together) if getattr(options, c) is not None]
        if rule.refuses_together and len(together) == len(rule.refuses_together):
            raise ValueError(
                f"StreamOptions.{together[0]}: {label} does not take "
                f"{' and '.join(together)} together; set one (rule {rule.name}: {rule.source})"
            )
        wanted = rule.only_temperature
        if wanted is not None and options.temperature not in (None, wanted):
            raise ValueError(
                f"StreamOptions.temperature: {label} takes only the default "
                f"({wanted:g}), not {options.temperature!r} (rule {rule.name}: {rule.source})"
            )
