"""Typed reads of untrusted vendor JSON.

A translator reads each field it uses through these, so a value of the wrong JSON type (an
object where a string belongs, a float for an index, `true` for a count) ends the stream
`protocol` with a message naming the event and field, instead of an `AttributeError` deep in
the assembler or a message that no longer validates.

    delta = required_field(obj, "delta", dict, "content_block_delta")
    text = optional_field(delta, "text", str, "content_block_delta.delta")

`kind` is matched exactly (`bool` is not an `int`); `float` also accepts an integer.
"""

from __future__ import annotations

from typing import Any, TypeVar

from .._errors import ProtocolError

__all__ = ["as_object", "optional_field", "required_field"]

T = TypeVar("T")

_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _NAMES.get(type(value), type(value).__name__)


def _matches(value: Any, kind: type[Any]) -> bool:
    t = type(value)
    return t is kind or (kind is float and t is int)


def as_object(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is a JSON object, else a protocol error naming `where`."""
    if type(value) is dict:
        return value
    raise ProtocolError(f"{where}: expected an object, got {_json_type(value)}")


def optional_field(obj: dict[str, Any], key: str, kind: type[T], where: str) -> T | None:
    """`obj[key]` if it has type `kind`; None if missing or null; else a protocol error."""
    value = obj.get(key)
    if value is None or _matches(value, kind):
        return value
    raise ProtocolError(
        f"{where}.{key}: expected {_NAMES.get(kind, kind.__name__)}, got {_json_type(value)}"
    )


def required_field(obj: dict[str, Any], key: str, kind: type[T], where: str) -> T:
    """`obj[key]`, which must be present and of type `kind`; else a protocol error."""
    value = obj.get(key)
    if _matches(value, kind):
        return value  # type: ignore[return-value]
    got = "missing" if key not in obj else f"got {_json_type(value)}"
    raise ProtocolError(f"{where}.{key}: expected {_NAMES.get(kind, kind.__name__)}, {got}")
