"""Tools and options of a Responses request, read back (the inverse of the builder's
`tools`, `tool_choice`, `parallel_tool_calls`, `max_output_tokens`, `temperature`,
`top_p`, `reasoning`, `text.format` and `prompt_cache_key`). What has no place goes to
`unmodeled` under its dotted path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from stream_core import Model, ServerTool, StreamOptions, Tool, ToolChoice
from stream_core.provider import (
    RequestFieldError,
    StreamFailure,
    optional_field,
    output_spec,
    required_field,
    server_tool_objects,
)

from ._responses_builtin_out import SERVER_TOOLS
from ._responses_inbound_parts import field_error
from .openai_responses import API, LONG_CACHE_RETENTION, REASONING_SUMMARY, WIRE

__all__ = ["options", "tools"]

_EFFORTS: dict[str, str | None] = {
    "none": None,
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}
"""`reasoning.effort` -> `StreamOptions.reasoning` (`none`: no reasoning asked for;
`xhigh`, which stream-core has no level for, as `high`, noted in `unmodeled`)."""

_FIELDS = {
    "max_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "session_id": "prompt_cache_key",
    "reasoning": "reasoning.effort",
    "output_schema": "text.format.schema",
}
"""`StreamOptions` field -> the request field it comes from (an invalid value is named by
the request's field)."""


# --- tools ---------------------------------------------------------------------------------


def _probe_kinds() -> dict[str, str]:
    """Tool object type -> the portable kind whose builder makes it (`SERVER_TOOLS`)."""
    out: dict[str, str] = {}
    for kind, build in SERVER_TOOLS.items():
        try:
            made = build(ServerTool(kind=kind, options={"vector_store_ids": ["probe"]}))
        except ValueError:
            continue
        out.setdefault(str(made.get("type")), kind)
    return out


_TOOL_KINDS = _probe_kinds()

_INPUT_SCHEMA = {"type": "string", "description": "The tool's whole input, as text."}
_SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "description": "argv"},
        "workdir": {"type": "string"},
        "timeout_ms": {"type": "integer"},
    },
    "required": ["command"],
}


def tools(tools: Any) -> list[Tool | ServerTool]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestFieldError("tools", "a list of tools")
    out: list[Tool | ServerTool] = []
    for j, raw in enumerate(tools):
        where = f"tools[{j}]"
        if not isinstance(raw, dict):
            raise RequestFieldError(where, "a tool: a JSON object")
        if raw.get("type") == "namespace":
            out.extend(_namespace(raw, where))
            continue
        try:
            out.append(_tool(raw, where))
        except StreamFailure as e:
            raise field_error(e.error, where) from None
        except ValidationError as e:
            raise RequestFieldError(where, str(e).splitlines()[-1].strip()) from None
    return out


NAMESPACE_JOIN = "__"
"""A `namespace` tool's member goes to other vendors as one function named
`<namespace>__<name>` (no vendor has namespaces; `__` is a legal name character in all)."""


def namespace_names(tools: Any) -> dict[str, tuple[str, str]]:
    """Each flattened member of the request's `namespace` tools -> (namespace, name)."""
    out: dict[str, tuple[str, str]] = {}
    for raw in tools if isinstance(tools, list) else ():
        if isinstance(raw, dict) and raw.get("type") == "namespace":
            space = raw.get("name")
            for member in raw.get("tools") or ():
                name = member.get("name") if isinstance(member, dict) else None
                if isinstance(space, str) and isinstance(name, str):
                    out[f"{space}{NAMESPACE_JOIN}{name}"] = (space, name)
    return out


