"""A context in the Gemini API's shape: `contents` of `user` and `model` turns, function
responses answered in call order in one user turn, images where the model can take them,
thought signatures sent back (or the documented placeholder where a model demands one),
server-tool, file and other kept parts as they came (`_gemini_parts`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_core import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantMessage,
    Context,
    FileContent,
    ImageContent,
    Model,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import IMAGE_OMITTED_TEXT, is_same_model, prepare_messages

from ._gemini_parts import API, RESPONSE_METADATA, SIGNATURE, file_part

__all__ = ["convert_messages"]

# Models that reject a function call without a thought signature in the current turn; a
# call from another model gets Google's documented placeholder instead. Only the first
# call of a model turn is checked (and signed: Gemini signs the first of parallel calls
# only), so the others go as they came, unsigned.
_SIGNATURE_REQUIRED = ("gemini-3",)
_PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"
# Models that take images inside a function response (`functionResponse.parts`); others
# get them in a user turn after the responses.
_NESTED_RESPONSE_IMAGES = ("gemini-3",)


def convert_messages(model: Model, context: Context, api: str) -> list[dict[str, Any]]:
    messages = prepare_messages(context, api=api, provider=model.provider, model_id=model.id)
    vision = "image" in model.input
    nested_images = any(f in model.id for f in _NESTED_RESPONSE_IMAGES)
    out: list[dict[str, Any]] = []
    # Gemini pairs responses with calls by position: one user turn, in call order.
    order: dict[str, int] = {}  # tool-call id -> position in the last model turn
    responses: list[tuple[int, dict[str, Any]]] = []
    images: list[dict[str, Any]] = []  # tool-result images for models that cannot nest them
    for m in messages:
        if isinstance(m, ToolResultMessage):
            at = order.get(m.tool_call_id, len(order))
            responses.append((at, _function_response(m, vision, nested_images, images)))
            continue
        if responses:
            out.append({"role": "user", "parts": _in_call_order(responses)})
            responses = []
        if images:
            out.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})
            images = []
        if isinstance(m, UserMessage):
            content: Sequence[object] = (
                [TextContent(text=m.content)] if isinstance(m.content, str) else m.content
            )
            parts = _user_parts(content, vision=vision)
            if parts:
                out.append({"role": "user", "parts": parts})
        else:
            calls = [b.id for b in m.content if isinstance(b, ToolCall)]
            order = {call_id: i for i, call_id in enumerate(calls)}
            parts = _model_parts(model, m, api)
            if parts:
                out.append({"role": "model", "parts": parts})
    if responses:
        out.append({"role": "user", "parts": _in_call_order(responses)})
    if images:
        out.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})
    # Consecutive turns of one role (function responses, their images, the user's next
    # words) become one turn: roles alternate, responses first.
    merged: list[dict[str, Any]] = []
    for turn in out:
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1]["parts"] += turn["parts"]
        else:
            merged.append(turn)
    return merged


def _in_call_order(responses: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [part for _, part in sorted(responses, key=lambda r: r[0])]


def _user_parts(content: Sequence[object], *, vision: bool) -> list[Any]:
    parts: list[dict[str, Any]] = []
    for b in content:
        if isinstance(b, TextContent):
            if b.text.strip():
                parts.append({"text": b.text})
        elif not isinstance(b, ImageContent):
            part = user_block_part(b)  # a file, a Gemini part kept verbatim
            if part is not None:
                parts.append(part)
            # else: UnknownContent, kept in the history, never sent (no vendor form known)
        elif vision:
            parts.append({"inlineData": {"mimeType": b.mime_type, "data": b.data}})
        else:
            parts.append({"text": IMAGE_OMITTED_TEXT})
    return parts


def _is_image(f: FileContent) -> bool:
    return (f.mime_type or "").startswith("image/")


def _is_image_part(part: dict[str, Any]) -> bool:
    return str(part["inlineData"].get("mimeType", "")).startswith("image/")


def _function_response(
    m: ToolResultMessage, vision: bool, nested: bool, images: list[dict[str, Any]]
) -> dict[str, Any]:
    text = "\n".join(b.text for b in m.content if isinstance(b, TextContent))
    # Images need a model that sees; other files (a PDF, text) go to every model, as
    # they do in a user message.
    pictures = [
        {"inlineData": {"mimeType": b.mime_type, "data": b.data}}
        if isinstance(b, ImageContent)
        else file_part(b)
        for b in m.content
        if (isinstance(b, ImageContent) and vision)
        or (isinstance(b, FileContent) and (vision or not _is_image(b)))
    ]
    if not text:
        seen = "image" if all("inlineData" in p and _is_image_part(p) for p in pictures) else "file"
        text = f"(see attached {seen})" if pictures else "(no output)"
    response: dict[str, Any] = {
        "name": m.tool_name,
        "response": {"error": text} if m.is_error else {"output": text},
    }
    if pictures:
        if nested:
            response["parts"] = pictures
        else:
            images.extend(pictures)
    return {"functionResponse": response}


def _model_parts(model: Model, m: AssistantMessage, api: str) -> list[dict[str, Any]]:
    # `prepare_messages` already turned another model's thinking into text and dropped its
    # signatures; the blocks it keeps for the same API and provider (cited text, server
    # tool parts, files, vendor parts) lose theirs here when another model wrote them.
    same = is_same_model(m, api=api, provider=model.provider, model_id=model.id)
    parts: list[dict[str, Any]] = []
    first_call = True
    for b in m.content:
        if isinstance(b, TextContent):
            # Citations are not sent: Gemini's request has no field for them (its grounding
            # is response metadata only).
            signature = b.text_signature if same else None
            if b.text.strip() or signature:
                part: dict[str, Any] = {"text": b.text}
                if signature:
                    part["thoughtSignature"] = signature
                parts.append(part)
        elif isinstance(b, ThinkingContent):
            if b.redacted or not (b.thinking.strip() or b.signature):
                continue
            part = {"thought": True, "text": b.thinking}
            if b.signature:
                part["thoughtSignature"] = b.signature
            parts.append(part)
        elif isinstance(b, ToolCall):
            part = {"functionCall": {"name": b.name, "args": b.arguments}}
            signature = b.thought_signature
            if signature is None and first_call and _signature_required(model):
                signature = _PLACEHOLDER_SIGNATURE
            first_call = False
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
        else:
            model_block_parts(parts, b, same)
    return parts


def _signature_required(model: Model) -> bool:
    return any(f in model.id for f in _SIGNATURE_REQUIRED)


def _own(part: dict[str, Any], same: bool) -> dict[str, Any] | None:
    """A kept part as sent: verbatim to its own model, without the signature (which only
    that model can verify) to another; None when nothing is left to send."""
    if same or SIGNATURE not in part:
        return part
    rest = {k: v for k, v in part.items() if k != SIGNATURE}
    return rest if rest and rest != {"text": ""} else None


def model_block_parts(parts: list[dict[str, Any]], block: object, same: bool) -> None:
    """Append the model-turn part of a kept block (server tool parts, files, vendor parts)."""
    if isinstance(block, (ServerToolCall, ServerToolResult)):
        raw = block.raw
        if raw is None or any(k in raw for k in RESPONSE_METADATA):
            # Derived from the candidate's grounding / URL-context metadata: response
            # metadata, for which Gemini's request has no field.
            return
        part = _own(raw, same)
    elif isinstance(block, FileContent):
        # A file the model made (an image it generated) goes back as it came, so the
        # model can go on editing it.
        part = file_part(block)
    elif isinstance(block, VendorContent) and block.api == API:
        data = block.data
        if set(data) == {SIGNATURE} and parts and SIGNATURE not in parts[-1]:
            # The signature of the part before it (a generated file's, which FileContent
            # cannot hold).
            if same:
                parts[-1] = {**parts[-1], SIGNATURE: data[SIGNATURE]}
            return
        part = _own(data, same)
    else:
        raise ValueError(
            f"google-generative-ai cannot send a {type(block).__name__} block back in a "
            "model turn (no Gemini part holds it)"
        )
    if part is not None:
        parts.append(part)


def user_block_part(block: object) -> dict[str, Any] | None:
    """The part of a user-message block beyond text and images (None: not one of them)."""
    if isinstance(block, FileContent):
        return file_part(block)
    if isinstance(block, VendorContent) and block.api == API:
        return block.data
    if isinstance(block, (ApprovalResponse, ApprovalRequest)):
        raise ValueError(
            f"google-generative-ai cannot take a {type(block).__name__}: Gemini asks for no "
            "approvals"
        )
    return None
