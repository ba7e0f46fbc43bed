"""The Anthropic Messages API as a client speaks it (`stream_core.provider.dialect`): a
request read back into a context and options (`_anthropic_inbound`), a stream written as
Anthropic's SSE, a whole answer as its `Message` and an error as its HTTP error
(`_anthropic_encode`). Both read the provider's own tables (`anthropic`,
`_anthropic_blocks`); the gateway, `serve` and `vendor_bytes` share them.
"""

from __future__ import annotations

from stream_core.provider import Dialect

from ._anthropic_blocks import API
from ._anthropic_encode import MEDIA_TYPE, Encoder, error_body, message_body
from ._anthropic_inbound import parse_request

__all__ = ["DIALECT"]

DIALECT = Dialect(
    api=API,
    parse_request=parse_request,
    encoder=Encoder,
    message_body=message_body,
    error_body=error_body,
    media_type=MEDIA_TYPE,
)
