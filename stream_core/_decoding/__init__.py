"""Decoding untrusted vendor bytes: SSE and NDJSON framing, AWS event-stream, JSON and partial JSON,
typed reads of vendor fields, and the body's content decoding."""
