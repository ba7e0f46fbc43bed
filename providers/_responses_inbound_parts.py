"""Content parts and call outputs of a Responses request, read back (the inverse of
`_responses_input`'s parts and `_responses_builtin_out.output_item`): `input_text`,
`input_image`, `input_file` parts; a function call's output (an error said by the
`TOOL_ERROR_PREFIX` the builder puts before it); each built-in call's output item."""

from __future__ import annotations

import json
import mimetypes
import re
from typing import Any

from stream_core import (
    ApprovalResponse,
    FileContent,
    ImageContent,
    StreamError,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from stream_core.provider import (
    TOOL_ERROR_PREFIX,
    RequestFieldError,
    as_object,
    optional_field,
    required_field,
)

__all__ = ["approval_answer", "field_error", "parts", "tool_result"]

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def field_error(error: StreamError, where: str) -> RequestFieldError:
    """A provider reader's complaint (`input[3].call_id: expected a string, got null`) as
    the error naming that field."""
    path, sep, why = error.message.partition(": ")
    if sep and path.startswith(where):
        return RequestFieldError(path, why)
    return RequestFieldError(where, error.message)


def parts(content: Any, where: str) -> list[Any]:
    """A user message's (or a call output's) parts as blocks."""
    if not isinstance(content, list):
        raise RequestFieldError(where, "a string or a list of content parts")
    out: list[Any] = []
    for j, raw in enumerate(content):
        at = f"{where}[{j}]"
        part = as_object(raw, at)
        ptype = part.get("type")
        if ptype in ("input_text", "output_text", "text"):
            out.append(TextContent(text=required_field(part, "text", str, at)))
        elif ptype == "input_image":
            out.append(_image(part, at))
        elif ptype == "input_file":
            out.append(_file(part, at))
        else:
            raise RequestFieldError(f"{at}.type", "one of input_text, input_image, input_file")
    return out


def _image(part: dict[str, Any], where: str) -> ImageContent | FileContent:
    url = optional_field(part, "image_url", str, where)
    file_id = optional_field(part, "file_id", str, where)
    if url:
        found = _DATA_URL.fullmatch(url)
        if found is not None:
            return ImageContent(mime_type=found.group(1), data=found.group(2))
        return FileContent(url=url, mime_type=mimetypes.guess_type(url)[0] or "image/png")
    if file_id:
        return FileContent(file_id=file_id, mime_type="image/png")
    raise RequestFieldError(f"{where}.image_url", "an image needs image_url or file_id")


def _file(part: dict[str, Any], where: str) -> FileContent:
    data = optional_field(part, "file_data", str, where)
    name = optional_field(part, "filename", str, where)
    file_id = optional_field(part, "file_id", str, where)
    url = optional_field(part, "file_url", str, where)
    if data:
        found = _DATA_URL.fullmatch(data)
        if found is None:
            raise RequestFieldError(f"{where}.file_data", "a data URL (data:<type>;base64,...)")
        return FileContent(data=found.group(2), mime_type=found.group(1), name=name)
    if file_id:
        return FileContent(file_id=file_id, name=name)
    if url:
        return FileContent(url=url, mime_type=mimetypes.guess_type(url)[0], name=name)
    raise RequestFieldError(where, "a file needs file_data, file_id or file_url")


def approval_answer(item: dict[str, Any], where: str) -> ApprovalResponse:
    return ApprovalResponse(
        request_id=required_field(item, "approval_request_id", str, where),
        approve=required_field(item, "approve", bool, where),
        reason=optional_field(item, "reason", str, where),
    )


def tool_result(
    item: dict[str, Any], itype: str, call: ToolCall | None, where: str
) -> ToolResultMessage:
    """An output item as the result of the call it answers (`call`: None when no earlier
    call has its id; the result then has no tool name, and the history's repair drops it)."""
    call_id = required_field(item, "call_id", str, where)
    result = ToolResultMessage(tool_call_id=call_id, tool_name=call.name if call else "")
    output = item.get("output")
    if itype == "shell_call_output":
        chunks = optional_field(item, "output", list, where) or []
        texts: list[str] = []
        for raw in chunks:
            chunk = as_object(raw, f"{where}.output[]")
            texts += [str(chunk[k]) for k in ("stdout", "stderr") if chunk.get(k)]
            outcome = chunk.get("outcome")
            if isinstance(outcome, dict) and type(outcome.get("exit_code")) is int:
                result.is_error = result.is_error or outcome["exit_code"] != 0
        result.content = [TextContent(text="\n".join(texts))]
        result.details = {"output": chunks}
    elif itype == "tool_search_output":
        tools = optional_field(item, "tools", list, where) or []
        result.content = [TextContent(text=json.dumps(tools, ensure_ascii=False))]
        result.details = {"tools": tools}
    elif itype == "computer_call_output":
        shot = as_object(output, f"{where}.output")
        if isinstance(shot.get("image_url"), str):
            result.content = [_image(shot, f"{where}.output")]
        elif isinstance(shot.get("file_id"), str):
            result.content = [FileContent(file_id=shot["file_id"], mime_type="image/png")]
        acknowledged = item.get("acknowledged_safety_checks")
        if isinstance(acknowledged, list) and acknowledged:
            result.details = {"acknowledged_safety_checks": acknowledged}
    else:
        result.content, result.is_error = _output(output, f"{where}.output")
        if itype == "apply_patch_call_output" and item.get("status") == "failed":
            result.is_error = True
    return result


def _output(output: Any, where: str) -> tuple[list[Any], bool]:
    """A call's output (a string, or parts), and whether it says the call failed."""
    if isinstance(output, str):
        if output.startswith(TOOL_ERROR_PREFIX):
            return [TextContent(text=output[len(TOOL_ERROR_PREFIX) :])], True
        return [TextContent(text=output)], False
    if output is None:
        return [], False
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        # Codex's older failure shape: {"content": "...", "success": false}.
        return [TextContent(text=output["content"])], output.get("success") is False
    blocks = parts(output, where)
    first = blocks[0] if blocks else None
    if isinstance(first, TextContent) and first.text == TOOL_ERROR_PREFIX:
        return blocks[1:], True
    return blocks, False