def _namespace(raw: dict[str, Any], where: str) -> list[Tool | ServerTool]:
    """A `namespace` tool's members as function tools named `<namespace>__<name>`, its
    description before each one's."""
    space = required_field(raw, "name", str, where)
    members = raw.get("tools")
    if not isinstance(members, list):
        raise RequestFieldError(f"{where}.tools", "a list of the namespace's tools")
    about = optional_field(raw, "description", str, where) or ""
    out: list[Tool | ServerTool] = []
    for k, member in enumerate(members):
        inner = f"{where}.tools[{k}]"
        if not isinstance(member, dict) or member.get("type") not in ("function", "custom"):
            raise RequestFieldError(inner, "a function or custom tool")
        try:
            tool = _tool(member, inner)
        except StreamFailure as e:
            raise field_error(e.error, inner) from None
        except ValidationError as e:
            raise RequestFieldError(inner, str(e).splitlines()[-1].strip()) from None
        if not isinstance(tool, Tool):
            raise RequestFieldError(inner, "a function or custom tool")
        description = (
            f"[{space}] {about}\n{tool.description}".strip() if about else tool.description
        )
        out.append(tool.model_copy(update={"name": f"{space}{NAMESPACE_JOIN}{tool.name}",
                                           "description": description}))  # fmt: skip
    return out


def _tool(raw: dict[str, Any], where: str) -> Tool | ServerTool:
    ttype = raw.get("type")
    if ttype == "function":
        parameters = optional_field(raw, "parameters", dict, where)
        tool = Tool(
            name=required_field(raw, "name", str, where),
            description=optional_field(raw, "description", str, where) or "",
        )
        if parameters is not None:
            tool.parameters = parameters
        return tool
    if ttype == "custom":
        # A freeform tool: another vendor's model calls it with its input as one string.
        description = optional_field(raw, "description", str, where) or ""
        fmt = optional_field(raw, "format", dict, where) or {}
        text = dict(_INPUT_SCHEMA)
        if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
            syntax = fmt.get("syntax") or "grammar"
            text["description"] += f" It follows this {syntax} grammar:\n{fmt['definition']}"
        parameters = {
            "type": "object",
            "properties": {"input": text},
            "required": ["input"],
            "additionalProperties": False,
        }
        name = required_field(raw, "name", str, where)
        return Tool(name=name, description=description, parameters=parameters)
    if ttype == "local_shell":
        return Tool(
            name="local_shell",
            description="Run a command in the user's shell (its argv in `command`).",
            parameters=_SHELL_PARAMETERS,
        )
    if not isinstance(ttype, str):
        raise RequestFieldError(f"{where}.type", "a string naming the tool's type")
    kind = _TOOL_KINDS.get(ttype)
    found = _portable(kind, raw) if kind is not None else None
    if found is not None and server_tool_objects([found], SERVER_TOOLS) == [raw]:
        return found
    return ServerTool.native(API, dict(raw))


def _portable(kind: str, raw: dict[str, Any]) -> ServerTool | None:
    """The portable `ServerTool` a hosted tool object may be (checked by building it back)."""
    fields = {k: v for k, v in raw.items() if k != "type"}
    args: dict[str, Any] = {}
    filters = fields.get("filters")
    if isinstance(filters, dict) and list(filters) == ["allowed_domains"]:
        args["allowed_domains"] = filters["allowed_domains"]
        del fields["filters"]
    location = fields.get("user_location")
    if isinstance(location, dict) and location.get("type") == "approximate":
        args["user_location"] = {k: v for k, v in location.items() if k != "type"}
        del fields["user_location"]
    if kind == "file_search" and "max_num_results" in fields:
        args["max_uses"] = fields.pop("max_num_results")
    if kind == "code_execution" and fields.get("container") == {"type": "auto"}:
        del fields["container"]
    try:
        return ServerTool(kind=kind, options=fields, **args)
    except (ValidationError, ValueError):
        return None


# --- options -------------------------------------------------------------------------------


