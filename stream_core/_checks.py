"""Value checks shared by the call's checks (`_wire`), the options (`_options`) and the
model (`_models`): an API key, a header, a base URL, a tool name, an image.

Each returns None when the value is fine, else a reason that never quotes a secret (a key
is described by what is wrong with it and where, not shown). Pure and cheap: they run in
`stream()`, before any I/O (CONTRACT 1).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = [
    "SECRET_HEADERS",
    "TOOL_NAME",
    "base_url_problem",
    "clip",
    "header_problem",
    "image_problem",
    "key_problem",
    "placeholder_problem",
    "setting_in_url",
    "tool_name_problem",
]

SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
    }
)
"""Request headers whose values are credentials: hidden in reprs, redacted from errors."""

# RFC 9110 token characters: what a header name may hold.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A header value: visible ASCII, spaces and tabs (no CR, LF, NUL or other controls).
_BAD_VALUE = re.compile(r"[^\t\x20-\x7e]")
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The tool names every vendor takes (OpenAI's and Anthropic's rule; Gemini and Bedrock
take a subset of the rest, but these all pass everywhere)."""
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# One DNS label: what a setting that becomes part of a host (an Azure resource, an AWS
# region, a Vertex location) may be. Anything else could move the host.
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
# One path segment (a Vertex project, `example.com:my-project` included): no `/`, `?`,
# `#`, `%` or `..` that would move the request elsewhere on the host.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PLACEHOLDER_HOSTS = frozenset({"resource.openai.azure.com"})
"""Hosts of catalog base-URL templates whose placeholder was never filled (Azure's
`RESOURCE`); a `{...}` in a host is one too."""
_CHAR_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}


def _describe(ch: str) -> str:
    return _CHAR_NAMES.get(ch) or f"the character U+{ord(ch):04X}"


def key_problem(key: str) -> str | None:
    """An API key is visible ASCII without spaces: anything else is a mistake (a newline
    read from a file, a pasted quote) that no vendor would accept."""
    for i, ch in enumerate(key):
        if not ("\x21" <= ch <= "\x7e"):
            where = "at the end" if i == len(key) - 1 else f"at position {i} of {len(key)}"
            hint = " (read from a file? strip it)" if ch in "\r\n" and not key[i:].strip() else ""
            return f"contains {_describe(ch)} {where}{hint}; the key is not shown"
    return None


def header_problem(name: str, value: str, *, secret: bool) -> str | None:
    """A header name is an HTTP token; a value has no CR, LF or other control character
    (it would split the request) and is ASCII (what the client can encode)."""
    if not _TOKEN.fullmatch(name):
        bad = next((c for c in name if not _TOKEN.fullmatch(c)), "")
        what = f"contains {_describe(bad)}" if bad else "is empty"
        return f"header name {name!r} {what}: not a valid HTTP header name"
    found = _BAD_VALUE.search(value)
    if found is not None:
        shown = "" if secret else f" {value[:40]!r}"
        return (
            f"header {name!r}: its value{shown} contains {_describe(found.group())} at "
            f"position {found.start()} (only visible ASCII, spaces and tabs are allowed)"
        )
    return None


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with "..." when longer: the one way an error or a
    repr shows a value of any size."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def setting_in_url(value: object, setting: str, *, part: str = "host") -> str:
    """`value`, a setting that a provider puts into a request URL's host (`part="host"`: one
    DNS label, e.g. an AWS region) or path (`part="path"`: one segment, e.g. a Vertex
    project), stripped; anything else raises `ValueError` naming `setting`, so a value can
    never move the request, and the credential it carries, to another host or path."""
    text = value.strip() if isinstance(value, str) else value
    pattern = _LABEL if part == "host" else _SEGMENT
    if isinstance(text, str) and pattern.fullmatch(text) and ".." not in text:
        return text
    what = (
        "one DNS label (letters, digits and inner hyphens)"
        if part == "host"
        else "one URL path segment (letters, digits, '.', '_', ':' and '-')"
    )
    shown = (
        repr(text[:60]) + ("..." if len(text) > 60 else "")
        if isinstance(text, str)
        else (f"a {type(text).__name__}")
    )
    raise ValueError(f"{setting}: {shown} is not a plain name: it must be {what}")


def placeholder_problem(url: str) -> str | None:
    """A request URL whose host is still a catalog template's placeholder (nobody's host):
    the reason, else None. The pipeline's last check before a credential is attached."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None  # not a URL at all: the transport refuses it
    if host in PLACEHOLDER_HOSTS or "{" in host or "}" in host or "%7b" in host:
        return f"its host {host!r} is a template's placeholder, not a configured endpoint"
    return None


def base_url_problem(url: str) -> str | None:
    """A base URL is an http(s) URL with a host (a template's `{host}` counts as one)."""
    bad = re.search(r"[\x00-\x20\x7f]", url)
    if bad is not None:
        return f"{url[:80]!r} contains {_describe(bad.group())} at position {bad.start()}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return f"{url[:80]!r} is not a URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        return f"{url[:80]!r} is not an http:// or https:// URL"
    if not parts.hostname:
        return f"{url[:80]!r} has no host"
    return None


def tool_name_problem(name: str) -> str | None:
    if TOOL_NAME.fullmatch(name):
        return None
    why = "longer than 64 characters" if len(name) > 64 else "holds other characters"
    return (
        f"{name[:80]!r} is {why}; vendors take names matching ^[a-zA-Z0-9_-]{{1,64}}$ "
        "(letters, digits, '_' and '-')"
    )


def image_problem(data: str, mime_type: str) -> tuple[str, str] | None:
    """(field, reason) when an image block cannot be sent: a MIME type that is not an
    image's, or data that is not base64."""
    media = mime_type.strip().lower()
    kind, _, sub = media.partition("/")
    if kind != "image" or not sub or not re.fullmatch(r"[a-z0-9.+-]+", sub):
        return "mime_type", f"{mime_type[:60]!r} is not an image MIME type (e.g. image/png)"
    if data.startswith("data:"):
        return "data", "a data: URL; pass the base64 part only (and its type as mime_type)"
    if not data:
        return "data", "empty"
    # Standard base64, padded; line breaks (base64.encodebytes) are allowed.
    body = data.replace("\r", "").replace("\n", "") if "\n" in data else data
    if len(body) % 4 or not _BASE64.fullmatch(body):
        return "data", "not base64 (the image's bytes, base64-encoded)"
    return None
