"""Claude's rules, shared by the APIs that serve it: `anthropic` (the Messages API) and
`bedrock` (Claude through Converse). Which model generation an id names, and what extended
thinking demands of a request: a budget that leaves room for the answer, and a `top_p` of
at least 0.95.
"""

from __future__ import annotations

import re

__all__ = ["THINKING_MIN_TOP_P", "claude_version", "fit_thinking_budget", "thinking_top_p_problem"]

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
