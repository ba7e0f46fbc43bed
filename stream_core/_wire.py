"""The wire definition a provider supplies: `WireAPI`, `WireRequest`, `Translator`.

A provider module is tables and functions (`WireAPI`, `WireRequest`, `Translator`,
`parse_json`). The call's validation is `_pipeline.checks` (CONTRACT 1), run by
`WireAPI.open`; the endpoint a model is sent to is the request step's (`_pipeline.request`).

`AssistantStream` (`_pipeline.stream`) runs the call and builds on this module, never the other way
round: `WireAPI.open` is handed the stream class (`bind_stream`) instead of importing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from pydantic_core import from_json

from ._checks import clip
from ._decoding.sse import Decoder, SSEBytesDecoder
from ._errors import ProtocolError
from ._models import Model
from ._options import StreamOptions
from ._output import OutputMode, OutputSpec, make_output_spec
from ._pipeline.assembler import Assembler, StopRule
from ._pipeline.checks import check_call
from ._server_tools import ServerTool, function_tools_of, server_tools_of
from ._types import (
    Context,
    Tool,
)

if TYPE_CHECKING:
    from ._pipeline.stream import AssistantStream

__all__ = ["Translator", "WireAPI", "WireRequest", "bind_stream", "output_spec", "parse_json"]


@dataclass
class WireRequest:
    """What `WireAPI.build_request` returns: the `url` to POST to, the JSON `payload` (which
    `StreamOptions.on_payload` may replace) and the API's own `headers`. Auth headers, the
    model's and the call's headers are added by the pipeline."""

    url: str
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


Translator = Callable[[str, str], None]
"""Called with (SSE event name, data) for every event; drives the assembler."""


def parse_json(data: str, event: str) -> Any:
    """Parse an event's data, or end the stream with a protocol error naming the event."""
    try:
        return from_json(data, allow_inf_nan=False)
    except ValueError:
        snippet = clip(data, 80)
        hint = _OTHER_FORMATS.get(data.strip(), "")
        raise ProtocolError(
            f"malformed JSON in {event or 'data'} event: {snippet!r}{hint}"
        ) from None


_OTHER_FORMATS = {
    "[DONE]": " (the body looks like an OpenAI-style stream, which ends with data: [DONE]: "
    "is the model's api right for this server?)",
}
"""Data lines that are another wire format's signature, and what they suggest."""


