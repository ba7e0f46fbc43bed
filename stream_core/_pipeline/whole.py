"""A call without a stream: its request planned as `stream()` would send it, and a whole
answer read back into the message a stream of it gives.

A vendor's batch API (`stream_core.batch`) runs the same request later, elsewhere, and
hands back the answer whole. So a batch line is `plan(model, context, options)`: the
same checks (raising at the call, naming the field), the same per-model rules, the same
structured-output step (a forced tool where the model has no native mode), the same
builder and `on_payload` hook; and a result is `read_whole(plan, body)`: the provider's own
`WireAPI.parse_response`, the assembler's stop-reason and truncation rules, the usage
clamp and the structured answer, priced at the batch price.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, get_args

from .._cost import CostContext, cost_context
from .._errors import ProtocolError, StreamFailure
from .._models import Model
from .._options import StreamOptions
from .._output import OutputSpec, read_output
from .._types import AssistantMessage, Context, StreamError
from .._usage import ErrorKind
from .._wire import WireAPI, WireRequest, _force_output_tool, output_spec
from .assembler import Assembler
from .checks import check_call
from .finish import clamp_usage
from .request import _endpoint, asks_server_tools, key_for, missing_key, serialized_payload

__all__ = ["Credentials", "Plan", "credentials", "failed_answer", "plan", "read_whole"]


@dataclass(frozen=True)
class Plan:
    """One call's request, planned and not sent: what `stream()` would POST, and what
    reading its answer needs. `request.payload` is the vendor payload as `stream()` sends
    it (streaming fields included: a batch codec removes its own); `request.headers` the
    API's own headers (no credential: those are added where it is sent)."""

    wire: WireAPI
    model: Model
    """The model as it is sent (`StreamOptions.base_url` applied)."""
    context: Context
    """The context as sent: validated, custom records converted, a forced output tool added."""
    options: StreamOptions
    output: OutputSpec | None
    request: WireRequest
    size: int
    """The serialized payload's length in bytes (the usage clamp's bound)."""
    server_tools: bool
    pricing: CostContext


def plan(
    wire: WireAPI,
    model: Model,
    context: Context | dict[str, Any],
    options: StreamOptions | None = None,
    *,
    batch: bool = True,
) -> Plan:
    """The request `wire.open(model, context, options)` would send, built the same way;
    raises what `stream()` raises, at once. `batch` prices its answer at the batch price."""
    checked = check_call(wire, model, context, options)
    opts = options or StreamOptions()
    output = output_spec(wire, model, opts)
    if output is not None and output.mode == "tool":
        checked, opts = _force_output_tool(wire, output, checked, opts)
    sent = _endpoint(wire, model, opts)
    request = wire.build_request(sent, checked, opts)
    body, cleaned = serialized_payload(request, sent, opts)
    if cleaned:  # the line carries what the stream would send, lone surrogates removed
        request.payload = json.loads(body)
    pricing = cost_context(sent, opts)
    if batch:
        pricing = replace(pricing, batch=True)
    return Plan(
        wire=wire,
        model=sent,
        context=checked,
        options=opts,
        output=output,
        request=request,
        size=len(body.encode("utf-8")),
        server_tools=asks_server_tools(request.payload),
        pricing=pricing,
    )


def _assembler(p: Plan) -> Assembler:
    message = AssistantMessage(api=p.wire.api, provider=p.model.provider, model=p.model.id)
    return Assembler(message, p.model, p.wire.stop_reasons, deque(), p.pricing, p.output)


def read_whole(p: Plan, body: Any) -> AssistantMessage:
    """The message a stream of this answer gives, from the vendor's whole answer `body`
    (parsed JSON). Never raises: a body the provider cannot read is a message ending
    `protocol`, its error saying why; a vendor error object inside it keeps its kind."""
    asm = _assembler(p)
    message = asm.message
    error: StreamError | None = None
    parse = p.wire.parse_response
    try:
        if parse is None:
            raise ProtocolError(f"{p.wire.api} cannot read a whole answer (no parse_response)")
        parse(asm, body)
        if not asm.finished:
            raise ProtocolError("the answer ended before its stop reason")
    except StreamFailure as failure:
        error = failure.error
    except ProtocolError as exc:
        error = StreamError(kind="protocol", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: a message, never a raise
        error = StreamError(kind="protocol", message=f"{type(exc).__name__}: {exc}"[:500])
    try:
        asm.finalize(error, read_output=False)
        text = asm.output_text()
        if text is not None and p.output is not None:
            asm.set_output(*read_output(text, p.output))
    except Exception as exc:  # noqa: BLE001 - a bug: the message still ends, as an error
        message.stop_reason = "error"
        message.error = StreamError(kind="protocol", message=f"{type(exc).__name__}: {exc}")
    clamp_usage(message, p.model, p.options, p.pricing, p.size, p.server_tools)
    return message


def failed_answer(p: Plan, kind: ErrorKind, text: str) -> AssistantMessage:
    """The message of a request the vendor did not answer (an error, an expiry, a cancel):
    no content, `stop_reason="error"` and the error's kind and text. Never raises: the text
    is the vendor's (a codec may hand on any JSON value: it is written as JSON), and a kind
    that is not an `ErrorKind` is `protocol`."""
    if not isinstance(text, str):
        try:
            text = json.dumps(text, ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError):
            text = repr(text)
    if kind not in _KINDS:
        text, kind = f"{kind!r}: {text}"[:2000], "protocol"
    asm = _assembler(p)
    return asm.finalize(StreamError(kind=kind, message=text[:2000]), read_output=False)


_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))


@dataclass(frozen=True)
class Credentials:
    """How a call's requests authenticate, outside a stream (a batch's endpoints): the
    headers to send, the API key (for a signing API), every secret to redact, and why
    there are none, when the environment lacks them."""

    headers: dict[str, str]
    api_key: str | None
    secrets: tuple[str, ...]
    missing: str | None = None


async def credentials(wire: WireAPI, model: Model, options: StreamOptions) -> Credentials:
    """The credentials `stream()` would send `model`'s requests with: the key (options,
    then the environment) in the API's header, else its bearer token (Vertex AI), the
    model's and the call's headers."""
    from .._errors import secrets_in

    api_key, env = key_for(wire, model, options)
    headers: dict[str, str] = {}
    if api_key:
        headers.update(wire.auth_headers(model, api_key))
    elif wire.bearer_token is not None and wire.sign is None:
        token = await wire.bearer_token(model)
        if token:
            headers["authorization"] = f"Bearer {token}"
    headers.update(model.headers)
    headers.update(options.headers)
    secrets = secrets_in(headers, api_key)
    missing = None
    if not secrets and wire.sign is None and wire.key_required(model):
        missing = missing_key(model, env)
    return Credentials(headers, api_key, secrets, missing)
