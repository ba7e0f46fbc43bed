"""Structured output: what a call asked for, and reading the answer.

`StreamOptions.output_schema` (a JSON Schema dict or a pydantic model class) becomes one
`OutputSpec` per call. Each API asks for it its own native way (`WireAPI.output_mode` says
whether a model has one); where a model has none, the pipeline adds one forced tool whose
arguments are the answer, and the assembler streams that call's arguments as the message's
text, so the history holds a plain JSON answer that continues on any vendor. Either way the
final message's text is the JSON, read once at the end into `AssistantMessage.output`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json, to_json

from ._checks import clip
from ._decoding.json_values import is_storable_json
from ._types import Tool

__all__ = [
    "MAX_OUTPUT_CHARS",
    "OUTPUT_TOOL_NAME",
    "OutputMode",
    "OutputSpec",
    "closed_schema",
    "make_output_spec",
    "read_output",
]

OutputMode = Literal["native", "json_object", "tool"]
"""How a structured answer was asked for: the vendor's JSON Schema mode (`native`), its
plain JSON mode with the schema in the system prompt (`json_object`), or a forced tool."""

OUTPUT_TOOL_NAME = "final_answer"
"""The forced tool's default name (a schema's own title is used when it has a usable one)."""

_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_WRAP_KEY = "answer"


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """A call's structured-output request, as every provider reads it."""

    schema: dict[str, Any]
    """The JSON Schema of the answer (the class's own, when a class was given)."""
    name: str
    """A vendor-safe name for it (`[a-zA-Z0-9_-]`, at most 64 characters)."""
    description: str | None
    model_class: type[BaseModel] | None
    mode: OutputMode
    strict: bool
    """The schema meets OpenAI's strict-mode rules (every object closed, every property
    required), so strict decoding can be asked for."""
    wrapped: bool = False
    """Tool mode with a root that is not an object: the tool's arguments are
    `{"answer": <value>}` and the value is unwrapped when read."""

    def tool(self) -> Tool:
        """The forced tool of the fallback (tool mode)."""
        parameters = self.schema
        if self.wrapped:
            parameters = {
                "type": "object",
                "properties": {_WRAP_KEY: self.schema},
                "required": [_WRAP_KEY],
                "additionalProperties": False,
            }
        return Tool(
            name=self.name,
            description=self.description or "Give the final answer in this shape.",
            parameters=parameters,
        )

    def instruction(self) -> str:
        """The system-prompt line for APIs whose JSON mode takes no schema."""
        import json

        return (
            "Answer with one JSON value only, no other text, matching this JSON Schema: "
            + json.dumps(self.schema, separators=(",", ":"))
        )


def _class_schema(cls: type[BaseModel]) -> dict[str, Any]:
    """A fresh copy of a class's JSON Schema. The pipeline and the request builder both ask
    for the call's spec, and pydantic rebuilds the schema on every `model_json_schema()`
    (milliseconds for a nested class), so it is built once per class; each call gets its own
    copy because a payload hook may edit the payload it lands in."""
    loaded: dict[str, Any] = from_json(_class_schema_json(cls))
    return loaded


@functools.lru_cache(maxsize=64)
def _class_schema_json(cls: type[BaseModel]) -> bytes:
    return to_json(cls.model_json_schema())


def make_output_spec(schema: dict[str, Any] | type[BaseModel], mode: OutputMode) -> OutputSpec:
    model_class: type[BaseModel] | None = None
    if isinstance(schema, dict):
        body = schema
        title = schema.get("title")
        description = schema.get("description")
    else:
        model_class = schema
        body = _class_schema(schema)
        title = schema.__name__
        description = (schema.__doc__ or "").strip() or None
    name = _NAME.sub("_", title)[:64].strip("_") if isinstance(title, str) else ""
    return OutputSpec(
        schema=body,
        name=name or OUTPUT_TOOL_NAME,
        description=description if isinstance(description, str) else None,
        model_class=model_class,
        mode=mode,
        strict=is_strict_schema(body),
        wrapped=mode == "tool" and body.get("type") != "object",
    )


