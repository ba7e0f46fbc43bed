"""JSON helpers: fast strict parse, partial parse on demand, final tool-argument parse."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic_core import from_json

__all__ = ["ArgumentsError", "is_storable_json", "parse_arguments", "parse_partial_json"]


class ArgumentsError(ValueError):
    """Final tool-call arguments that are not one JSON object."""


def parse_partial_json(text: str) -> Any:
    """Parse a JSON prefix as far as it goes (`{"a": "x` gives `{"a": "x"}`); `{}` when
    nothing usable has arrived yet. Costs O(len(text)): call it when you need it, not per
    delta."""
    if not text.strip():
        return {}
    try:
        return from_json(text, allow_partial="trailing-strings", allow_inf_nan=False)
    except ValueError:
        return {}


def parse_arguments(text: str) -> dict[str, Any]:
    """The final arguments of a tool call.

    Empty text means a call without arguments (`{}`). A buffer holding the same object
    twice (`{...}{...}`, a proxy re-sending the whole arguments) gives that object; two
    different objects, a non-object or invalid JSON raise `ArgumentsError`: never guess a
    merge.
    """
    if not text.strip():
        return {}
    try:
        value = from_json(text, allow_inf_nan=False)  # NaN/Infinity are not JSON
    except ValueError as exc:
        value = _single_repeated_object(text, exc)
    if not isinstance(value, dict):
        raise ArgumentsError(f"tool arguments are {type(value).__name__}, not a JSON object")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _single_repeated_object(text: str, original: ValueError) -> Any:
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    values: list[Any] = []
    pos, end = 0, len(text)
    try:
        while pos < end:
            while pos < end and text[pos] in " \t\r\n":
                pos += 1
            if pos == end:
                break
            value, pos = decoder.raw_decode(text, pos)
            values.append(value)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        raise ArgumentsError(f"tool arguments are not valid JSON: {original}") from None
    if len(values) > 1 and all(v == values[0] for v in values):
        return values[0]
    raise ArgumentsError(f"tool arguments are not valid JSON: {original}")


MAX_DEPTH = 100
"""Nesting a message can hold and still read back (pydantic's JSON parser stops near 200
levels, and a message adds its own)."""


def is_storable_json(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """True when `value` survives a round trip through a message's JSON: nested at most
    `max_depth` deep, and no float beyond range (`1e400` parses as infinity, which dumps
    as null). One pass, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth > max_depth:
                return False
            children = item.values() if kind is dict else item
            stack.extend((child, depth + 1) for child in children)
        elif kind is float and not math.isfinite(item):
            return False
    return True
