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

from stream_core import Context, Model, Route, ServerTool, StreamOptions
from stream_core.provider import get_provider

__all__ = ["FITTED", "fit_options", "fit_server_tools"]

_COMMON = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
"""A `ServerTool`'s portable options, in the order they are let go."""

FITTED: dict[str, str] = {
    "max_tokens": "lowered to the model's output limit (the catalog's `max_tokens`); for a "
    "route, the smallest of its deployments'",
    "reasoning": "dropped for a model that does not reason (for a route: unless every "
    "deployment reasons); thinking budgets with it",
    "server tool options": "a server tool's max_uses, allowed_domains, blocked_domains or "
    "user_location that the target vendor's tool has no field for is let go (Claude Code "
    "always caps web_search with max_uses; Gemini's search takes no cap), and so are the "
    "client's own vendor fields on it (Codex's external_web_access); the tool stays",
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


def fit_server_tools(context: Context, target: Model | Route) -> list[str]:
    """Let go of the portable options of each server tool in `context` that a target's
    vendor tool cannot take, as its codec's own table (`WireAPI.server_tools`) says by
    refusing them; returns what was let go, for the access log."""
    tools = context.tools
    if not tools:
        return []
    fitted: list[str] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, ServerTool) or tool.kind == "native":
            continue
        fitted_tool = tool
        if tool.options:
            # The client's own vendor's fields (Codex's `external_web_access`): another
            # vendor's tool has no such field.
            fitted_tool = tool.model_copy(update={"options": {}})
            fitted.append(f"{tool.kind}.options")
        for model in _models(target):
            fitted_tool = _fit_one(fitted_tool, model.api, fitted)
        tools[i] = fitted_tool
    return fitted


def _fit_one(tool: ServerTool, api: str, fitted: list[str]) -> ServerTool:
    wire = get_provider(api).wire
    write = wire.server_tools.get(tool.kind) if wire is not None else None
    if write is None:
        return tool  # not taken at all: stream() refuses it, naming the API
    for name in (None, *_COMMON):
        if name is not None:
            if getattr(tool, name) is None:
                continue
            tool = tool.model_copy(update={name: None})
            fitted.append(f"{tool.kind}.{name}")
        try:
            write(tool)
        except ValueError:
            continue
        return tool
    return tool
