"""Gemini's streamed tool-call arguments: `partialArgs`, a JSON path and a value each,
written back as the JSON text of the arguments object so a call streams like any other."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from json.encoder import encode_basestring as _quote  # a JSON string literal, raw UTF-8
from typing import Any, TypeVar

from stream_core.provider import Assembler, ProtocolError, optional_field, shape

__all__ = ["PIECE", "ArgsWriter", "parse_path"]

T = TypeVar("T")


# Every field a piece may carry, read in one call (or within its call's read).
PIECE_WHERE = "chunk.candidates[0].content.parts[].functionCall.partialArgs[]"
PIECE = shape(PIECE_WHERE, jsonPath=str, willContinue=bool, stringValue=str)

_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[['\"]((?:[^'\"\\]|\\.)*)['\"]\]")


def parse_path(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise ProtocolError(f"partialArgs: jsonPath {path!r} does not start at $")
    tokens: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if m is None:
            raise ProtocolError(f"partialArgs: unreadable jsonPath {path!r}")
        name, index, quoted = m.groups()
        tokens.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = m.end()
    if not tokens:
        raise ProtocolError("partialArgs: jsonPath $ names no argument")
    return tokens


class ArgsWriter:
    """Writes streamed `partialArgs` (a path and a value each) as the JSON text of the
    arguments object, in order, so the call streams like any other: containers are opened
    and closed as the paths move on, a string in pieces stays open until its last piece."""

    __slots__ = ("open_string", "path", "raw_path", "stack", "started")

    def __init__(self) -> None:
        self.started = False
        self.raw_path: str | None = None
        self.path: list[str | int] = []
        # Open containers: [path token, child count, closing bracket]; the root is stack[0].
        self.stack: list[list[Any]] = [[None, 0, "}"]]
        self.open_string: list[str | int] | None = None

    def add(
        self,
        asm: Assembler,
        key: Hashable,
        piece: dict[str, Any],
        raw_path: str | None,
        more: bool | None,
        value: str | None,
    ) -> None:
        """Write one piece, its path and string fields already read with `PIECE` (a number
        or a boolean, rarer, is read here)."""
        raw_path = raw_path or ""
        if raw_path != self.raw_path:  # a string in pieces repeats its path
            self.raw_path, self.path = raw_path, parse_path(raw_path)
        path = self.path
        string = "stringValue" in piece
        if self.open_string is path and string:
            # The common case: one more piece of the string being written.
            fragment = _quote(value or "")
            if more:
                fragment = fragment[1:-1]
            else:
                fragment = fragment[1:]
                self.open_string = None
            asm.tool_call(key, fragment)
            return
        out: list[str] = []
        if not self.started:
            out.append("{")
            self.started = True
        if self.open_string is not None:
            out.append('"')
            self.open_string = None
        self._descend(path, out)
        if string:
            text = _quote(value or "")
            if more:
                out.append(text[:-1])
                self.open_string = path
            else:
                out.append(text)
        elif "numberValue" in piece:
            number = optional_field(piece, "numberValue", float, PIECE_WHERE)
            out.append(json.dumps(number, allow_nan=False))
        elif "boolValue" in piece:
            out.append(json.dumps(optional_field(piece, "boolValue", bool, PIECE_WHERE)))
        else:
            out.append("null")  # nullValue, or a value kind we do not know
        asm.tool_call(key, "".join(out))

    def _descend(self, path: list[str | int], out: list[str]) -> None:
        """Close containers that `path` has left, open the ones it enters, and write the
        separator and key before its value."""
        stack = self.stack
        parents = path[:-1]
        common = 0
        while common < len(parents) and common + 1 < len(stack):
            if stack[common + 1][0] != parents[common]:
                break
            common += 1
        while len(stack) > common + 1:
            out.append(stack.pop()[2])
        for depth in range(common, len(path)):
            token = path[depth]
            parent = stack[-1]
            if parent[1]:
                out.append(",")
            parent[1] += 1
            if isinstance(token, str):
                out.append(_quote(token) + ":")
            if depth < len(path) - 1:
                array = isinstance(path[depth + 1], int)
                out.append("[" if array else "{")
                stack.append([token, 0, "]" if array else "}"])

    def close(self, asm: Assembler, key: Hashable) -> None:
        out = ['"'] if self.open_string is not None else []
        if not self.started:
            out.append("{")
            self.started = True
        self.open_string = None
        while self.stack:
            out.append(self.stack.pop()[2])
        asm.tool_call(key, "".join(out))