def options(body: Mapping[str, Any], unmodeled: dict[str, Any]) -> StreamOptions:
    kw: dict[str, Any] = {}
    for ours, theirs in (("max_tokens", "max_output_tokens"), ("temperature", "temperature")):
        if body.get(theirs) is not None:
            kw[ours] = body[theirs]
    if body.get("top_p") is not None:
        kw["top_p"] = body["top_p"]
    if body.get("tool_choice") is not None:
        kw["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("parallel_tool_calls") is not None:
        kw["parallel_tool_calls"] = body["parallel_tool_calls"]
    _reasoning(body.get("reasoning"), kw, unmodeled)
    _text(body.get("text"), kw, unmodeled)
    key = body.get("prompt_cache_key")
    if key is not None:
        kw["session_id"] = key
        if body.get("prompt_cache_retention") == LONG_CACHE_RETENTION:
            kw["cache_retention"] = "long"
    try:
        return StreamOptions(**kw)
    except (TypeError, ValueError) as e:
        text = str(e)
        name, _, why = text.removeprefix("StreamOptions.").partition(": ")
        raise RequestFieldError(_FIELDS.get(name, name), why or text) from None


def _tool_choice(choice: Any) -> ToolChoice:
    if choice in ("auto", "none", "required"):
        return choice  # type: ignore[no-any-return]
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        name = choice.get("name")
        if isinstance(name, str) and name:
            return {"tool": name}
    raise RequestFieldError(
        "tool_choice",
        'one of "auto", "none", "required" or {"type": "function", "name": ...}; '
        "a hosted tool or allowed_tools cannot be carried to every model",
    )


def _reasoning(reasoning: Any, kw: dict[str, Any], unmodeled: dict[str, Any]) -> None:
    if reasoning is None:
        return
    if not isinstance(reasoning, dict):
        raise RequestFieldError("reasoning", "an object")
    for key, value in reasoning.items():
        if key == "effort":
            if value is None:
                continue
            if not isinstance(value, str) or value not in _EFFORTS:
                raise RequestFieldError("reasoning.effort", f"one of {', '.join(_EFFORTS)}")
            kw["reasoning"] = _EFFORTS[value]
            if _EFFORTS[value] not in (value, None):
                unmodeled["reasoning.effort"] = value
        elif key in ("summary", "generate_summary"):
            if value not in (None, REASONING_SUMMARY):
                unmodeled[f"reasoning.{key}"] = value
        else:
            unmodeled[f"reasoning.{key}"] = value


def _text(text: Any, kw: dict[str, Any], unmodeled: dict[str, Any]) -> None:
    if text is None:
        return
    if not isinstance(text, dict):
        raise RequestFieldError("text", "an object")
    for key, value in text.items():
        if key == "format":
            if value is not None:
                schema = _format(value)
                if schema is not None:
                    kw["output_schema"] = schema
        elif value is not None:
            unmodeled[f"text.{key}"] = value


def _format(fmt: Any) -> dict[str, Any] | None:
    """`text.format` as the output schema (None: plain text). The schema's `title` and
    `description` say the format's name and description, as the builder reads them."""
    if not isinstance(fmt, dict):
        raise RequestFieldError("text.format", "an object")
    ftype = fmt.get("type")
    if ftype == "text":
        return None
    if ftype == "json_object":
        return {"type": "object"}
    if ftype != "json_schema":
        raise RequestFieldError("text.format.type", "one of text, json_schema, json_object")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise RequestFieldError("text.format.schema", "a JSON Schema object")
    name, description = fmt.get("name"), fmt.get("description")
    schema = dict(schema)
    if isinstance(name, str) and name and _spec_name(schema) != name:
        schema["title"] = name
    if isinstance(description, str) and description and "description" not in schema:
        schema["description"] = description
    return schema


def _spec_name(schema: dict[str, Any]) -> str:
    """The name the builder gives `schema`'s format (`OutputSpec.name`)."""
    spec = output_spec(WIRE, _NAMING_MODEL, StreamOptions(output_schema=schema))
    return spec.name if spec is not None else ""


_NAMING_MODEL = Model(id="naming", api=API, provider="openai", base_url="http://localhost")
"""Any model of this API: the one `output_spec` reads to name a schema."""
