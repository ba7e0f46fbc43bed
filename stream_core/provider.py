"""The provider authors' door: everything a provider module needs beyond the message types.

A provider module imports its message, event and option types from `stream_core` (the
harness authors' door) and its machinery from here:

    from stream_core import AssistantMessage, Context, Model, StreamOptions, ...
    from stream_core.provider import Assembler, StopRule, WireAPI, WireRequest, ...

Every built-in provider and both examples import only from these two doors, which is what
shows a plugin needs nothing private. The pieces, by job:

- the wire definition: `WireAPI` (one per API: request builder, translator, stop and
  usage tables), `WireRequest`, `Translator`, `parse_json`;
- assembly: `Assembler` (content indices, block start/end, usage, stop rules, truncation,
  errors) and `StopRule`;
- decoding: `SSEBytesDecoder`, `NDJSONBytesDecoder`, `EventStreamDecoder` (AWS), and the
  `Decoder`/`Frame` protocol a new framing implements;
- typed reads of untrusted vendor JSON: `optional_field`, `required_field`, `as_object`,
  and `shape` (`First`, `Inner`, `ANY`) for every field of a hot event in one call;
- errors: `StreamFailure` (raise from a translator to end the stream with a kind),
  `ProtocolError`, `error_from_vendor`, `error_from_status`, `vendor_error_fields`,
  `OVERFLOW_PATTERNS`;
- sending history: `prepare_messages`, `id_normalizer`, `is_same_model`,
  `sanitize_surrogates`, `function_tools`, `IMAGE_OMITTED_TEXT`, `TOOL_ERROR_PREFIX`;
- the kinds of content (`kind_of`: a block's row of `stream_core.BLOCK_KINDS`) and what
  a request sends of them:
  `function_tools_of` / `server_tools_of` (the two halves of `Context.tools`; an API's
  server-tool kinds are its `WireAPI.server_tools` table), `server_tool_objects` (what
  the server tools become through that table), `refuse_unsaid_options` (a common option the
  vendor's tool has no field for raises), `cited_text` (a cited text
  block as plain text for a vendor that cannot take citations);
- tool arguments: `parse_arguments`, `parse_partial_json`, `ArgumentsError`;
- cost: `CostContext`, `compute_cost`, `long_cache_honored`;
- per-model rules (`stream_core._rules`, applied at `stream()`): `thinking_mode` (a token
  budget, adaptive thinking, a level), `thinking_level`, `ADAPTIVE_EFFORTS`, and
  `BEDROCK_IMAGE_FORMATS` (an image type outside an API's list is replaced by a note at
  `stream()`, before the request is built);
- request controls and structured output: `CONTROLS` (declare the ones an API maps in
  `WireAPI.controls`), `output_spec` and `OutputSpec` (the call's schema, name and mode),
  `closed_schema` (objects closed, for vendors that demand it), `copy_controls`,
  `refuse_forced_tool`;
- endpoints: `base_url_problem` (what is wrong with a base URL, if anything) and
  `setting_in_url` (a setting that becomes part of a request URL, e.g. a
  region in a host, checked so it cannot move the request elsewhere);
- registration: `register_provider`, `unregister_providers`, `get_provider`;
- batches (`stream_core.batch` and the batch codecs): `BatchWire` (what a vendor's batch
  API supplies) and its shapes (`BatchSession`, `BatchPart`, `BatchStatus`, `BatchCounts`,
  `RawResult`, `BatchSettings`, `BatchHTTPError`), `batch_wire(model)`, `BATCH_CODECS`;
  `plan` (the request `stream()` would send, planned), `read_whole` (a whole answer read
  into the message a stream of it gives), `failed_answer`, `credentials`;
- serving an API to clients (the gateway, `serve`): `Dialect` (a client-facing API both
  ways round: its request read back into a context, its events written as its bytes),
  `dialect(api)`, `DIALECTS`, `Inbound`, `DialectEncoder`, `RequestFieldError`,
  `CARRIER_PREFIX`.

Names no built-in provider imports, and why each stays (tests/test_doors.py checks this
list against the providers):

- `CONTROLS`: the portable controls, for a plugin to build its `WireAPI.controls` from.
- `OVERFLOW_PATTERNS`: the context-overflow wordings, for a plugin whose vendor words
  the error its own way to extend.
- `ArgumentsError`, `parse_arguments`, `parse_partial_json`: tool arguments for a
  translator that receives them whole or streams partial JSON of its own.
- `CostContext`, `compute_cost`: the cost for a `parse_response` or a vendor that bills
  its own way.
- `Decoder`, `Frame`: the protocol a new framing implements (`WireAPI.decoder`).
- `EventStreamFrame`: what `EventStreamDecoder` yields, for a binary-framed plugin.
- `SSEBytesDecoder`: the default decoder, to wrap or to configure.
- `error_from_status`: an HTTP status carried inside a stream, as an error kind.
- `get_provider`, `register_provider`, `unregister_providers`: registration, which
  plugins and their tests do at run time (the built-ins register through the catalog).
- `kind_of`, `server_tools_of`, `cited_text`: a block's kind, the server tools of a
  context and cited text written out, for a plugin whose vendor takes them.
- `dialect`, `DIALECTS`, `DialectEncoder`: what the gateway reads to serve a client its own
  API (the codec modules supply a `Dialect`; none of them looks another up).
- `is_same_model`, `sanitize_surrogates`: history preparation for a provider converting
  messages its own way.
- `BATCH_CODECS`, `batch_wire`, `plan`, `Plan`, `read_whole`, `failed_answer`,
  `credentials`, `Credentials`, `BatchState`, `BatchCounts`, `BatchHTTPError`, `Outcome`:
  what `stream_core.batch` reads to run a vendor's batch codec (the codecs supply
  `BatchWire`; none of them looks another up), and a plugin's batch codec may use.
"""

