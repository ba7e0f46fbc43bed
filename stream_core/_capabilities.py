"""`Model.capabilities()`: what a model takes, asked before the call.

Each control is tried through the same request building `stream()` does (the API's
`WireAPI.controls`, its per-endpoint flags, the per-model rules in `_rules`), with no I/O,
so the answer and the call never disagree: a control listed as refused is exactly one
`stream()` raises for, with the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from ._options import StreamOptions
from ._rules import ALL_EFFORTS, image_types, rules_for, thinking_mode
from ._server_tools import ServerTool

if TYPE_CHECKING:
    from ._models import Model

__all__ = ["Capabilities", "capabilities"]


class Capabilities(BaseModel):
    """What a model takes (`Model.capabilities()`): each portable control and
    `temperature`, the values `stream()` refuses and why, its reasoning levels, output
    modes, image types, window, output limit, whether it is priced, and the server tools
    and file types it takes."""

    model_config = ConfigDict(frozen=True)

    api: str
    controls: dict[str, str]
    """Control -> how it is sent (the vendor field), for each control the model takes."""
    refused: dict[str, str]
    """Control -> the error `stream()` raises when it is set, for each control the model
    does not take (the API has no such field, or a per-model rule says so)."""
    refused_values: dict[str, dict[str, str]]
    """Control -> {a value's repr: the error}, for controls taken with some values only
    (`temperature` on a model that takes only the default, `tool_choice="required"` where
    a tool cannot be forced, `parallel_tool_calls=False` where it cannot be said)."""
    together: list[list[str]]
    """Controls each fine alone that the model refuses in one request."""
    reasoning: list[str]
    """The `StreamOptions.reasoning` values it takes; empty when it does not reason."""
    thinking: str | None
    """How it is asked to think when a per-model rule says: `adaptive` (Claude 4.6+: an
    effort, no budget) or `level` (Gemini 3); None: its API's way (a token budget or an
    effort)."""
    output_modes: list[str]
    """How `output_schema` is asked: the mode used first (`native`, `json_object`), then the
    forced tool every model takes (`Model.structured_output` picks one)."""
    image_types: list[str] | None
    """The image types sent as images (others become a note); None when the model takes no
    images, or every type is sent."""
    context_window: int
    max_tokens: int
    priced: bool
    """Whether a cost can be computed for its usage."""
    rules: list[str]
    """The per-model rules that name it: `name: source`."""
    server_tools: list[str] = []
    """The `ServerTool.kind`s its API runs (`web_search`, `code_execution`, ...), in the
    API's order: any other kind raises at `stream()` (a `native` tool for this API is
    always sent as it is)."""
    file_types: list[str] = []
    """The media types a `FileContent` in a user message or tool result may have
    (`application/pdf`, ...), sorted: any other raises at `stream()`."""


PROBES: dict[str, tuple[Any, ...]] = {
    "temperature": (0.5, 1.0),
    "tool_choice": ("auto", "none", "required", {"tool": "probe"}),
    "parallel_tool_calls": (False,),
    "stop": (["END"],),
    "top_p": (0.9,),
    "top_k": (5,),
    "seed": (1,),
    "presence_penalty": (0.1,),
    "frequency_penalty": (0.1,),
    "output_schema": ({"type": "object", "properties": {"a": {"type": "string"}}},),
}
"""The values each control is tried with: the request `stream()` builds for each is the
answer, so the query and the call cannot disagree."""


def capabilities(model: Model, get_provider: Callable[[str], Any]) -> Capabilities:
    """`Model.capabilities()` (`get_provider`: the registry's, handed in by `_registry`,
    which sits above this module)."""
    from ._cost import compute_cost
    from ._types import Context, Tool, Usage, UserMessage

    provider = get_provider(model.api)
    wire = provider.wire

    def _refusal(model: Model, context: Any, options: dict[str, Any]) -> str | None:
        """The error `stream()` raises for this call, or None (nothing is sent either way)."""
        try:
            provider.stream(model, context, StreamOptions(**options))
        except (ValueError, TypeError) as exc:
            return str(exc)
        return None

    tool = Tool(name="probe", description="A probe.", parameters={"type": "object"})
    context = Context(messages=[UserMessage(content="probe")], tools=[tool])
    base: dict[str, Any] = {"api_key": "probe"}
    if _refusal(model, context, base) is not None:
        base["base_url"] = "https://probe.example/v1"  # a placeholder host: still say
    controls: dict[str, str] = {}
    refused: dict[str, str] = {}
    refused_values: dict[str, dict[str, str]] = {}
    for name, values in PROBES.items():
        errors = {repr(v): _refusal(model, context, {**base, name: v}) for v in values}
        bad = {k: e for k, e in errors.items() if e is not None}
        if len(bad) == len(values):
            refused[name] = next(iter(bad.values()))
            continue
        field = wire.controls.get(name) if wire is not None else None
        controls[name] = field or name
        if bad:
            refused_values[name] = bad

    def fine(control: str) -> Any:
        """A value `control` is taken with alone."""
        bad = refused_values.get(control, {})
        return next(v for v in PROBES[control] if repr(v) not in bad)

    together = [
        pair
        for pair in (["temperature", "top_p"],)
        if not any(c in refused for c in pair)
        and _refusal(model, context, {**base, **{c: fine(c) for c in pair}}) is not None
    ]
    levels = [e for e in ALL_EFFORTS if _refusal(model, context, {**base, "reasoning": e}) is None]
    modes: list[str] = ["tool"]
    if wire is not None:
        mode: str = model.structured_output or wire.output_mode(model)
        if mode != "tool":
            modes.insert(0, mode)
    images = image_types(model) if "image" in model.input else None
    priced = compute_cost(model, Usage(input=1, output=1)) is not None
    return Capabilities(
        api=model.api,
        controls=controls,
        refused=refused,
        refused_values=refused_values,
        together=together,
        reasoning=levels,
        thinking=thinking_mode(model),
        output_modes=modes,
        image_types=sorted(images) if images else None,
        context_window=model.context_window,
        max_tokens=model.max_tokens,
        priced=priced,
        rules=[f"{r.name}: {r.source}" for r in rules_for(model)],
        # The same tables `stream()` checks (`_pipeline.checks`), so they cannot disagree.
        server_tools=_server_tools(wire, model),
        file_types=sorted(wire.file_types) if wire is not None else [],
    )


def _server_tools(wire: Any, model: Model) -> list[str]:
    """The kinds of the API's table this model runs (`WireAPI.server_tool_refusal`)."""
    if wire is None or not wire.takes_tools:
        return []
    return [
        k for k in wire.server_tools if wire.server_tool_refusal(model, ServerTool(kind=k)) is None
    ]
