"""What an agent asks of its own vendor's model, fitted to the model the gateway sends it to.

An agent asks for its own model's maximum output and thinking (Claude Code: `max_tokens`
64,000 and adaptive thinking at effort `high`, on every request). A direct `stream()` call
refuses such options for a model that cannot take them, naming the field: right for a
program that chose the model, wrong for a client that cannot know where the gateway sends
it. So for a gateway request, and only for these fields (`FITTED`, printed in the
gateway guide), the options are fitted to the target; every other mismatch is still the
400 that names the field.
"""

from __future__ import annotations

from stream_core import Model, Route, StreamOptions

__all__ = ["FITTED", "fit_options"]

FITTED: dict[str, str] = {
    "max_tokens": "lowered to the model's output limit (the catalog's `max_tokens`); for a "
    "route, the smallest of its deployments'",
    "reasoning": "dropped for a model that does not reason (for a route: unless every "
    "deployment reasons); thinking budgets with it",
}
"""The options a gateway request has fitted to its target, and how."""


def _models(target: Model | Route) -> list[Model]:
    if isinstance(target, Model):
        return [target]
    return [d.model for d in target.deployments]


def fit_options(options: StreamOptions, target: Model | Route) -> list[str]:
    """Fit `options` to `target` in place (see `FITTED`); returns what was fitted, for the
    access log."""
    models = _models(target)
    fitted: list[str] = []
    limit = min(m.max_tokens for m in models)
    if options.max_tokens is not None and options.max_tokens > limit:
        options.max_tokens = limit
        fitted.append("max_tokens")
    if options.reasoning is not None and not all(m.reasoning for m in models):
        options.reasoning = None
        options.thinking_budgets = {}
        fitted.append("reasoning")
    return fitted
