"""The one reader of untrusted vendor JSON.

A translator reads each field it uses through these, so a value of the wrong JSON type (an
object where a string belongs, a float for an index, `true` for a count) ends the stream
`protocol` with a message naming the event and field, instead of an `AttributeError` deep in
the assembler or a message that no longer validates.

    delta = required_field(obj, "delta", dict, "content_block_delta")
    text = optional_field(delta, "text", str, "content_block_delta.delta")

Where an event is read many times a second, a `shape` reads all the fields a translator
uses from one object in one call, with the same rules and the same messages:

    DELTA = shape("chunk.choices[0].delta", content=(str, list), refusal=str)
    content, refusal = DELTA(delta)

A shape is a plain function written once from its table (the type checks inline, the
message built only on a mismatch), so it costs one Python call per object however many
fields it reads: what a translator would cost with the checks written out by hand.

`kind` is matched exactly (`bool` is not an `int`); `float` also accepts an integer.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from .._errors import ProtocolError

__all__ = [
    "ANY",
    "First",
    "Inner",
    "as_object",
    "optional_field",
    "required_field",
    "shape",
]

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
    _mismatch(obj, key, kind, where)


def required_field(obj: dict[str, Any], key: str, kind: type[T], where: str) -> T:
    """`obj[key]`, which must be present and of type `kind`; else a protocol error."""
    value = obj.get(key)
    if _matches(value, kind):
        return value  # type: ignore[return-value]
    _mismatch(obj, key, kind, where)


class First:
    """A field `shape` reads as an array whose first element, if any, is read with `reader`
    (another shape): the array, then that element's fields, each None when the array is
    empty. With `keep=False` the array itself is not returned, only the element's fields."""

    __slots__ = ("keep", "reader")

    def __init__(self, reader: Reader, *, keep: bool = True) -> None:
        if reader not in _SHAPES:
            raise ValueError("First: give it a shape")
        self.reader = reader
        self.keep = keep


class Inner:
    """A field `shape` reads as an object with `reader` (another shape) and returns only its
    fields, not the object (a bare shape as a kind returns the object first)."""

    __slots__ = ("reader",)

    def __init__(self, reader: Reader) -> None:
        if reader not in _SHAPES:
            raise ValueError("Inner: give it a shape")
        self.reader = reader


class _AnyType:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _AnyType()
"""A field `shape` returns as it is, of any JSON type (the translator looks at it)."""

Reader = Callable[..., tuple[Any, ...]]
Kind = type[Any] | tuple[type[Any], ...] | First | Inner | Reader | _AnyType

# Every shape's declaration, by its function: what a nested shape is written from.
_SHAPES: dict[Reader, tuple[str, dict[str, Kind]]] = {}