from ._batch_wire import (
    BATCH_CODECS,
    BatchCounts,
    BatchHTTPError,
    BatchPart,
    BatchSession,
    BatchSettings,
    BatchState,
    BatchStatus,
    BatchWire,
    Outcome,
    RawResult,
    batch_wire,
)
from ._checks import base_url_problem, setting_in_url
from ._cost import CostContext, compute_cost, long_cache_honored
from ._decoding.eventstream import EventStreamDecoder, EventStreamFrame
from ._decoding.fields import (
    ANY,
    First,
    Inner,
    as_object,
    optional_field,
    required_field,
    shape,
)
from ._decoding.json_values import ArgumentsError, parse_arguments, parse_partial_json
from ._decoding.sse import Decoder, Frame, NDJSONBytesDecoder, SSEBytesDecoder
from ._dialects import (
    CARRIER_PREFIX,
    DIALECTS,
    Dialect,
    DialectEncoder,
    Inbound,
    RequestFieldError,
    dialect,
)
from ._error_text import vendor_error_fields
from ._errors import (
    OVERFLOW_PATTERNS,
    ProtocolError,
    StreamFailure,
    error_from_status,
    error_from_vendor,
)
from ._history.handoff import (
    IMAGE_OMITTED_TEXT,
    cited_text,
    id_normalizer,
    is_same_model,
    prepare_messages,
    sanitize_surrogates,
)
from ._kinds import kind_of
from ._options import CONTROLS, copy_controls, refuse_forced_tool
from ._output import OutputSpec, closed_schema
from ._pipeline.assembler import Assembler, StopRule
from ._pipeline.whole import Credentials, Plan, credentials, failed_answer, plan, read_whole
from ._registry import get_provider, register_provider, unregister_providers
from ._rules import ADAPTIVE_EFFORTS, BEDROCK_IMAGE_FORMATS, thinking_level, thinking_mode
from ._server_tools import (
    function_tools_of,
    refuse_unsaid_options,
    server_tool_objects,
    server_tools_of,
)
from ._tools import TOOL_ERROR_PREFIX, function_tools
from ._wire import Translator, WireAPI, WireRequest, output_spec, parse_json

__all__ = [
    "ADAPTIVE_EFFORTS",
    "BATCH_CODECS",
    "BatchCounts",
    "BatchHTTPError",
    "BatchPart",
    "BatchSession",
    "BatchSettings",
    "BatchState",
    "BatchStatus",
    "BatchWire",
    "Credentials",
    "Outcome",
    "Plan",
    "RawResult",
    "batch_wire",
    "credentials",
    "failed_answer",
    "plan",
    "read_whole",
    "ANY",
    "BEDROCK_IMAGE_FORMATS",
    "CARRIER_PREFIX",
    "CONTROLS",
    "DIALECTS",
    "IMAGE_OMITTED_TEXT",
    "OVERFLOW_PATTERNS",
    "TOOL_ERROR_PREFIX",
    "ArgumentsError",
    "Assembler",
    "CostContext",
    "Decoder",
    "Dialect",
    "DialectEncoder",
    "EventStreamDecoder",
    "EventStreamFrame",
    "First",
    "Frame",
    "Inbound",
    "Inner",
    "NDJSONBytesDecoder",
    "OutputSpec",
    "ProtocolError",
    "RequestFieldError",
    "SSEBytesDecoder",
    "StopRule",
    "StreamFailure",
    "Translator",
    "WireAPI",
    "WireRequest",
    "as_object",
    "base_url_problem",
    "closed_schema",
    "compute_cost",
    "copy_controls",
    "error_from_status",
    "error_from_vendor",
    "function_tools",
    "function_tools_of",
    "refuse_unsaid_options",
    "server_tool_objects",
    "server_tools_of",
    "cited_text",
    "dialect",
    "kind_of",
    "get_provider",
    "id_normalizer",
    "is_same_model",
    "long_cache_honored",
    "optional_field",
    "output_spec",
    "parse_arguments",
    "parse_json",
    "parse_partial_json",
    "prepare_messages",
    "refuse_forced_tool",
    "register_provider",
    "required_field",
    "sanitize_surrogates",
    "setting_in_url",
    "shape",
    "thinking_level",
    "thinking_mode",
    "unregister_providers",
    "vendor_error_fields",
]
