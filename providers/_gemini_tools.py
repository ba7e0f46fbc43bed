"""Gemini's built-in tools as `ServerTool` kinds ask for them, and the media types a
`FileContent` may have in a Gemini request (`WireAPI.server_tools`, `WireAPI.file_types`)."""

from __future__ import annotations

from typing import Any

from stream_core import ServerTool
from stream_core.provider import refuse_unsaid_options

from ._gemini_parts import API

__all__ = ["FILE_TYPES", "SERVER_TOOLS"]


def _plain(key: str) -> Any:
    def build(tool: ServerTool) -> dict[str, Any]:
        refuse_unsaid_options(tool, (), f"{API}'s {key} tool")
        return {key: dict(tool.options)}  # Gemini nests a tool's fields inside its key

    return build


def _file_search(tool: ServerTool) -> dict[str, Any]:
    refuse_unsaid_options(tool, (), f"{API}'s file_search tool")
    names = tool.options.get("file_search_store_names", tool.options.get("fileSearchStoreNames"))
    if not names:
        raise ValueError(
            "ServerTool(kind='file_search') for google-generative-ai needs "
            "options={'file_search_store_names': ['fileSearchStores/...']}"
        )
    return {"file_search": dict(tool.options)}


SERVER_TOOLS = {
    "web_search": _plain("google_search"),
    "web_fetch": _plain("url_context"),
    "code_execution": _plain("code_execution"),
    "file_search": _file_search,
}
"""Portable kind -> Gemini tool object (`WireAPI.server_tools`); options go inside."""

FILE_TYPES = frozenset(
    # Documents (a PDF read with vision, the text types as text), images, audio, video.
    """application/pdf text/plain text/html text/css text/csv text/xml text/rtf text/md
    text/javascript application/x-javascript text/x-python application/x-python
    image/png image/jpeg image/webp image/heic image/heif
    audio/wav audio/mp3 audio/aiff audio/aac audio/ogg audio/flac
    video/mp4 video/mpeg video/mov video/avi video/x-flv video/mpg video/webm video/wmv
    video/3gpp""".split()
)
"""Media types Google's docs list for `inlineData` / `fileData` input."""
