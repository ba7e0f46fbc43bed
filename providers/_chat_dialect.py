"""OpenAI Chat Completions as a client's dialect (`POST /v1/chat/completions`): the
request read back (`_chat_inbound`), the answer written (`_chat_encode`), both from the
`openai-completions` provider's own tables."""

from __future__ import annotations

from stream_core.provider import Dialect

from ._chat_encode import Carrier, ChatEncoder, error_body, message_body
from ._chat_inbound import parse_request
from .openai_completions import API

__all__ = ["DIALECT"]


def encoder(model: str, carrier: Carrier | None) -> ChatEncoder:
    """A streamed answer's encoder: `model` is the name the client asked for."""
    return ChatEncoder(model, carrier)


DIALECT = Dialect(
    api=API,
    parse_request=parse_request,
    encoder=encoder,
    message_body=message_body,
    error_body=error_body,
)
