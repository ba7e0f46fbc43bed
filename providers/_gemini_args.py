"""Gemini's streamed tool-call arguments: `partialArgs`, a JSON path and a value each,
written back as the JSON text of the arguments object so a call streams like any other."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from json.encoder import encode_basestring as _quote  # a JSON string literal, raw UTF-8
from typing import Any, TypeVar

from stream_core.provider import Assembler, ProtocolError, optional_field

__all__ = ["ArgsWriter", "parse_path"]

T = TypeVar("T")


def _field(obj: dict[str, Any], key: str, kind: type[T], where: str) -> T | None:
    """`optional_field`, with the common case (absent, or exactly the type) inline: it runs
    for every field of every chunk."""
    value = obj.get(key)
    if value is None or value.__class__ is kind:
        return value
    return optional_field(obj, key, kind, where)


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

    def add(self, asm: Assembler, key: Hashable, piece: dict[str, Any], where: str) -> None:
        raw_path = piece.get("jsonPath")
        if raw_path is not None and raw_path.__class__ is not str:
            optional_field(piece, "jsonPath", str, where)
        raw_path = raw_path or ""
        if raw_path != self.raw_path:  # a string in pieces repeats its path
            self.raw_path, self.path = raw_path, parse_path(raw_path)
        path = self.path
        more = piece.get("willContinue")
        if more is not None and more.__class__ is not bool:
            optional_field(piece, "willContinue", bool, where)
        more = more or False
        value = piece.get("stringValue", piece)  # `piece` itself: the key is absent
        if self.open_string is path and value is not piece:
            # The common case: one more piece of the string being written.
            if value is not None and value.__class__ is not str:
                optional_field(piece, "stringValue", str, where)
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
        if "stringValue" in piece:
            text = _quote(_field(piece, "stringValue", str, where) or "")
            if more:
                out.append(text[:-1])
                self.open_string = path
            else:
                out.append(text)
        elif "numberValue" in piece:
            number = _field(piece, "numberValue", float, where)
            out.append(json.dumps(number, allow_nan=False))
        elif "boolValue" in piece:
            out.append(json.dumps(_field(piece, "boolValue", bool, where)))
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
