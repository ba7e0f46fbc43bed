"""The content blocks added for what vendors run and produce themselves: server-side tool
calls and their results, citations, files, approval requests, and vendor blocks kept
as they were sent. Part of the data model (`_types` re-exports them).

Every block a vendor sends is kept: a typed reading where this module has one, else a
`VendorContent` holding the vendor's JSON. Blocks that carry `raw` go back to the same API
as the vendor sent them; to another API each becomes text (`as_text()`), so a handoff keeps
the sources (URLs, titles, cited text) and sends nothing the new vendor would refuse.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, model_validator

from ._content import Source, _Model, _not_none

__all__ = [
    "SERVER_TOOL_KINDS",
    "ApprovalRequest",
    "ApprovalResponse",
    "FileContent",
    "ServerToolCall",
    "ServerToolResult",
    "VendorContent",
]

SERVER_TOOL_KINDS = (
    "web_search",
    "web_fetch",
    "code_execution",
    "file_search",
    "image_generation",
    "mcp",
    "tool_search",
    "shell",
)
"""The portable kinds of a vendor-run tool (`ServerToolCall.kind`, `ServerTool.kind`)."""

_TEXT_CAP = 2000
"""Characters of a server result's text kept when it is handed to another vendor as text."""


class FileContent(_Model):
    """A file: in a user message or a tool result (a PDF to read, ...), or made by the
    model or a server tool in an assistant message (a generated image, a file a code run
    wrote; `call_id` names the server call that made it). Given as base64 `data`, a `url`,
    or a vendor `file_id` (at least one), with its `mime_type` and `name` when known."""

    type: Literal["file"] = "file"
    data: str | None = Field(default=None, exclude_if=_not_none)
    """Base64-encoded bytes."""
    url: str | None = Field(default=None, exclude_if=_not_none)
    file_id: str | None = Field(default=None, exclude_if=_not_none)
    """The vendor's id for a file uploaded to (or made on) its Files API."""
    mime_type: str | None = Field(default=None, exclude_if=_not_none)
    name: str | None = Field(default=None, exclude_if=_not_none)
    call_id: str | None = Field(default=None, exclude_if=_not_none)
    """In an assistant message: the `ServerToolCall.id` that produced it."""
    citations: bool | None = Field(default=None, exclude_if=_not_none)
    """For a document sent to a vendor that cites documents (Anthropic): ask for
    citations into it."""

    @model_validator(mode="after")
    def _has_bytes_or_reference(self) -> FileContent:
        if self.data is None and self.url is None and self.file_id is None:
            raise ValueError("a FileContent needs `data` (base64), `url` or `file_id`")
        return self

    def as_text(self) -> str:
        what = self.name or self.file_id or self.url or "file"
        kind = f", {self.mime_type}" if self.mime_type else ""
        size = f", {len(self.data) * 3 // 4} bytes" if self.data else ""
        return f"[file: {what}{kind}{size}]"


class ServerToolCall(_Model):
    """A tool call the vendor ran itself (web search, code execution, an MCP call, ...):
    the vendor's `id`, the tool's `name`, its portable `kind` (`SERVER_TOOL_KINDS`, None
    when there is none), the `input` it was given and, for a call made from inside another
    one (Anthropic programmatic calls), the `caller`. `raw` is the vendor's block verbatim,
    sent back unchanged to the same API. Never run by the harness."""

    type: Literal["server_tool_call"] = "server_tool_call"
    id: str = ""
    name: str = ""
    kind: str | None = None
    input: Any = Field(default_factory=dict)
    caller: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)
    raw: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)
    partial_json: str = Field(default="", exclude=True, repr=False)
    """The raw input text received so far, while the call streams (not persisted)."""

    def as_text(self) -> str:
        shown = self.input if not isinstance(self.input, dict) or self.input else ""
        args = json.dumps(shown, ensure_ascii=False, default=str)[:_TEXT_CAP] if shown else ""
        return f"[server tool call {self.name or self.kind or 'tool'}{': ' + args if args else ''}]"


class ServerToolResult(_Model):
    """What a vendor-run tool returned, read: `sources` it found (search results), `text`
    (code output, a fetched page, an MCP answer, an error code), `exit_code` of a code run,
    `is_error`. `call_id` is the `ServerToolCall.id` it answers (which may be in an earlier
    message). `raw` is the vendor's block verbatim (encrypted content included), sent back
    to the same API; None when the result is a reading of the call's own item (OpenAI
    Responses), which goes back through the call."""

    type: Literal["server_tool_result"] = "server_tool_result"
    call_id: str = ""
    name: str = ""
    kind: str | None = None
    is_error: bool = False
    text: str = ""
    sources: list[Source] = Field(default_factory=list)
    exit_code: int | None = Field(default=None, exclude_if=_not_none)
    raw: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)

    def as_text(self) -> str:
        head = f"[server tool result {self.name or self.kind or 'tool'}"
        head += " (error)]" if self.is_error else "]"
        lines = [head]
        lines += [f"- {s.label()}" for s in self.sources if s.label()]
        if self.text:
            lines.append(self.text[:_TEXT_CAP])
        if self.exit_code is not None:
            lines.append(f"exit code {self.exit_code}")
        return "\n".join(lines)


class ApprovalRequest(_Model):
    """The vendor asks the user to approve a call it would run (an MCP tool): answer it
    with an `ApprovalResponse` of the same `id` in the next user message."""

    type: Literal["approval_request"] = "approval_request"
    id: str = ""
    name: str = ""
    server: str | None = Field(default=None, exclude_if=_not_none)
    """The server that would run it (MCP `server_label`)."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw: dict[str, Any] | None = Field(default=None, exclude_if=_not_none)

    def as_text(self) -> str:
        args = json.dumps(self.arguments, ensure_ascii=False, default=str)[:_TEXT_CAP]
        return f"[approval asked for {self.name} on {self.server or 'a server'}: {args}]"


class ApprovalResponse(_Model):
    """The user's answer to an `ApprovalRequest` (in a user message)."""

    type: Literal["approval_response"] = "approval_response"
    request_id: str
    approve: bool
    reason: str | None = Field(default=None, exclude_if=_not_none)

    def as_text(self) -> str:
        return f"[{'approved' if self.approve else 'declined'}: {self.request_id}]"


class VendorContent(_Model):
    """A vendor block this version has no typed reading for, kept as the vendor sent it
    (`data`, its JSON, verbatim) with the `api` it came from: it goes back unchanged to that
    API and becomes text for any other."""

    type: Literal["vendor"] = "vendor"
    api: str
    data: dict[str, Any]

    @property
    def vendor_type(self) -> str:
        return str(self.data.get("type", ""))

    def as_text(self) -> str:
        body = json.dumps(self.data, ensure_ascii=False, default=str)
        return f"[{self.vendor_type or 'vendor'} block: {body[:_TEXT_CAP]}]"
