"""The Acme provider with three seeded defects. Do not copy: this is what the contract
kit is for."""

from __future__ import annotations

import dataclasses
from typing import Any

from acme_provider import STOP_REASONS, USAGE_FIELDS
from acme_provider import WIRE as _GOOD_WIRE
from acme_provider import translator as _good_translator

from stream_core import (
    AssistantStream,
    AssistantStreamEvent,
    Context,
    MessageUpdate,
    Model,
    StreamOptions,
    ToolCallEnd,
)
from stream_core.provider import Assembler, Translator, optional_field, parse_json

API = "acme-chat"

# Defect 3: the output limit read as a normal stop, so a cut tool call looks complete.
_BROKEN_STOP_REASONS = {**STOP_REASONS, "max_output": "stop"}


def _translator(asm: Assembler) -> Translator:
    good = _good_translator(asm)

    def translate(event: str, data: str) -> None:
        if event == "usage":
            # Defect 2: Acme's usage events are cumulative snapshots; adding them counts
            # every token again each time one arrives.
            obj = parse_json(data, event)
            asm.add_usage(
                **{k: optional_field(obj, v, int, event) or 0 for k, v in USAGE_FIELDS.items()}
            )
            return
        good(event, data)

    return translate


WIRE = dataclasses.replace(_GOOD_WIRE, translator=_translator, stop_reasons=_BROKEN_STOP_REASONS)


class _ForgetsToolCallEnd(AssistantStream):
    """Defect 1: a hand-written event filter that drops `toolcall_end`, so a tool-call
    block is started and never ended."""

    async def __anext__(self) -> AssistantStreamEvent:
        event = await super().__anext__()
        while isinstance(event, MessageUpdate) and isinstance(event.delta, ToolCallEnd):
            event = await super().__anext__()
        return event


def stream(
    model: Model, context: Context | dict[str, Any], options: StreamOptions | None = None
) -> AssistantStream:
    s = WIRE.open(model, context, options)
    s.__class__ = _ForgetsToolCallEnd
    return s
