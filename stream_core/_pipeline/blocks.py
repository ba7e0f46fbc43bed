"""The assembler's calls for blocks of the `block_*` kinds (`BLOCK_KINDS`): server tool
calls and results, files, approval requests and vendor blocks, citations on text, and the
message-level facts that come with them (container, server-tool counts). Mixed into
`Assembler`, which owns the open blocks, the event queue and the usage.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from .._blocks import ServerToolCall
from .._decoding.json_values import (
    is_storable_json,
    parse_partial_json,
)
from .._errors import ProtocolError
from .._events import AssistantStreamEvent, BlockDelta, CitationAdded, MessageUpdate
from .._kinds import BLOCK_KINDS
from .._types import AssistantMessage, Citation, TextContent

__all__ = ["BlockMethods"]

_TEXT, _THINKING, _TOOL, _BLOCK = 0, 1, 2, 3
"""The families of `BLOCK_KINDS`, as the assembler numbers them."""


class BlockMethods:
    if TYPE_CHECKING:
        message: AssistantMessage
        out: deque[AssistantStreamEvent]
        _open: dict[Hashable, Any]

        def _start(self, key: Hashable, kind: int, block: Any) -> Any: ...
        def end(self, key: Hashable) -> None: ...
        def _recount(self) -> None: ...

    def start_block(self, key: Hashable, block: Any) -> None:
        """Open a block of a `block_*` kind (a server tool call or result, a file, an
        approval request, a vendor block) under `key`; `end(key)` closes it. A server tool
        call's input may then stream through `block_input`."""
        kind = BLOCK_KINDS.get(getattr(block, "type", None))  # type: ignore[arg-type]
        if kind is None or kind.family != "block" or type(block) is not kind.cls:
            raise TypeError(f"start_block takes a block of a block_* kind, not {block!r}")
        self._start(key, _BLOCK, block)

    def add_block(self, block: Any) -> None:
        """A complete block of a `block_*` kind: started and ended at once."""
        key = ("stream_core.block", len(self.message.content))
        self.start_block(key, block)
        self.end(key)

    def block_input(self, key: Hashable, fragment: str) -> None:
        """Append a fragment of the open server tool call's JSON input (parsed at its end)."""
        if not fragment:
            return
        _need_str(fragment, "a server tool input fragment")
        o = self._open.get(key)
        if o is None or not isinstance(o.block, ServerToolCall):
            raise ProtocolError("server tool input for a block that is not an open call")
        d = o.block.__dict__
        buf = d.pop("partial_json")
        buf += fragment
        d["partial_json"] = buf
        self.out.append(MessageUpdate(self.message, BlockDelta(o.index, fragment)))

    def cite(self, key: Hashable, citation: Citation) -> None:
        """Attach a citation to the text block open under `key` (starting one: a vendor may
        send the citation before its text)."""
        o = self._open.get(key)
        if o is None or o.kind != _TEXT:
            o = self._start(key, _TEXT, TextContent())
        self._attach(o.index, o.block, citation)

    def cite_at(self, index: int, citation: Citation) -> bool:
        """Attach a citation to the text block at `index` of the content (a vendor that
        cites once the text is done); False when there is no text block there."""
        content = self.message.content
        block = content[index] if 0 <= index < len(content) else None
        if not isinstance(block, TextContent):
            return False
        self._attach(index, block, citation)
        return True

    def _attach(self, index: int, block: TextContent, citation: Citation) -> None:
        if block.citations is None:
            block.citations = [citation]
        else:
            block.citations.append(citation)
        self.out.append(MessageUpdate(self.message, CitationAdded(index, citation)))

    def set_container(self, value: object) -> None:
        """The vendor's code-execution container (a JSON object; anything else ignored)."""
        if isinstance(value, dict) and value:
            self.message.container = value

    def set_server_tools(self, counts: Mapping[str, object]) -> None:
        """The vendor's server-tool call counts, by kind (a cumulative snapshot: replaces
        the counts named; zero counts are left out)."""
        tools = dict(self.message.usage.server_tools or {})
        for name, n in counts.items():
            _need_str(name, "a server tool name")
            n = _count(n, f"usage server_tools.{name}")
            if n:
                tools[name] = n
            else:
                tools.pop(name, None)
        self.message.usage.server_tools = tools or None
        self._recount()


def _need_str(value: object, what: str) -> None:
    # The translators read fields through `stream_core._decoding.fields`; this is the net under
    # them, so no vendor value of the wrong type ever reaches a block.
    if type(value) is not str:
        raise ProtocolError(f"{what} is {type(value).__name__}, not a string")


_MAX_COUNT = 10**1000
"""Larger token counts are not believed: sums of them must still print and round-trip
(Python and pydantic refuse integers of more than 4300 digits)."""


def _count(value: object, what: str) -> int:
    if value.__class__ is not int:
        raise ProtocolError(f"{what} is {type(value).__name__}, not an integer")
    if value >= _MAX_COUNT:
        raise ProtocolError(f"{what} is out of range")
    return value if value >= 0 else 0


def _declared_order(block: Any) -> None:
    """Appending in place moves the growing field last in `__dict__`, and pydantic dumps in
    `__dict__` order: put the fields back in declared order, once per block, so a streamed
    message is written exactly as the same message is after a reload."""
    d = block.__dict__
    for name in type(block).model_fields:
        if name in d:
            d[name] = d.pop(name)


def _finish_input(call: ServerToolCall) -> None:
    """A server call's streamed input, parsed once at its end: any JSON value the vendor
    ran it with; of a cut one, what parses of it; when nothing does (`{"q`, junk), the text
    as it came, `{"partial_json": text}` (the vendor ran the call: nothing executes it)."""
    text = call.partial_json
    value: Any = None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, MemoryError):
        try:
            value = parse_partial_json(text)
        except (ValueError, RecursionError, MemoryError):
            value = None
        if value in ({}, [], ""):
            value = None  # nothing of it parses: keep the text
    if value is None or not is_storable_json(value):
        value = {"partial_json": text}
    call.input = value
    call.partial_json = ""
    _declared_order(call)
