"""The table of content-block kinds: the one place that says which blocks exist, which
messages may hold them and which events stream them. The content unions, the assembler's
`start_block`, the contract grammar, the call checks and the faux model's scripts read it,
so a new kind is one class and one row (with its `as_text()`, which the handoff and the
token estimates use).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AfterValidator, Discriminator, Tag, ValidationInfo

from ._blocks import (
    ApprovalRequest,
    ApprovalResponse,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    VendorContent,
)
from ._content import (
    _KEEP,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
)

__all__ = ["BLOCK_KINDS", "AssistantContent", "BlockKind", "UserContent", "kind_of"]

Family = Literal["text", "thinking", "toolcall", "block"]


@dataclass(frozen=True, slots=True)
class BlockKind:
    """One row of the table: the block's `type`, its class, the event family that streams
    it (`text_*`, `thinking_*`, `toolcall_*`, or the general `block_*`), the roles whose
    content may hold it, and whether it is only ever a vendor's own record (the handoff
    sends every assistant block of the `block_*` family back only to the API that made it,
    as text to any other; this flag describes the kind, nothing branches on it)."""

    type: str
    cls: builtins.type[Any]
    family: Family
    roles: frozenset[str]
    vendor_bound: bool = False


_A, _U = frozenset({"assistant"}), frozenset({"user", "tool_result"})
_ALL = _A | _U

BLOCK_KINDS: dict[str, BlockKind] = {
    k.type: k
    for k in (
        BlockKind("text", TextContent, "text", _ALL),
        BlockKind("thinking", ThinkingContent, "thinking", _A),
        BlockKind("tool_call", ToolCall, "toolcall", _A),
        BlockKind("image", ImageContent, "block", _U),
        BlockKind("file", FileContent, "block", _ALL),
        BlockKind("server_tool_call", ServerToolCall, "block", _A, vendor_bound=True),
        BlockKind("server_tool_result", ServerToolResult, "block", _A, vendor_bound=True),
        BlockKind("approval_request", ApprovalRequest, "block", _A, vendor_bound=True),
        BlockKind("approval_response", ApprovalResponse, "block", frozenset({"user"})),
        BlockKind("vendor", VendorContent, "block", _ALL, vendor_bound=True),
    )
}
"""Every typed block kind, by its `type`."""

_BY_CLASS: dict[type[Any], BlockKind] = {k.cls: k for k in BLOCK_KINDS.values()}


def kind_of(block: object) -> BlockKind | None:
    """The table row of a block (None: an `UnknownContent` or something else)."""
    return _BY_CLASS.get(type(block))


def _tagger(known: tuple[str, ...]) -> Any:
    def tag(value: Any) -> str | None:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if not isinstance(kind, str):
            return None  # no tag: pydantic names the missing discriminator
        return kind if kind in known else "unknown"

    return Discriminator(
        tag,
        custom_error_type="missing_block_type",
        custom_error_message=f"a content block needs a string `type` ({', '.join(known)})",
    )


def _known_block(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, UnknownContent) and not (info.context or {}).get(_KEEP):
        raise ValueError(
            f"unknown content type {value.type!r} (load_messages keeps such blocks as they are)"
        )
    return value


def _union(role: str) -> Any:
    rows = [k for k in BLOCK_KINDS.values() if role in k.roles]
    members = tuple(Annotated[k.cls, Tag(k.type)] for k in rows)
    members += (Annotated[UnknownContent, Tag("unknown")],)
    return Annotated[
        Union[members],  # noqa: UP007 (built from the table)
        _tagger(tuple(k.type for k in rows)),
        AfterValidator(_known_block),
    ]


if TYPE_CHECKING:
    AssistantContent = (
        TextContent
        | ThinkingContent
        | ToolCall
        | FileContent
        | ServerToolCall
        | ServerToolResult
        | ApprovalRequest
        | VendorContent
        | UnknownContent
    )
    UserContent = (
        TextContent | ImageContent | FileContent | ApprovalResponse | VendorContent | UnknownContent
    )
else:
    AssistantContent = _union("assistant")
    UserContent = _union("user")
