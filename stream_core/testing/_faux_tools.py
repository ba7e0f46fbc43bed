"""Faux turns holding what a vendor runs and makes itself: a server tool call with its
result, text citing what it found, generated files, any block of a `block_*` kind.

A harness author scripts a web-search flow offline with them, e.g.::

    model = faux_model([
        faux_web_search(
            "weather in Paris",
            sources=[("https://meteo.example/paris", "Paris forecast")],
            text="Sunny, 24 °C.",
        )
    ])

The turn streams as a vendor's would (`block_start` / `block_end` for the call and its
result, then the text with one `citation` event per source) and ends as the message built
here (`faux_server_message` returns it, to compare with).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._blocks import SERVER_TOOL_KINDS, ServerToolCall, ServerToolResult
from .._types import AssistantMessage, Citation, Source, StopReason, TextContent, Usage
from ._faux import API, FauxTurn, faux_message

__all__ = ["faux_content", "faux_server_message", "faux_server_tool", "faux_web_search"]

SourceLike = Source | str | tuple[str, str]
"""A source: a `Source`, a URL, or `(url, title)`."""
CitationLike = Citation | str
"""A citation: a `Citation`, or the URL of one of the call's sources (titled as it is)."""


def faux_content(
    blocks: Sequence[Any],
    *,
    usage: Usage | None = None,
    container: Mapping[str, Any] | None = None,
    stop_reason: StopReason = "stop",
) -> FauxTurn:
    """A turn answering exactly `blocks` (any assistant blocks: text with citations,
    thinking, tool calls, server tool calls and results, files, approval requests, vendor
    blocks), with `usage` (its `server_tools` counts too) and the vendor's `container`.
    A tool call among them makes the stop `tool_use`."""
    return faux_message(_assistant(blocks, usage, container, stop_reason))


def faux_server_message(
    kind: str,
    input: Any = None,
    *,
    name: str | None = None,
    id: str | None = None,
    sources: Sequence[SourceLike] = (),
    result: str | ServerToolResult | None = None,
    is_error: bool = False,
    text: str | None = None,
    citations: Sequence[CitationLike] | bool = False,
    usage: Usage | None = None,
    container: Mapping[str, Any] | None = None,
) -> AssistantMessage:
    """The message `faux_server_tool` scripts (the same arguments): what the stream must
    end with."""
    tool_kind = kind if kind in SERVER_TOOL_KINDS else None
    call_id = id or f"srvtoolu_faux_{name or kind}"
    call = ServerToolCall(
        id=call_id, name=name or kind, kind=tool_kind, input={} if input is None else input
    )
    found = [_source(s) for s in sources]
    if isinstance(result, ServerToolResult):
        answer = result if result.call_id else result.model_copy(update={"call_id": call_id})
    else:
        answer = ServerToolResult(
            call_id=call_id,
            name=call.name,
            kind=tool_kind,
            is_error=is_error,
            text=result or "",
            sources=found,
        )
    blocks: list[Any] = [call, answer]
    if text is not None:
        cited = _citations(citations, answer.sources)
        blocks.append(TextContent(text=text, citations=cited or None))
    counts = dict((usage.server_tools if usage is not None else None) or {})
    counts.setdefault(tool_kind or call.name, 1)
    usage = (usage or Usage()).model_copy(update={"server_tools": counts})
    return _assistant(blocks, usage, container, "stop")


def faux_server_tool(
    kind: str,
    input: Any = None,
    *,
    name: str | None = None,
    id: str | None = None,
    sources: Sequence[SourceLike] = (),
    result: str | ServerToolResult | None = None,
    is_error: bool = False,
    text: str | None = None,
    citations: Sequence[CitationLike] | bool = False,
    usage: Usage | None = None,
    container: Mapping[str, Any] | None = None,
) -> FauxTurn:
    """A turn in which the vendor runs one tool itself, then answers.

    - `kind`: a portable kind (`web_search`, `web_fetch`, `code_execution`, `file_search`,
      `image_generation`, `mcp`, `tool_search`, `shell`) or a vendor tool's name (then the
      call has no portable kind); `name` overrides the call's name (default: `kind`).
    - `input`: what the call was given (`{"query": ...}`); `id`: the vendor's call id.
    - The result: `sources` it found (`Source`, URL or `(url, title)`), `result` (its text,
      e.g. code output; or a whole `ServerToolResult`, whose `call_id` defaults to the
      call's), `is_error`.
    - `text`: the answer after the result; `citations`: what it cites (`Citation` or the
      URL of one of the sources; `True` cites every source).
    - `usage`: token counts; its `server_tools` gets one call of the kind unless it
      counts it already. `container`: the vendor's code-execution container.

    The stream shows the call and the result as `block_start`/`block_end`, the text, and
    one `citation` event per citation; it ends as `faux_server_message(...)` (same
    arguments).
    """
    return faux_message(
        faux_server_message(
            kind,
            input,
            name=name,
            id=id,
            sources=sources,
            result=result,
            is_error=is_error,
            text=text,
            citations=citations,
            usage=usage,
            container=container,
        )
    )


def faux_web_search(
    query: str,
    sources: Sequence[SourceLike],
    text: str,
    *,
    cite: bool = True,
    id: str | None = None,
    usage: Usage | None = None,
) -> FauxTurn:
    """A web search for `query` finding `sources`, then `text` citing every source (none
    with `cite=False`): `faux_server_tool("web_search", {"query": query}, ...)`."""
    return faux_server_tool(
        "web_search",
        {"query": query},
        id=id,
        sources=sources,
        text=text,
        citations=cite,
        usage=usage,
    )


def _assistant(
    blocks: Sequence[Any],
    usage: Usage | None,
    container: Mapping[str, Any] | None,
    stop_reason: StopReason,
) -> AssistantMessage:
    return AssistantMessage.model_validate(
        {
            "api": API,
            "provider": "faux",
            "model": "faux",
            "content": list(blocks),
            "usage": usage or Usage(),
            "container": dict(container) if container else None,
            "stop_reason": stop_reason,
        }
    )


def _source(source: SourceLike) -> Source:
    if isinstance(source, Source):
        return source
    if isinstance(source, str):
        return Source(url=source)
    if isinstance(source, tuple) and len(source) == 2:
        return Source(url=source[0], title=source[1])
    raise TypeError(f"a source is a Source, a URL or (url, title), not {source!r}")


def _citations(citations: Sequence[CitationLike] | bool, sources: list[Source]) -> list[Citation]:
    if citations is True:
        return [Citation(url=s.url, title=s.title) for s in sources if s.url]
    if citations is False:
        return []
    titles = {s.url: s.title for s in sources if s.url}
    out = []
    for c in citations:
        if isinstance(c, Citation):
            out.append(c)
        elif isinstance(c, str):
            out.append(Citation(url=c, title=titles.get(c)))
        else:
            raise TypeError(f"a citation is a Citation or a URL, not {c!r}")
    return out
