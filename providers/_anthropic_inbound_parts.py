"""The pieces of a Messages API request `_anthropic_inbound` reads without state: typed
field access naming the field's JSON path, image and document sources, server tool
objects and thinking efforts. Each reads the tables of `_anthropic_blocks` and stream-core's
effort tables, as the request builder writes them."""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Mapping
from typing import Any

from stream_core import THINKING_BUDGETS, FileContent, ImageContent, ServerTool, VendorContent
from stream_core.provider import ADAPTIVE_EFFORTS, RequestFieldError

from ._anthropic_blocks import API, FILE_TYPES, SERVER_TOOLS, TOOL_TYPES

__all__ = [
    "IGNORED",
    "adaptive_effort",
    "document",
    "effort_for",
    "get",
    "image",
    "obj",
    "plain",
    "server_tool",
    "type_name",
]

IGNORED = frozenset({"cache_control"})
"""Keys read nowhere, by design (stream-core places its own cache breakpoints)."""

_SERVER_KINDS = {vendor_type: kind for kind, (vendor_type, _) in TOOL_TYPES.items()}
"""A server tool's type -> the portable kind `_anthropic_blocks` builds it for."""

_COMMON = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
"""`ServerTool`'s common options, which a tool object has under the same names."""

_EFFORT_ALIASES = {"max": "high"}
"""`output_config.effort` values above ours (Opus 4.6's `max`): the nearest effort."""

_IMAGE_TYPES = sorted(t for t in FILE_TYPES if t.startswith("image/"))
_DEFAULT_IMAGE = "image/jpeg"
"""An image by URL or file id whose type its name does not tell."""

_DOCUMENT_KEYS = frozenset({"type", "source", "title", "citations"})
"""What a `document` block may say to be read as a `FileContent` (any other field, as
`context`, keeps it whole as a `VendorContent`)."""

_JSON_TYPES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
}


def type_name(value: Any) -> str:
    """A JSON value's type, for an error (`null`, `string`, `object`, ...)."""
    if value is None:
        return "null"
    return _JSON_TYPES.get(type(value), type(value).__name__).split(" ")[-1]