@dataclass(frozen=True)
class WireAPI:
    """What a provider module supplies: its tables and three functions.

    `build_request(model, context, options)` turns the context into the vendor payload;
    `auth_headers(model, api_key)` says how the key is sent; `translator(asm)` returns the
    function that turns one vendor event into assembler calls.
    """

    api: str
    terminal_event: str
    stop_reasons: Mapping[str, StopRule]
    build_request: Callable[[Model, Context, StreamOptions], WireRequest]
    auth_headers: Callable[[Model, str], dict[str, str]]
    translator: Callable[[Assembler], Translator]
    api_key_env: Callable[[Model], str | None]
    """The environment variable holding the key for a model (None: no key needed)."""
    key_required: Callable[[Model], bool] = lambda model: True
    decoder: Callable[[], Decoder] = SSEBytesDecoder
    """The body's framing: SSE, `NDJSONBytesDecoder` for newline-delimited JSON, or
    `EventStreamDecoder` for AWS's binary event-stream."""
    sign: Callable[[httpx.Request, Model, StreamOptions, str | None], tuple[str, ...]] | None = None
    """Signs the finished request in place, exact body bytes included (AWS SigV4), given the
    API key if one was found; returns the secrets it used (for redaction). Raising
    `StreamFailure` (e.g. kind `auth`: no credentials) ends the stream with that error."""
    parse_response: Callable[[Assembler, Any], None] | None = None
    """Reads the vendor's non-streamed JSON answer (a proxy that ignored `stream: true`)
    as a whole: the same assembler calls as if it had streamed in one piece, ending with
    `asm.finished = True`. None: such an answer ends the stream `protocol`."""
    compat: type[Any] | None = None
    """The dataclass of per-endpoint flags `Model.compat` may set (None: it takes none);
    an unknown key or a value of the wrong type raises at the call, naming the key."""
    base_url_env: Mapping[str, str] = field(default_factory=dict)
    """Vendor default base URL -> the environment variable that replaces it (the official
    SDK's own, e.g. `OPENAI_BASE_URL`). Only a model still at that default is redirected."""
    providers: Mapping[str, str] = field(default_factory=dict)
    """Provider names this API serves -> their default base URL, so a model outside the
    catalog can be named as `provider/model-id` (e.g. `ollama/llama3.2`)."""
    bearer_token: Callable[[Model], Awaitable[str | None]] | None = None
    """When no API key is configured: awaited once at connect for an OAuth token (e.g.
    Vertex AI's Application Default Credentials), sent as `authorization: Bearer` and
    redacted like a key. Blocking I/O belongs in a worker thread (`anyio.to_thread`)."""
    controls: Mapping[str, str] = field(default_factory=dict)
    """The portable request controls it maps (`CONTROLS`: `tool_choice`, `stop`, `top_p`,
    `output_schema`, ...) -> the vendor field each becomes, for the README's table. A
    control set on a call and missing here raises at `stream()`, naming the API; a value the
    API cannot express (`tool_choice="required"` on Ollama) is the builder's `ValueError`."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """The `StreamOptions.extra` keys it reads -> what each does; any other key raises at
    `stream()`, so a typo never silently does nothing."""
    extra_types: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    """The types each `extra` key takes (exactly: `True` is not an `int`); a value of any
    other type raises at `stream()` naming the key (`{"store": "false"}` must not send
    `store: true`). A key missing here takes any value."""
    server_tools: Mapping[str, Callable[[ServerTool], dict[str, Any]]] = field(default_factory=dict)
    """The server-tool kinds it takes (`ServerTool.kind`) -> the vendor tool object each
    becomes (its codec's table). A kind missing here raises at `stream()`, naming the API;
    a `native` ServerTool is sent as it is to its own API only."""
    server_tool_refusal: Callable[[Model, ServerTool], str | None] = lambda model, tool: None
    """Why `model` cannot take a server tool its API's table has (a tool only some models
    run), or None. `stream()` raises with it; `Model.capabilities()` leaves such kinds out."""
    file_types: frozenset[str] = frozenset()
    """The media types a `FileContent` in a request may have (`application/pdf`, ...); any
    other raises at `stream()`, naming the API and the block."""
    takes_tools: bool = True
    """Whether the API takes tools; False makes `context.tools` raise at `stream()` (a
    history with tool calls is still sent, as the API can). The contract kit then checks
    the request side with a tool-less context."""
    rate_limited: bool = True
    """Whether its calls go through the limiter (`configure_limits`): rate limits learned
    from headers, 429 pauses, budgets. False for an API with no quota to keep (the faux
    model's scripted vendor)."""
    output_mode: Callable[[Model], OutputMode] = lambda model: "tool"
    """How a model of this API is asked for a structured answer: its native JSON Schema
    mode, a JSON mode with the schema in the prompt, or (the default) one forced tool, which
    the pipeline adds itself. `Model.structured_output` overrides it per model."""

    def open(
        self,
        model: Model,
        context: Context | dict[str, Any],
        options: StreamOptions | None = None,
    ) -> AssistantStream:
        context = check_call(self, model, context, options)
        options = options or StreamOptions()
        output = output_spec(self, model, options)
        if output is not None and output.mode == "tool":
            context, options = _force_output_tool(self, output, context, options)
        assert _stream_class is not None  # bound when `stream_core` is imported
        return _stream_class(self, model, context, options, output)


_StreamClass = Callable[
    [WireAPI, Model, Context, StreamOptions, OutputSpec | None], "AssistantStream"
]
# Set once by `_pipeline.stream` at import (the package always imports it): the class lives
# above this module in the import graph, so it is handed down rather than imported.
_stream_class: _StreamClass | None = None


def bind_stream(cls: _StreamClass) -> None:
    """Make `WireAPI.open` return instances of `cls` (called by `_pipeline.stream` only)."""
    global _stream_class
    _stream_class = cls


def output_spec(wire: WireAPI, model: Model, options: StreamOptions) -> OutputSpec | None:
    """The call's structured-output request, or None. Pure: the pipeline and the provider's
    request builder both call it and get the same answer. In tool mode the pipeline has
    already turned the request into a forced tool call, so a builder sees None."""
    schema = options.output_schema
    if schema is None:
        return None
    mode = wire.output_mode(model)
    if model.structured_output == "tool":
        mode = "tool"
    elif model.structured_output == "native" and mode == "tool":
        mode = "native"
    return make_output_spec(schema, mode)


def _force_output_tool(
    wire: WireAPI, output: OutputSpec, context: Context, options: StreamOptions
) -> tuple[Context, StreamOptions]:
    """Tool mode: one more tool, whose arguments are the answer, and a tool choice that makes
    the model call a tool. With tools of the caller's own the model may call those first
    (`required`); without, it must call this one."""
    if "tool_choice" not in wire.controls:
        raise ValueError(
            f"StreamOptions.output_schema: {wire.api} cannot force a tool and this model has "
            "no native structured output (set Model.structured_output='native' if it has)"
        )
    tools = list(context.tools or ())
    if any(t.name == output.name for t in function_tools_of(tools)):
        raise ValueError(
            f"StreamOptions.output_schema: its name {output.name!r} is also a tool's name "
            "(give the schema another `title`)"
        )
    choice = options.tool_choice
    if isinstance(choice, dict):
        raise ValueError(
            "StreamOptions.tool_choice: a named tool cannot be forced together with an "
            f"output_schema on a model without native structured output ({wire.api})"
        )
    if choice == "none":
        tools = list(server_tools_of(tools))
    forced: Any = "required" if function_tools_of(tools) else {"tool": output.name}
    tool: Tool = output.tool()
    context = context.model_copy(update={"tools": [*tools, tool]})
    return context, dataclasses.replace(options, output_schema=None, tool_choice=forced)
