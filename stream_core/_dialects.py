"""Dialects: a wire API spoken by a client, read and written by that API's codec.

A provider reads its vendor's stream and builds its vendor's request. Serving that API to
a client (the gateway, `serve`, `vendor_bytes`) needs both turned round: the request a
client sends read back into a `Context` and `StreamOptions` (the tested inverse of the
provider's request builder) and the events of a stream written as that API's bytes (the
inverse of its translator). Both read the provider's own tables (stop reasons, usage
fields, error words): nothing is written a second time.

Each client-facing API's codec module supplies a `Dialect`; `dialect(api)` imports it on
first use. `DIALECTS` lists the APIs that have one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._events import AssistantStreamEvent
    from ._options import StreamOptions
    from ._types import AssistantMessage, Context, ErrorKind

__all__ = [
    "CARRIER_PREFIX",
    "DIALECTS",
    "Dialect",
    "DialectEncoder",
    "Inbound",
    "RequestFieldError",
    "dialect",
]

CARRIER_PREFIX = "scgw1."
"""How a state carrier starts: an opaque string the gateway hands a client in a field the
client sends back unchanged (Anthropic: a `redacted_thinking` block's `data`; Responses: a
`reasoning` item's `encrypted_content`; Chat Completions: the tail of a tool call's id
after `~`). A codec's parser takes such a string out of the history it reads
(`Inbound.carriers`) instead of reading it as content."""

DIALECTS: dict[str, str] = {
    "anthropic-messages": "stream_core.providers._anthropic_dialect",
    "openai-responses": "stream_core.providers._responses_dialect",
    "openai-completions": "stream_core.providers._chat_dialect",
}
"""The APIs a client may speak, and the codec module whose `DIALECT` serves each."""


class RequestFieldError(ValueError):
    """A request field that cannot be read, or cannot be carried: `field` is its JSON path
    in the client's request (`messages[3].content[0].source`), `message` says why. The
    gateway answers it as a 400 in the client's dialect naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass
class Inbound:
    """A client's request read back: the `model` name it asked for, the `context` and
    `options` a `stream()` call takes, whether it asked for a `stream`.

    `unmodeled`: the top-level fields read into neither (Anthropic `context_management`,
    `metadata`, ...), as sent: forwarded as they are when the upstream speaks the same
    dialect, otherwise carried by a documented degradation or refused.
    `carriers`: index in `context.messages` -> the state carrier found in that assistant
    message (see `CARRIER_PREFIX`); the message itself is read without it.
    `headers`: the request headers the dialect defines (Anthropic `anthropic-beta`,
    `anthropic-version`), lower-cased, for a same-dialect upstream.
    `tool_names`: a tool the codec flattened for other vendors (a Responses `namespace`
    tool's members) -> its (namespace, name); the dialect's encoder says a call to it in
    the client's words again (`DialectEncoder.tool_names`)."""

    model: str
    context: Context
    options: StreamOptions
    stream: bool = False
    unmodeled: dict[str, Any] = field(default_factory=dict)
    carriers: dict[int, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    tool_names: dict[str, tuple[str, str]] = field(default_factory=dict)


class DialectEncoder(Protocol):
    """Writes one stream's events as the dialect's bytes, one event at a time.

    `feed(event)` returns the bytes that event adds (b"" when it adds none yet: an
    Anthropic `message_start` waits for the first content so its usage is known). The
    `message_end` event closes the body: the dialect's end events, or its mid-stream error
    when the message ended with an error after content was sent."""

    media_type: str
    tool_names: dict[str, tuple[str, str]]
    """`Inbound.tool_names` of the request it answers (empty unless set): a call to a
    flattened tool is written as the (namespace, name) the client declared."""

    def feed(self, event: AssistantStreamEvent) -> bytes: ...


Carrier = Callable[["AssistantMessage"], "str | None"]
"""Given the message so far, the state carrier to hand the client (None: nothing to
carry). The encoder calls it where its dialect has room (see `CARRIER_PREFIX`)."""


@dataclass(frozen=True)
class Dialect:
    """One client-facing API, both ways round.

    `parse_request(body, headers)`: the client's JSON body (and its lower-cased headers)
    as an `Inbound`; raises `RequestFieldError` naming the field it cannot read.
    `encoder(model, carrier)`: a `DialectEncoder` for one streamed answer, `model` being
    the name the client asked for (echoed back), `carrier` where state rides (or None).
    `message_body(message, model, carrier)`: the non-streaming answer's JSON.
    `error_body(kind, message)`: the HTTP status and JSON body of an error before content.
    `count_body(tokens)`: the JSON of a token count (None where the dialect has no count
    endpoint)."""

    api: str
    parse_request: Callable[[Mapping[str, Any], Mapping[str, str]], Inbound]
    encoder: Callable[[str, Carrier | None], DialectEncoder]
    message_body: Callable[[AssistantMessage, str, Carrier | None], dict[str, Any]]
    error_body: Callable[[ErrorKind, str], tuple[int, dict[str, Any]]]
    media_type: str = "text/event-stream"


def dialect(api: str) -> Dialect:
    """The `Dialect` of `api` (one of `DIALECTS`); `KeyError` naming them otherwise."""
    module = DIALECTS.get(api)
    if module is None:
        raise KeyError(f"no dialect for {api!r}: clients may speak {', '.join(DIALECTS)}")
    found: Dialect = importlib.import_module(module).DIALECT
    return found
