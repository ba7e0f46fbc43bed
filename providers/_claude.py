"""Claude's rules, shared by the APIs that serve it: `anthropic` (the Messages API) and
`bedrock` (Claude through Converse). Which model generation an id names, and what extended
thinking demands of a request: a budget that leaves room for the answer, and a `top_p` of
at least 0.95.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "THINKING_MIN_TOP_P",
    "claude_schema",
    "claude_version",
    "fit_thinking_budget",
    "thinking_top_p_problem",
]

THINKING_MIN_TOP_P = 0.95
"""With extended thinking on, Claude takes a top_p only in [0.95, 1]."""

# Claude model ids with a family and a version: claude-sonnet-4-5-20250929, claude-opus-4-6,
# claude-haiku-4-5@20251001, anthropic.claude-opus-4-1-20250805-v1:0, claude-sonnet-5...
_CLAUDE_VERSION = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?![0-9])")


def claude_version(model_id: str) -> tuple[str, int, int] | None:
    """(family, major, minor) of a Claude model id with the family first, else None."""
    match = _CLAUDE_VERSION.search(model_id)
    if match is None:
        return None
    return match.group(1), int(match.group(2)), int(match.group(3) or 0)


def fit_thinking_budget(budget: int, max_tokens: int) -> int:
    """The thinking budget for a call with this output limit: at most the limit less 1,024
    tokens for the answer, and never under 1,024 (the API's minimum; the caller then
    raises the limit above it)."""
    return min(budget, max(1024, max_tokens - 1024))


def thinking_top_p_problem(top_p: float, who: str, reasoning: object) -> str | None:
    """Why `top_p` cannot go with extended thinking, naming the option; None when it can."""
    if top_p >= THINKING_MIN_TOP_P:
        return None
    return (
        f"StreamOptions.top_p: {who} takes a top_p of {THINKING_MIN_TOP_P} to 1 while "
        f"extended thinking is on (StreamOptions.reasoning={reasoning!r}), not {top_p}"
    )


# Claude's structured-output schema subset (https://docs.anthropic.com/en/docs/
# build-with-claude/structured-outputs, "JSON Schema limitations"): these keywords are sent;
# every other one is moved into the description, as Anthropic's own SDK does, so the model
# still reads the constraint ("{minimum: 1, maximum: 20}") and the request is accepted.
_KEPT = frozenset(
    {
        "type", "enum", "const", "anyOf", "allOf", "description", "title", "$defs",
        "definitions", "$ref", "properties", "required", "additionalProperties", "items",
    }
)  # fmt: skip
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)


def claude_schema(schema: Any) -> Any:
    """`schema` reduced to Claude's structured-output subset, the constraints it cannot take
    kept in the description (a new object; the caller's is not changed)."""
    if isinstance(schema, list):
        return [claude_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {k: claude_schema(v) for k, v in value.items()}
        elif key in ("items", "anyOf", "allOf"):
            out[key] = claude_schema(value)
        elif key == "additionalProperties":
            if value is False:
                out[key] = False
            else:
                moved[key] = value
        elif key == "format":
            (out if value in _FORMATS else moved)[key] = value
        elif key == "minItems":
            (out if value in (0, 1) else moved)[key] = value
        elif key in _KEPT:
            out[key] = value
        else:
            moved[key] = value
    if moved:
        note = (
            "{"
            + ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in moved.items())
            + "}"
        )
        text = out.get("description")
        out["description"] = f"{text}\n\n{note}" if isinstance(text, str) and text else note
    return out
