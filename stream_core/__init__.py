"""stream-core: one streaming interface to every major LLM vendor.

async with stream(model, context, options) as s:
    async for event in s: ...
    message = await s.result()

Without an event loop: `for event in stream_sync(...)`, `complete_sync(...)`.

This is the harness authors' door. Provider authors import their machinery from
`stream_core.provider`; test helpers are in `stream_core.testing`.
"""

import typing as _typing

from . import _layout
from ._connections import configure_connections
from ._errors import is_context_overflow
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
from ._jsonl import (
    HistoryFormatError,
    Record,
    dump_messages,
    load_messages,
    messages_only,
    model_messages,
)
from ._models import Model, ModelPrices, get_model, list_models, register_model
from ._options import THINKING_BUDGETS, PayloadHook, ReasoningEffort, StreamOptions, ToolChoice
from ._output import OutputMode
from ._registry import (
    ProviderEntry,
    StreamFunction,
    api_key_env,
    complete,
    list_providers,
    stream,
)
from ._roles import BashExecution, BranchSummary, CompactionSummary
from ._stream import AssistantStream
from ._sync import SyncStream, complete_sync, stream_sync
from ._tokens import (
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
    fits_context,
)
from ._tools import (
    RepairedHistory,
    ToolHandler,
    ToolPairAudit,
    audit_tool_pairs,
    check_tool_call,
    check_tool_calls,
    execute_tool_calls,
    execute_tool_calls_sync,
    fail_truncated_tool_calls,
    repair_tool_pairs,
)
from ._types import (
    KEEP_UNKNOWN_BLOCKS,
    AssistantMessage,
    Context,
    Cost,
    CustomMessage,
    ErrorKind,
    ImageContent,
    Message,
    ModelMessage,
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
    register_message_role,
    total_usage,
)

# In a source checkout `providers/` and `contract_tests/` sit beside this package; the wheel
# ships them inside it. Either way they import as `stream_core.providers` and
# `stream_core.contract_tests` (and nothing else at the repo root imports under the package).
_layout.install_checkout_finder(__path__)

__version__ = "0.1.0"
"""The installed version of stream-core."""

__all__ = [
    "KEEP_UNKNOWN_BLOCKS",
    "THINKING_BUDGETS",
    "AssistantMessage",
    "AssistantStream",
    "AssistantStreamEvent",
    "BashExecution",
    "BranchSummary",
    "CompactionSummary",
    "Context",
    "Cost",
    "CustomMessage",
    "Delta",
    "ErrorKind",
    "HistoryFormatError",
    "ImageContent",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelMessage",
    "ModelPrices",
    "OutputMode",
    "PayloadHook",
    "ProviderEntry",
    "ReasoningEffort",
    "Record",
    "RepairedHistory",
    "StopReason",
    "StreamError",
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
    "ToolChoice",
    "ToolHandler",
    "ToolPairAudit",
    "ToolResultMessage",
    "UnknownContent",
    "Usage",
    "UserMessage",
    "__version__",
    "api_key_env",
    "audit_tool_pairs",
    "check_tool_call",
    "check_tool_calls",
    "complete",
    "complete_sync",
    "configure_connections",
    "dump_messages",
    "estimate_context_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "event_to_json",
    "execute_tool_calls",
    "execute_tool_calls_sync",
    "fail_truncated_tool_calls",
    "fits_context",
    "get_model",
    "is_context_overflow",
    "list_models",
    "list_providers",
    "load_messages",
    "messages_only",
    "model_messages",
    "register_message_role",
    "register_model",
    "repair_tool_pairs",
    "stream",
    "stream_sync",
    "total_usage",
]


if not _typing.TYPE_CHECKING:
    # Names that moved to the provider door stay reachable here for one release (0.1.x),
    # with a warning naming their new home; 0.2 drops them. Hidden from type checkers, so a
    # typo on this module is still an error and mypy points at the new home.
    def __getattr__(name: str) -> object:
        from . import provider

        if name in provider.__all__:
            import warnings

            warnings.warn(
                f"stream_core.{name} moved to stream_core.provider.{name} (the provider "
                "authors' door); the top-level name goes in 0.2",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(provider, name)
        raise AttributeError(f"module 'stream_core' has no attribute {name!r}")
