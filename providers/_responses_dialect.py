"""The OpenAI Responses API as a client speaks it (`POST /v1/responses`, Codex CLI's only
wire API): a request read back into a context and options (`_responses_inbound`), a
stream written as OpenAI's SSE, a whole answer as its Response object and an error as its
HTTP error (`_responses_encode`). Both read the provider's own tables (`openai_responses`,
`_responses_items`, `_responses_builtin*`); the gateway and `vendor_bytes` share them."""

from __future__ import annotations

from stream_core.provider import Dialect

from ._chat_encode import error_body
from ._responses_encode import Carrier, ResponsesEncoder, response_body
from ._responses_inbound import parse_request
from .openai_responses import API

__all__ = ["DIALECT"]


def encoder(model: str, carrier: Carrier | None) -> ResponsesEncoder:
    """A streamed answer's encoder: `model` is the name the client asked for."""
    return ResponsesEncoder(model, carrier)


DIALECT = Dialect(
    api=API,
    parse_request=parse_request,
    encoder=encoder,
    message_body=response_body,
    error_body=error_body,
    media_type=ResponsesEncoder.media_type,
)