def _expected(kind: type[Any] | tuple[type[Any], ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_NAMES.get(k, k.__name__) for k in kinds)


def _mismatch(
    obj: dict[str, Any], key: str, kind: type[Any] | tuple[type[Any], ...], where: str
) -> NoReturn:
    """Raise the protocol error for `obj[key]` not being of `kind` (or missing): the one
    message of every read here."""
    value = obj.get(key)
    got = "missing" if key not in obj else f"got {_json_type(value)}"
    raise ProtocolError(f"{where}.{key}: expected {_expected(kind)}, {got}")


def shape(where: str, /, **fields: Kind) -> Reader:
    """A function reading `fields` from one vendor object: `read(obj, where=where)` returns
    their values in the order given, each None when absent or null, and raises
    `ProtocolError` naming `where` and the field on a wrong type (or `where` itself when
    `obj` is not an object).

    A kind is a type, a tuple of types (any of them), `ANY`, another shape (an object read
    in the same call: its value, then its fields' values, all None when it is absent;
    `Inner(shape)` for its fields alone), or `First(shape)` (an array, then the fields of
    its first element). One call reads a whole event however deep its fields sit; a nested
    field's errors are named from the outer `where` (`chunk.choices[0].delta.content`). The
    function is written on its first call, so declaring shapes costs nothing at import.
    """
    if not fields:
        raise ValueError("shape: name at least one field")
    for key, kind in fields.items():
        if not key.isidentifier():
            raise ValueError(f"shape: {key!r} is not a plain name; read it with optional_field")
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not (
            kind is ANY
            or isinstance(kind, (First, Inner))
            or kind in _SHAPES
            or all(k in _TYPE_NAMES for k in kinds)
        ):
            raise ValueError(f"shape: {key} has kind {kind!r}, not a JSON type or a shape")
    names: dict[str, Any] = {"_write": _write}
    read = types.FunctionType(_first_call.__code__, names, f"read_{where}", (where,))
    names["_self"] = read
    _SHAPES[read] = (where, fields)
    return read


def _first_call(obj: dict[str, Any], where: str) -> tuple[Any, ...]:
    """The body of every shape until its first call: write the reader, become it, read."""
    self = _self  # type: ignore[name-defined]  # noqa: F821 - the shape's own globals
    self.__code__ = _write(self)
    return self(obj, where)  # type: ignore[no-any-return]


def _write(read: Reader) -> types.CodeType:
    where, fields = _SHAPES[read]
    names: dict[str, Any] = read.__globals__
    names.update(_mismatch=_mismatch, as_object=as_object)
    lines = [f"def read(obj, where={where!r}):", "    if type(obj) is not dict:"]
    lines.append("        as_object(obj, where)")
    values = _emit(lines, names, "obj", "where", fields, "    ")
    lines.append(f"    return {', '.join(values)}{',' if len(values) == 1 else ''}")
    scope: dict[str, Any] = {}
    # The source is built here from field names (checked identifiers, repr'd), the six JSON
    # types and generated variable names only.
    exec(compile("\n".join(lines), f"<shape {where}>", "exec"), names, scope)  # noqa: S102
    code: types.CodeType = scope["read"].__code__
    return code


def _emit(
    lines: list[str], names: dict[str, Any], obj: str, where: str, fields: dict[str, Kind], pad: str
) -> list[str]:
    """Write the reads of `fields` from the object in variable `obj`; return the variables
    holding the values, in order."""
    values: list[str] = []
    for key, kind in fields.items():
        value = f"v{len(names)}"
        names[value] = None  # reserves the number
        lines.append(f"{pad}{value} = {obj}.get({key!r})")
        nested: tuple[str, dict[str, Kind]] | None = None
        first = isinstance(kind, First)
        keep = not isinstance(kind, Inner) and (not isinstance(kind, First) or kind.keep)
        if isinstance(kind, First):
            nested, kind = _SHAPES[kind.reader], list
        elif isinstance(kind, Inner):
            nested, kind = _SHAPES[kind.reader], dict
        elif kind in _SHAPES:
            nested, kind = _SHAPES[kind], dict
        if keep:
            values.append(value)
        if kind is ANY:
            continue
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and int not in kinds:
            kinds = (*kinds, int)
        label = f"K{value}"
        names[label] = kind
        # `type(v)` is the cheapest test in CPython (a specialized call); once per value.
        if len(kinds) == 1:
            test = f"type({value}) is not {_TYPE_NAMES[kinds[0]]}"  # type: ignore[index]
        else:
            lines.append(f"{pad}c = type({value})")
            test = " and ".join(f"c is not {_TYPE_NAMES[k]}" for k in kinds)
        lines.append(f"{pad}if {value} is not None and {test}:")
        lines.append(f"{pad}    _mismatch({obj}, {key!r}, {label}, {where})")
        if nested is None:
            continue
        # A nested object is named from its parent's name, built only to raise.
        _, inner_fields = nested
        place = f"{where} + {f'.{key}[0]' if first else f'.{key}'!r}"
        inner: list[str] = []
        target = value
        if first:
            target = f"e{value}"
            inner.append(f"{pad}    {target} = {value}[0]")
            inner.append(f"{pad}    if type({target}) is not dict:")
            inner.append(f"{pad}        as_object({target}, {place})")
        inner_values = _emit(inner, names, target, place, inner_fields, pad + "    ")
        lines.append(f"{pad}if {value}:")
        lines.extend(inner)
        lines.append(f"{pad}else:")  # the fewest steps for all of them None
        names[f"N{len(inner_values)}"] = (None,) * len(inner_values)
        lines.append(f"{pad}    {', '.join(inner_values)}, = N{len(inner_values)}")
        values.extend(inner_values)
    return values


_TYPE_NAMES = {str: "str", int: "int", float: "float", bool: "bool", dict: "dict", list: "list"}
