"""Gemini's two schema dialects, from the JSON Schema a caller gives.

Tool parameters go out as Gemini's OpenAPI-style `Schema` (`clean_schema`), which has no
`$ref`: references are inlined. Inlining is bounded: a reference already being inlined
is followed at most `MAX_RECURSION` more times (a recursive model: deeper levels become a
bare object saying so), and a tool whose inlined schema would pass `MAX_NODES` schema
nodes (a fan-out of references) raises at `stream()` naming it, instead of a request of
hundreds of megabytes. A structured answer's schema goes out as JSON Schema
(`json_schema`), which keeps `$ref`/`$defs` (Gemini resolves them), so it needs no bound.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_NODES", "MAX_RECURSION", "SchemaTooLarge", "clean_schema", "json_schema"]

MAX_RECURSION = 2
"""How many more times a `$ref` already being inlined is inlined inside itself."""
MAX_NODES = 5_000
"""The most schema nodes one tool's inlined parameters may have."""


class SchemaTooLarge(ValueError):
    """Inlining a schema's references would pass `MAX_NODES`."""


# JSON-Schema keywords Gemini's `Schema` accepts; any other one fails the whole request.
_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "default",
        "example",
        "anyOf",
        "propertyOrdering",
    }
)
_FORMATS = {
    "string": {"enum", "date-time"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}


def clean_schema(schema: Any) -> Any:
    """A JSON Schema rewritten into the subset Gemini takes: `$ref`s inlined (a dangling
    one, or a recursion past `MAX_RECURSION`, becomes a bare object), `const` as a
    one-value enum, a `type` list or a null branch of `anyOf`/`oneOf` as `nullable`,
    unknown keywords and formats dropped. Raises `SchemaTooLarge` past `MAX_NODES`."""
    if not isinstance(schema, dict):
        return schema
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _Inliner(defs).clean(schema, ())


class _Inliner:
    __slots__ = ("defs", "nodes")

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.nodes = 0

    def clean(self, schema: Any, stack: tuple[str, ...]) -> Any:
        if not isinstance(schema, dict):
            return schema
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SchemaTooLarge(
                f"its $refs, inlined for Gemini (whose tool schemas have no $ref), make more "
                f"than {MAX_NODES:,} schema nodes; share less (fewer references to large "
                "definitions) or describe the parameters more simply"
            )
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            target = self.defs.get(name)
            if target is None:
                return {"type": "object"}
            if stack.count(name) > MAX_RECURSION:
                return {"type": "object", "description": f"(a {name}, nested further)"}
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.clean(merged, (*stack, name))
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: self.clean(v, stack) for name, v in value.items()}
            elif key == "items":
                item = value[0] if isinstance(value, list) and value else value
                out[key] = self.clean(item, stack)
            elif key in ("anyOf", "oneOf") and isinstance(value, list):
                branches = [
                    b for b in value if not (isinstance(b, dict) and b.get("type") == "null")
                ]
                if len(branches) < len(value):
                    out["nullable"] = True
                cleaned = [self.clean(b, stack) for b in branches]
                if len(cleaned) == 1 and isinstance(cleaned[0], dict):
                    out.update(cleaned[0])
                elif cleaned:
                    out["anyOf"] = cleaned
            elif key == "allOf" and isinstance(value, list):
                for b in value:
                    cleaned_one = self.clean(b, stack)
                    if isinstance(cleaned_one, dict):
                        out.update(cleaned_one)
            elif key == "const":
                out["enum"] = [value]
            elif key == "type" and isinstance(value, list):
                kinds = [t for t in value if t != "null"]
                if len(kinds) < len(value):
                    out["nullable"] = True
                if kinds:
                    out["type"] = kinds[0]
            elif key in _SCHEMA_KEYS:
                out[key] = value
        enum = out.get("enum")
        if enum is not None and not (
            isinstance(enum, list) and all(isinstance(e, str) for e in enum)
        ):
            del out["enum"]  # Gemini takes string enums only
        fmt = out.get("format")
        if fmt is not None and fmt not in _FORMATS.get(str(out.get("type")), ()):
            del out["format"]
        required, props = out.get("required"), out.get("properties")
        if isinstance(required, list):
            kept = [r for r in required if isinstance(props, dict) and r in props]
            if kept:
                out["required"] = kept
            else:
                del out["required"]
        return out


# The JSON-Schema keywords `responseJsonSchema` documents (others are not honoured).
_JSON_SCHEMA_KEYS = frozenset(
    {
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    }
)
_SUBSCHEMA_MAPS = frozenset({"properties", "$defs"})
_SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "prefixItems"})


def json_schema(schema: Any) -> Any:
    """A JSON Schema trimmed to the keywords `generationConfig.responseJsonSchema` takes.

    Unlike `clean_schema` (the OpenAPI-style `Schema` of tool parameters) it stays JSON
    Schema: `$ref`/`$defs` are kept (Gemini resolves them), and a null type or branch stays
    a null type or branch (`Schema`'s `nullable` means nothing here). `allOf` branches are
    merged, `const` becomes a one-value enum, `definitions` becomes `$defs`, an enum of
    anything but strings and numbers is dropped, and a `$ref` keeps only its `$` siblings
    (the documented rule)."""
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    branches = node.pop("allOf", None)
    if isinstance(branches, list):
        for branch in branches:
            if isinstance(branch, dict):
                node = {**branch, **node}
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    legacy = node.pop("definitions", None)
    if isinstance(legacy, dict):
        node["$defs"] = {**legacy, **(node.get("$defs") or {})}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _JSON_SCHEMA_KEYS:
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: json_schema(v) for name, v in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [json_schema(v) for v in value]
        elif key in ("items", "additionalProperties"):
            out[key] = json_schema(value)
        elif key == "$ref" and isinstance(value, str):
            out[key] = value.replace("#/definitions/", "#/$defs/", 1)
        else:
            out[key] = value
    if "$ref" in out:
        return {k: v for k, v in out.items() if k.startswith("$")}
    enum = out.get("enum")
    if enum is not None and not (
        isinstance(enum, list) and all(type(e) in (str, int, float) for e in enum)
    ):
        del out["enum"]
    return out
