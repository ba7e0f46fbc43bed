"""An error's words for a client: what names the upstream stays in the gateway.

The library's error messages name the request they failed on ("HTTP 503 from POST
https://host/v1/chat/completions"), which is right in process and wrong for a gateway's
client: the upstream's host and deployment path are the operator's, as its keys are.
"""

from __future__ import annotations

import re

from stream_core import AssistantMessage

__all__ = ["scrub", "scrub_error"]

_URL = re.compile(r"\bhttps?://[^\s\"'<>()]+")


def scrub(text: str) -> str:
    """`text` with every URL in it replaced by `<upstream>`."""
    return _URL.sub("<upstream>", text)


def scrub_error(message: AssistantMessage) -> None:
    """The message's error, scrubbed in place (the gateway owns the message)."""
    if message.error is not None and "://" in message.error.message:
        message.error = message.error.model_copy(update={"message": scrub(message.error.message)})
