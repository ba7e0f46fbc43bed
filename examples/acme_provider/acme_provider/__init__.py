"""The Acme chat API (`POST {base}/v1/acme/chat`, SSE with named events): an example
provider written outside stream-core, on its public API only."""

from __future__ import annotations

from typing import Any

from stream_core import (
    AssistantMessage,
    AssistantStream,
    Context,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stream_core.provider import (
    Assembler,
    StopRule,
    StreamFailure,
    Translator,
    WireAPI,
    WireRequest,
    as_object,
    error_from_vendor,
    optional_field,
    parse_json,
    vendor_error_fields,
)

API = "acme-chat"

STOP_REASONS: dict[str, StopRule] = {
    "end": "stop",
    "tool": "tool_use",
    "max_output": "length",
    "blocked": "content_filter",
}

# Our usage field <- Acme's (a cumulative snapshot, repeated as the answer grows).
USAGE_FIELDS = {"input": "input_tokens", "output": "output_tokens"}


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    return WIRE.open(model, context, options)


def build_request(model: Model, context: Context, options: StreamOptions) -> WireRequest:
    messages: list[dict[str, Any]] = []
    for m in context.messages:
        if isinstance(m, UserMessage):
            text = (
                m.content
                if isinstance(m.content, str)
                else "".join(b.text for b in m.content if isinstance(b, TextContent))
            )
            messages.append({"role": "user", "text": text})
        elif isinstance(m, AssistantMessage):
            calls = [
                {"id": b.id, "name": b.name, "args": b.arguments}
                for b in m.content
                if isinstance(b, ToolCall)
            ]
            messages.append({"role": "assistant", "text": m.text(), "calls": calls})
        elif isinstance(m, ToolResultMessage):
            text = "".join(b.text for b in m.content if isinstance(b, TextContent))
            messages.append({"role": "tool", "call_id": m.tool_call_id, "text": text})
    payload: dict[str, Any] = {"model": model.id, "messages": messages, "stream": True}
    if context.system_prompt:
        payload["system"] = context.system_prompt
    if context.tools:
        payload["tools"] = [t.model_dump() for t in context.tools]
    if options.max_tokens is not None:
        payload["max_output"] = options.max_tokens
    return WireRequest(url=model.base_url.rstrip("/") + "/v1/acme/chat", payload=payload)


def translator(asm: Assembler) -> Translator:
    def translate(event: str, data: str) -> None:
        # Parse first, whatever the event: junk must end the stream, not pass unnoticed.
        obj = as_object(parse_json(data, event), event or "data")
        if event == "delta":
            part = ("part", obj.get("part"))
            if obj.get("kind") == "call":
                asm.tool_call(
                    part,
                    optional_field(obj, "args", str, event) or "",
                    id=optional_field(obj, "call_id", str, event),
                    name=optional_field(obj, "name", str, event),
                )
            else:
                asm.text(part, optional_field(obj, "text", str, event) or "")
        elif event == "part_end":
            asm.end(("part", obj.get("part")))
        elif event == "usage":
            # Snapshots: set, never add (adding counts every token again).
            counts = {k: optional_field(obj, v, int, event) for k, v in USAGE_FIELDS.items()}
            asm.set_usage(**counts)
        elif event == "begin":
            asm.set_response_id(optional_field(obj, "id", str, event))
        elif event == "finish":
            asm.set_stop_reason(optional_field(obj, "reason", str, event))
            asm.finished = True
        elif event == "error":
            vendor_type, message = vendor_error_fields(obj)
            raise StreamFailure(error_from_vendor(vendor_type, message))
        # Anything else is an event a newer Acme added: ignored.

    return translate


WIRE = WireAPI(
    api=API,
    terminal_event="finish",
    stop_reasons=STOP_REASONS,
    build_request=build_request,
    auth_headers=lambda model, key: {"authorization": f"Bearer {key}"},
    translator=translator,
    api_key_env=lambda model: "ACME_API_KEY",
    providers={"acme": "https://api.acme.example"},
)
