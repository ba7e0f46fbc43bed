"""Vendor framing written by the test helpers (no pytest, no respx: a plain install
imports it): one AWS event-stream message, as Bedrock streams them."""

from __future__ import annotations

import struct
import zlib

__all__ = ["event_stream_frame"]


def event_stream_frame(event: str, payload: bytes, *, message_type: str = "event") -> bytes:
    """One AWS event-stream message with correct CRCs: `event` is the `:event-type` (or,
    for `message_type="exception"`, the `:exception-type`)."""
    kind = ":exception-type" if message_type == "exception" else ":event-type"
    headers = b""
    for name, value in (
        (kind, event),
        (":content-type", "application/json"),
        (":message-type", message_type),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return head + struct.pack(">I", zlib.crc32(head))
