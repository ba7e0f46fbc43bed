"""`ServerTool`: a tool the vendor runs itself (web search, code execution, ...), asked
for in `Context.tools` beside function tools, by portable kind or in the vendor's exact
form. Each API's codec says which kinds it takes (`WireAPI.server_tools`); any other
raises at `stream()`, naming the API and the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from ._blocks import SERVER_TOOL_KINDS
from ._content import _Model, _not_none

if TYPE_CHECKING:
    from ._types import Tool

__all__ = [
    "COMMON_OPTIONS",
    "ServerTool",
    "function_tools_of",
    "refuse_unsaid_options",
    "server_tool_objects",
    "server_tools_of",
]

COMMON_OPTIONS = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
"""The portable options of a `ServerTool`, in the order errors name them."""


class UserLocation(_Model):
    """Where the user is, for a web search to rank local results (all optional)."""

    country: str | None = Field(default=None, exclude_if=_not_none)
    """Two-letter ISO country code."""
    region: str | None = Field(default=None, exclude_if=_not_none)
    city: str | None = Field(default=None, exclude_if=_not_none)
    timezone: str | None = Field(default=None, exclude_if=_not_none)
    """IANA time zone (`America/Los_Angeles`)."""


class ServerTool(_Model):
    """A vendor-run tool for the model to use: `kind` is one of `SERVER_TOOL_KINDS`
    (`web_search`, `web_fetch`, `code_execution`, `file_search`, `image_generation`, ...)
    with the common options below, or `native`: `tool` is then the vendor's own tool
    object, sent as it is to `api` only (MCP connectors, tool search, hosted shell, any
    tool this version has no kind for).

    `options` adds vendor fields to the tool object a kind becomes (`vector_store_ids`
    for OpenAI file search, `container` for code execution, ...)."""

    type: Literal["server_tool"] = "server_tool"
    kind: str
    max_uses: int | None = Field(default=None, ge=1, exclude_if=_not_none)
    allowed_domains: list[str] | None = Field(default=None, exclude_if=_not_none)
    blocked_domains: list[str] | None = Field(default=None, exclude_if=_not_none)
    user_location: UserLocation | None = Field(default=None, exclude_if=_not_none)
    options: dict[str, Any] = Field(default_factory=dict)
    """Vendor fields merged into the tool object the kind becomes."""
    api: str | None = Field(default=None, exclude_if=_not_none)
    """For `native`: the API the vendor object is for."""
    tool: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)
    """For `native`: the vendor's tool object, sent verbatim."""

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        # A field validator, so the error's path ends in `kind`.
        if kind != "native" and kind not in SERVER_TOOL_KINDS:
            raise ValueError(
                f"kind {kind!r} is no server tool kind ({', '.join(SERVER_TOOL_KINDS)}, "
                "or 'native' with the vendor's own tool object)"
            )
        return kind

    @model_validator(mode="after")
    def _check(self) -> ServerTool:
        if self.kind == "native" and (self.tool is None or not self.api):
            raise ValueError("a native ServerTool needs `api` and `tool` (the vendor object)")
        return self

    @classmethod
    def native(cls, api: str, tool: dict[str, Any]) -> ServerTool:
        """The vendor's own tool object, for `api` only."""
        return cls(kind="native", api=api, tool=tool)


def function_tools_of(tools: Iterable[Tool | ServerTool] | None) -> list[Tool]:
    """The function tools (the harness runs them) of `Context.tools`, in order."""
    return [t for t in tools or () if not isinstance(t, ServerTool)]


def server_tools_of(tools: Iterable[Tool | ServerTool] | None) -> list[ServerTool]:
    """The server tools (the vendor runs them) of `Context.tools`, in order."""
    return [t for t in tools or () if isinstance(t, ServerTool)]


def server_tool_objects(
    tools: Iterable[Tool | ServerTool] | None,
    table: Mapping[str, Callable[[ServerTool], dict[str, Any]]],
    *,
    merge_options: bool = True,
) -> list[dict[str, Any]]:
    """The vendor tool objects of the server tools of `Context.tools`, in order: a native
    one as given (a copy), a portable kind as its API's `table` makes it, with `options`
    merged in at the top (`merge_options=False`: the table's functions place them, for a
    vendor that nests a tool's fields). `stream()` has checked every kind against the table."""
    out: list[dict[str, Any]] = []
    for tool in server_tools_of(tools):
        if tool.kind == "native":
            out.append(dict(tool.tool or {}))
        elif merge_options:
            out.append({**table[tool.kind](tool), **tool.options})
        else:
            out.append(table[tool.kind](tool))
    return out


def refuse_unsaid_options(tool: ServerTool, takes: Iterable[str], said_as: str) -> None:
    """Raise, naming them, for the common options set on `tool` that the vendor's tool
    object has no field for (never left out of the request unsaid). `takes`: the options it
    has; `said_as`: what the tool becomes, for the message ("anthropic-messages's
    code_execution_20250825 tool")."""
    taken = set(takes)
    unsaid = [f for f in COMMON_OPTIONS if getattr(tool, f) is not None and f not in taken]
    if unsaid:
        raise ValueError(
            f"ServerTool(kind={tool.kind!r}): {said_as} takes no {', '.join(unsaid)} "
            "(leave them out; vendor fields go in `options`)"
        )
