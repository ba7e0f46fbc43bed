"""stream-core: one streaming interface to every major LLM vendor.

async with stream(model, context, options) as s:
    async for event in s: ...
    message = await s.result()

Without an event loop: `for event in stream_sync(...)`, `complete_sync(...)`.
"""

from . import _layout

# In a source checkout `providers/` and `contract_tests/` sit beside this package; the wheel
# ships them inside it. Either way they import as `stream_core.providers` and
# `stream_core.contract_tests`, so nothing generic lands on the import path.
__path__ = _layout.extend_checkout_path(__path__)

from ._assembler import Assembler, StopRule
from ._cost import CostContext, compute_cost, long_cache_honored
from ._error_text import vendor_error_fields
from ._errors import (
    OVERFLOW_PATTERNS,
    ProtocolError,
    StreamFailure,
    error_from_status,
    error_from_vendor,
    is_context_overflow,
)
from ._events import (
    AssistantStreamEvent,
    Delta,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    event_to_json,
)
from ._eventstream import EventStreamDecoder, EventStreamFrame
from ._fields import as_object, optional_field, required_field
from ._handoff import (
    IMAGE_OMITTED_TEXT,
    id_normalizer,
    is_same_model,
    prepare_messages,
    sanitize_surrogates,
)
from ._json import ArgumentsError, parse_arguments, parse_partial_json
from ._jsonl import HistoryFormatError, Record, dump_messages, load_messages, messages_only
from ._models import Model, ModelPrices, get_model, list_models, register_model
from ._options import THINKING_BUDGETS, ReasoningEffort, StreamOptions
from ._registry import (
    ProviderEntry,
    StreamFunction,
    api_key_env,
    complete,
    get_provider,
    list_providers,
    register_provider,
    stream,
    unregister_providers,
)
from ._sse import Decoder, Frame, NDJSONBytesDecoder, SSEBytesDecoder
from ._stream import AssistantStream
from ._sync import SyncStream, complete_sync, stream_sync
from ._tokens import (
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
    fits_context,
)
from ._tools import (
    TOOL_ERROR_PREFIX,
    RepairedHistory,
    ToolPairAudit,
    audit_tool_pairs,
    fail_truncated_tool_calls,
    function_tools,
    repair_tool_pairs,
)
from ._types import (
    KEEP_UNKNOWN_BLOCKS,
    AssistantMessage,
    Context,
    Cost,
    ErrorKind,
    ImageContent,
    Message,
    StopReason,
    StreamError,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserMessage,
)
from ._wire import Translator, WireAPI, WireRequest, parse_json

__version__ = "0.1.0"

__all__ = [
    "IMAGE_OMITTED_TEXT",
    "KEEP_UNKNOWN_BLOCKS",
    "OVERFLOW_PATTERNS",
    "THINKING_BUDGETS",
    "TOOL_ERROR_PREFIX",
    "ArgumentsError",
    "Assembler",
    "AssistantMessage",
    "AssistantStream",
    "AssistantStreamEvent",
    "Context",
    "Cost",
    "CostContext",
    "Decoder",
    "Delta",
    "ErrorKind",
    "EventStreamDecoder",
    "EventStreamFrame",
    "Frame",
    "HistoryFormatError",
    "ImageContent",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelPrices",
    "NDJSONBytesDecoder",
    "ProtocolError",
    "ProviderEntry",
    "ReasoningEffort",
    "Record",
    "RepairedHistory",
    "SSEBytesDecoder",
    "StopReason",
    "StopRule",
    "StreamError",
    "StreamFailure",
    "StreamFunction",
    "StreamOptions",
    "SyncStream",
    "TextContent",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingContent",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolPairAudit",
    "ToolResultMessage",
    "Translator",
    "UnknownContent",
    "Usage",
    "UserMessage",
    "WireAPI",
    "WireRequest",
    "__version__",
    "api_key_env",
    "as_object",
    "audit_tool_pairs",
    "complete",
    "complete_sync",
    "compute_cost",
    "dump_messages",
    "error_from_status",
    "error_from_vendor",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "event_to_json",
    "fail_truncated_tool_calls",
    "fits_context",
    "function_tools",
    "get_model",
    "get_provider",
    "id_normalizer",
    "is_context_overflow",
    "is_same_model",
    "list_models",
    "list_providers",
    "load_messages",
    "long_cache_honored",
    "messages_only",
    "optional_field",
    "parse_arguments",
    "parse_json",
    "parse_partial_json",
    "prepare_messages",
    "register_model",
    "register_provider",
    "repair_tool_pairs",
    "required_field",
    "sanitize_surrogates",
    "stream",
    "stream_sync",
    "unregister_providers",
    "vendor_error_fields",
]