def get(
    o: Mapping[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    where: str,
    *,
    required: bool = False,
) -> Any:
    """`o[key]` when it is of `kind` (an integer for a number too); absent or null: None,
    or `RequestFieldError(where)` when `required`; any other type raises, named."""
    value = o.get(key)
    if value is None:
        if required:
            raise RequestFieldError(where, "is required")
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if type(value) not in kinds and not (float in kinds and type(value) is int):
        wanted = " or ".join(_JSON_TYPES.get(k, k.__name__) for k in kinds)
        raise RequestFieldError(where, f"expected {wanted}, got {type_name(value)}")
    return value


def obj(value: Any, where: str) -> dict[str, Any]:
    """`value` when it is a JSON object, else `RequestFieldError(where)`."""
    if type(value) is not dict:
        raise RequestFieldError(where, f"expected an object, got {type_name(value)}")
    return value


def plain(block: dict[str, Any]) -> dict[str, Any]:
    """A block as kept verbatim: without `cache_control` (stream-core places its own)."""
    if "cache_control" not in block:
        return block
    return {k: v for k, v in block.items() if k != "cache_control"}


# --- sources ------------------------------------------------------------------------------


def image(block: dict[str, Any], where: str) -> ImageContent | FileContent:
    """An `image` block: base64 data -> `ImageContent`; a URL or a file id -> `FileContent`
    (its type from the URL's name, else JPEG)."""
    at = f"{where}.source"
    source = obj(block.get("source"), at)
    stype = source.get("type")
    if stype == "base64":
        return ImageContent(
            data=get(source, "data", str, f"{at}.data", required=True),
            mime_type=get(source, "media_type", str, f"{at}.media_type", required=True),
        )
    if stype == "url":
        url: str = get(source, "url", str, f"{at}.url", required=True)
        guess = mimetypes.guess_type(url.split("?", 1)[0])[0]
        return FileContent(url=url, mime_type=guess if guess in _IMAGE_TYPES else _DEFAULT_IMAGE)
    if stype == "file":
        file_id = get(source, "file_id", str, f"{at}.file_id", required=True)
        return FileContent(file_id=file_id, mime_type=_DEFAULT_IMAGE)
    raise RequestFieldError(f"{at}.type", f"expected base64, url or file, got {stype!r}")


def document(block: dict[str, Any], where: str) -> FileContent | VendorContent:
    """A `document` block: a PDF or plain text by data, URL (a PDF) or file id ->
    `FileContent` (`title` its name, `citations.enabled` its `citations`); one with a field
    a file has no place for, or custom content, kept whole (`VendorContent`)."""
    said = {k for k, v in block.items() if v is not None} - IGNORED
    source = block.get("source")
    stype = source.get("type") if isinstance(source, dict) else None
    if said - _DOCUMENT_KEYS or stype == "content":
        return VendorContent(api=API, data=plain(block))
    at = f"{where}.source"
    source = obj(source, at)
    cite = get(block, "citations", dict, f"{where}.citations") or {}
    enabled = get(cite, "enabled", bool, f"{where}.citations.enabled")
    named: dict[str, Any] = {
        "name": get(block, "title", str, f"{where}.title"),
        "citations": True if enabled else None,
    }
    if stype == "base64":
        data = get(source, "data", str, f"{at}.data", required=True)
        mime = get(source, "media_type", str, f"{at}.media_type", required=True)
        return FileContent(data=data, mime_type=mime, **named)
    if stype == "text":
        text: str = get(source, "data", str, f"{at}.data", required=True)
        data = base64.b64encode(text.encode("utf-8")).decode()
        return FileContent(data=data, mime_type="text/plain", **named)
    if stype == "url":
        url = get(source, "url", str, f"{at}.url", required=True)
        return FileContent(url=url, mime_type="application/pdf", **named)
    if stype == "file":
        file_id = get(source, "file_id", str, f"{at}.file_id", required=True)
        return FileContent(file_id=file_id, **named)
    raise RequestFieldError(
        f"{at}.type", f"expected base64, text, url, file or content, got {stype!r}"
    )


# --- tools and thinking -------------------------------------------------------------------


def server_tool(tool: dict[str, Any]) -> ServerTool:
    """A server tool object as the `ServerTool` `_anthropic_blocks` builds exactly this
    object from (its common options as such, or all in `options`), else
    `ServerTool.native` holding it."""
    kind = _SERVER_KINDS.get(str(tool.get("type")))
    if kind is None or tool.get("name") != TOOL_TYPES[kind][1]:
        return ServerTool.native(API, tool)
    rest = {k: v for k, v in tool.items() if k not in ("type", "name")}
    common: dict[str, Any] = {k: rest.pop(k) for k in _COMMON if k in rest}
    raw = dict(common)
    location = common.get("user_location")
    if isinstance(location, dict) and location.get("type") == "approximate":
        common["user_location"] = {k: v for k, v in location.items() if k != "type"}
    for attempt in ({**common, "options": rest}, {"options": {**rest, **raw}}):
        try:
            candidate = ServerTool(kind=kind, **attempt)
            built = {**SERVER_TOOLS[kind](candidate), **candidate.options}
        except ValueError:  # pydantic's ValidationError, or an option the tool lacks
            continue
        if built == tool:
            return candidate
    return ServerTool.native(API, tool)


def effort_for(budget: int) -> str:
    """The effort whose default budget (`THINKING_BUDGETS`) is the largest not above
    `budget` (the lowest for a smaller one)."""
    ranked = sorted(THINKING_BUDGETS.items(), key=lambda kv: kv[1])
    effort = ranked[0][0]
    for name, tokens in ranked:
        if tokens <= budget:
            effort = name
    return effort


def adaptive_effort(word: str | None, where: str) -> str:
    """Our effort for Claude's `output_config.effort` under adaptive thinking (the inverse
    of `ADAPTIVE_EFFORTS`, the same word first); `high`, Anthropic's default, without one."""
    if word is None:
        return "high"
    word = _EFFORT_ALIASES.get(word, word)
    if ADAPTIVE_EFFORTS.get(word) == word:
        return word
    found = [ours for ours, theirs in ADAPTIVE_EFFORTS.items() if theirs == word]
    if not found:
        known = sorted(set(ADAPTIVE_EFFORTS.values()) | set(_EFFORT_ALIASES))
        raise RequestFieldError(where, f"expected one of {', '.join(known)}, got {word!r}")
    return found[0]
