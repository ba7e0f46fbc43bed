"""Any scripted turn as real vendor bytes: `vendor_bytes(turn, api)`.

A faux-style turn (a `FauxTurn`, an `AssistantMessage` or a string: text, thinking, tool
calls with arguments, usage, a stop reason, an error before or after content, an HTTP
error) written in the exact wire format of each built-in API, with the `.json` a recording
carries (its api, status, headers and the `expect` the contract kit compares), so
`replay_client`, `replay_sequence`, `fake_vendor` and `stream-core serve` play it like a
recording. Each API's bytes replay through its provider to the scripted message.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import is_context_overflow
from .._types import AssistantMessage
from . import _codec
from ._codec import Turn as _Turn
from ._faux import FauxTurn, _as_turn
from ._write_framed import bedrock as _bedrock
from ._write_framed import ollama as _ollama
from ._write_sse import MODEL as _MODEL
from ._write_sse import anthropic as _anthropic
from ._write_sse import chat as _chat
from ._write_sse import gemini as _gemini
from ._write_sse import responses as _responses

__all__ = ["APIS", "Synthesized", "vendor_bytes"]

APIS: dict[str, tuple[Callable[[_Turn], bytes], str]] = {
    "anthropic-messages": (_anthropic, "text/event-stream"),
    "openai-completions": (_chat, "text/event-stream"),
    "mistral-conversations": (lambda t: _chat(t, mistral=True), "text/event-stream"),
    "openai-responses": (_responses, "text/event-stream"),
    "google-generative-ai": (_gemini, "text/event-stream"),
    "bedrock-converse-stream": (_bedrock, "application/vnd.amazon.eventstream"),
    "ollama-chat": (lambda t: _ollama(t, chat=True), "application/x-ndjson"),
    "ollama-generate": (lambda t: _ollama(t, chat=False), "application/x-ndjson"),
}
"""Each built-in API's writer and its body's content type."""


@dataclass
class Synthesized:
    """A recording made from a script: `body` (the vendor's bytes) and `meta` (the `.json`
    beside a recording: api, status, headers, and the `expect` the contract kit checks)."""

    body: bytes
    meta: dict[str, Any]

    def write(self, path: str | Path) -> Path:
        """Write `<path>.body` and `<path>.json`; returns the `.body` path. Each is written
        whole to a new file, then moved in place: a symbolic link at either name is
        refused (`OSError`), never followed."""
        body = Path(path).with_suffix(".body")
        meta = (json.dumps(self.meta, indent=2) + "\n").encode()
        for target in (body, body.with_suffix(".json")):
            if target.is_symlink():
                raise OSError(f"{target}: a symbolic link; vendor_bytes writes through none")
        _replace(body, self.body)
        _replace(body.with_suffix(".json"), meta)
        return body


def _replace(target: Path, data: bytes) -> None:
    """`data` as `target`: a new file (`mkstemp` opens with O_EXCL) moved over the name, so
    a link planted there after the check is replaced, its target untouched."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def vendor_bytes(
    turn: FauxTurn | AssistantMessage | str, api: str, *, model: str = _MODEL
) -> Synthesized:
    """`turn` as `api` would stream it (see the module's docstring). An HTTP error turn
    (`faux_error(kind, status=...)`) is that status with the error body."""
    writer = APIS.get(api)
    if writer is None:
        raise ValueError(f"vendor_bytes: no writer for {api!r} (it writes: {', '.join(APIS)})")
    faux = _as_turn(turn)
    meta: dict[str, Any] = {"name": f"synthetic-{api}", "api": api, "model": model}
    if faux.status != 200:
        meta.update(status=faux.status, headers={"content-type": "application/json"})
        if faux.retry_after is not None:
            meta["headers"]["retry-after"] = f"{faux.retry_after:g}"
        return Synthesized(_http_body(faux, api), meta)
    read = _codec.read_turn(faux, api)
    body = writer[0](read).replace(_MODEL.encode(), model.encode())
    meta.update(status=200, headers={"content-type": writer[1]}, expect=_expect(read))
    return Synthesized(body, meta)


def _http_body(faux: FauxTurn, api: str) -> bytes:
    """An HTTP error turn's body, as `api`'s server words an error of its kind
    (`_codec.http_error`: the dialect codec's error body, or the provider's own words), so
    it reads back as that kind. A vendor says a context overflow with a 400 and its wording
    (no API has a status for it): `faux_error("context_overflow", status=400)`'s message
    gets the words every provider reads. A turn with a body of its own keeps it."""
    kind = faux.error_kind
    try:
        data = json.loads(faux.http_body)
        message = data["error"]["message"]
        own = data != {"error": {"type": kind, "message": message}}
    except (ValueError, TypeError, KeyError):
        own = True
    if kind is None or own:  # not `faux_error`'s: a body scripted by hand
        return faux.http_body
    if kind == "context_overflow" and not is_context_overflow(message):
        message = f"{message}: {_OVERFLOW_WORDS}"
    return json.dumps(_codec.http_error(api, kind, message, faux.status)[1]).encode()


_OVERFLOW_WORDS = "the prompt exceeds the context window"


def _expect(t: _Turn) -> dict[str, Any]:
    """What the replayed message must be, in the kit's `expect` shape."""
    content: list[dict[str, Any]] = []
    for b in t.blocks:
        if b.kind == "text":
            content.append({"type": "text", "text": b.text})
            if b.citations:
                content[-1]["citations"] = len(b.citations)
        elif b.kind == "block":
            content.append(_codec.block_summary(b.data))
        elif b.kind == "thinking":
            content.append({"type": "thinking", "thinking": b.text})
        else:
            try:
                arguments: Any = json.loads(b.text or "{}")
            except ValueError:
                arguments = None
            content.append({"type": "tool_call", "name": b.name, "arguments": arguments})
    expect: dict[str, Any] = {"content": content}
    if t.error is not None and t.said is not None:
        expect["stop_reason"] = "error"
        expect["error_kind"] = t.said.kind
    else:
        expect["stop_reason"] = t.stop
    return expect
