"""Closing a JSON Schema's objects for vendors whose structured output demands it.

Anthropic's structured outputs (on its own API and on Bedrock's Converse) reject an object
schema unless it says `additionalProperties: false`; a pydantic class's schema never does.
`closed(schema)` returns a copy in which every object that leaves `additionalProperties` out
is closed. Other values are left for the vendor to judge (its 400 names the keyword).
"""

from __future__ import annotations

from typing import Any

__all__ = ["closed"]

# Keywords whose value is a map of name -> schema, a list of schemas, or one schema.
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
)


def closed(schema: Any) -> Any:
    """A copy of `schema` with `additionalProperties: false` on every object lacking it."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _MAPS:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = {name: closed(sub) for name, sub in value.items()}
    for key in _LISTS:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [closed(sub) for sub in value]
    for key in _ONE:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = closed(value)
        elif key == "items" and isinstance(value, list):
            out[key] = [closed(sub) for sub in value]
    kind = out.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if (is_object or "properties" in out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out