def is_strict_schema(schema: Any) -> bool:
    """True when every object in `schema` lists all its properties as required and closes
    itself with `additionalProperties: false` (OpenAI's strict mode refuses anything else)."""
    if isinstance(schema, list):
        return all(is_strict_schema(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if not isinstance(properties, dict) or set(schema.get("required") or ()) != set(properties):
            return False
    return all(
        is_strict_schema(v) for k, v in schema.items() if k not in ("required", "enum", "const")
    )


MAX_OUTPUT_CHARS = 4 * 1024 * 1024
"""A structured answer longer than this is not read (it ends `invalid_output`, its text
kept): no model's output limit comes near it, and validating more would cost memory and
time out of proportion."""
MAX_LISTED_PROBLEMS = 5
"""An `invalid_output` message lists at most this many problems, then how many in all."""
_MAX_PROBLEM_CHARS = 200
_MAX_MESSAGE_CHARS = 500
_SAMPLE_ITEMS = 10
"""How much of each list of a failed answer is re-validated to name its first problems
when it has too many to list cheaply (pydantic builds every error's details at once)."""
_CHEAP_ERRORS = 50


def read_output(text: str, spec: OutputSpec) -> tuple[Any, str | None]:
    """(the answer, None), or (None, why it is not one, in at most a few hundred
    characters). Never raises, whatever the answer or the class's own validators do; its
    cost is bounded by `MAX_OUTPUT_CHARS`. CPU work: the pipeline runs it off the event
    loop for a long answer."""
    if len(text) > MAX_OUTPUT_CHARS:
        return None, (
            f"the answer is {len(text):,} characters, over the {MAX_OUTPUT_CHARS:,} a "
            "structured answer is read at; its text is kept"
        )
    if not text.strip():
        return None, "the model gave no JSON answer (empty text)"
    try:
        value = from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        return None, clip(f"the answer is not valid JSON ({exc})", _MAX_MESSAGE_CHARS)
    except RecursionError:
        return None, "the answer is nested too deeply to read"
    if not is_storable_json(value):
        return None, (
            "the answer is nested too deeply to store, or holds a number beyond a float's "
            "range (such as 1e400, which would be saved as null)"
        )
    if spec.wrapped:
        if not isinstance(value, dict) or _WRAP_KEY not in value:
            return None, f"the forced tool's arguments have no {_WRAP_KEY!r}"
        value = value[_WRAP_KEY]
    cls = spec.model_class
    if cls is None:
        return value, None
    try:
        return cls.model_validate(value), None
    except ValidationError as exc:
        return None, f"the answer does not match {cls.__name__}: " + _problems(cls, value, exc)
    except RecursionError:
        return None, f"the answer is nested too deeply to validate as {cls.__name__}"
    except Exception as exc:  # a validator of the caller's class raised something else
        return None, clip(
            f"validating the answer as {cls.__name__} raised {type(exc).__name__}: {exc}",
            _MAX_MESSAGE_CHARS,
        )


def _problems(cls: type[BaseModel], value: Any, exc: ValidationError) -> str:
    """The first few problems and how many there are, without building every error's
    details (a list of a million wrong items would cost seconds and gigabytes)."""
    count = exc.error_count()
    errors: list[Any] = []
    sampled = False
    if count <= _CHEAP_ERRORS:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
    else:
        try:
            cls.model_validate(_sample(value))
        except ValidationError as small:
            if small.error_count() <= _CHEAP_ERRORS:
                sampled = True
                errors = small.errors(include_url=False, include_input=False, include_context=False)
        except Exception:
            pass
    shown = [
        clip(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}", _MAX_PROBLEM_CHARS)
        for e in errors[:MAX_LISTED_PROBLEMS]
    ]
    text = "; ".join(shown) if shown else "(too many to list)"
    if sampled and shown:
        text = "in a sample of the answer, " + text
    if count > len(shown):
        text += f"; {count:,} problems in all"
    return text


def _sample(value: Any, depth: int = 0) -> Any:
    """A copy of `value` with every list cut to its first `_SAMPLE_ITEMS` items and every
    string to 1,000 characters, so the first problems of a huge answer can be named cheaply
    (a cut can add a problem of its own, e.g. a list now too short: it is named a sample)."""
    if depth > 64:
        return None
    if type(value) is list:
        return [_sample(x, depth + 1) for x in value[:_SAMPLE_ITEMS]]
    if type(value) is dict:
        return {k: _sample(v, depth + 1) for k, v in value.items()}
    if type(value) is str and len(value) > 1000:
        return value[:1000]
    return value


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


def closed_schema(schema: Any) -> Any:
    """A copy of `schema` with `additionalProperties: false` on every object that leaves it
    out: vendors whose structured output demands closed objects (Anthropic, on its own API
    and on Bedrock) reject a pydantic class's schema otherwise. Other keywords are left for
    the vendor to judge (its 400 names the keyword)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _MAPS:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = {name: closed_schema(sub) for name, sub in value.items()}
    for key in _LISTS:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [closed_schema(sub) for sub in value]
    for key in _ONE:
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = closed_schema(value)
        elif key == "items" and isinstance(value, list):
            out[key] = [closed_schema(sub) for sub in value]
    kind = out.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if (is_object or "properties" in out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out
