"""stream-core: one streaming interface to every major LLM vendor.

async with stream(model, context, options) as s:
    async for event in s: ...
    message = await s.result()

Without an event loop: `for event in stream_sync(...)`, `complete_sync(...)`.

This is the harness authors' door. Provider authors import their machinery from
`stream_core.provider`; test helpers are in `stream_core.testing`.
"""

import importlib as _importlib

from . import _layout

# Not `typing.TYPE_CHECKING`: importing typing costs `import stream_core` some 40 million
# instructions. Type checkers take any name `TYPE_CHECKING` as true; deleted at the end.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._blocks import SERVER_TOOL_KINDS
    from ._capabilities import Capabilities
    from ._connections import configure_connections
    from ._errors import is_context_overflow
    from ._events import (
        AssistantStreamEvent,
        BlockDelta,
        BlockEnd,
        BlockStart,
        CitationAdded,
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
    from ._history.compaction import compact, compaction_cut
    from ._history.jsonl import (
        HistoryFormatError,
        Record,
        dump_messages,
        load_messages,
        messages_only,
        model_messages,
    )
    from ._history.roles import BashExecution, BranchSummary, CompactionSummary
    from ._history.tokens import (
        estimate_context_tokens,
        estimate_message_tokens,
        estimate_tokens,
        fits_context,
    )
    from ._kinds import BLOCK_KINDS, BlockKind
    from ._limits.limiter import (
        LimitsView,
        budget_spent,
        clear_limits,
        configure_limits,
        hold_budget,
        inspect_limits,
        settle_budget,
        tallies,
        tally,
    )
    from ._limits.stores import LimitSettlement, LimitStore
    from ._models import (
        Model,
        ModelPrices,
        list_models,
        register_model,
    )
    from ._options import (
        THINKING_BUDGETS,
        PayloadHook,
        ReasoningEffort,
        StreamOptions,
        ToolChoice,
    )
    from ._output import OutputMode
    from ._pipeline.stream import AssistantStream
    from ._registry import (
        ProviderEntry,
        StreamFunction,
        api_key_env,
        complete,
        get_model,
        list_providers,
        stream,
    )
    from ._retirements import Retirement, retirement
    from ._routes.route import Deployment, Route, RouteStrategy
    from ._routes.stream import RouteStream
    from ._sync import SyncStream, complete_sync, stream_sync
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
        ApprovalRequest,
        ApprovalResponse,
        AssistantMessage,
        Attempt,
        Citation,
        Context,
        Cost,
        CustomMessage,
        ErrorKind,
        FileContent,
        ImageContent,
        Message,
        ModelMessage,
        RateLimit,
        ServerTool,
        ServerToolCall,
        ServerToolResult,
        Source,
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
        VendorContent,
        register_message_role,
        total_usage,
    )

# In a source checkout `providers/` and `contract_tests/` sit beside this package; the wheel
# ships them inside it. Either way they import as `stream_core.providers` and
# `stream_core.contract_tests` (and nothing else at the repo root imports under the package).
_layout.install_checkout_finder(__path__)

__version__ = "0.1.0"
"""The installed version of stream-core."""

# `import stream_core` loads none of these: each module is imported when one of its names is
# first used (pydantic's model machinery alone costs more than `import httpx`), so a program
# pays for what it uses. Type checkers read the imports above.
_LAZY: dict[str, tuple[str, ...]] = {
    "_capabilities": ("Capabilities",),
    "_connections": ("configure_connections",),
    "_errors": ("is_context_overflow",),
    "_blocks": ("SERVER_TOOL_KINDS",),
    "_kinds": ("BLOCK_KINDS", "BlockKind"),
    "_events": (
        "AssistantStreamEvent",
        "BlockDelta",
        "BlockEnd",
        "BlockStart",
        "CitationAdded",
        "Delta",
        "MessageEnd",
        "MessageStart",
        "MessageUpdate",
        "TextDelta",
        "TextEnd",
        "TextStart",
        "ThinkingDelta",
        "ThinkingEnd",
        "ThinkingStart",
        "ToolCallDelta",
        "ToolCallEnd",
        "ToolCallStart",
        "event_to_json",
    ),
    "_history.compaction": ("compact", "compaction_cut"),
    "_history.jsonl": (
        "HistoryFormatError",
        "Record",
        "dump_messages",
        "load_messages",
        "messages_only",
        "model_messages",
    ),
    "_models": ("Model", "ModelPrices", "list_models", "register_model"),
    "_options": (
        "THINKING_BUDGETS",
        "PayloadHook",
        "ReasoningEffort",
        "StreamOptions",
        "ToolChoice",
    ),
    "_output": ("OutputMode",),
    "_registry": (
        "ProviderEntry",
        "StreamFunction",
        "api_key_env",
        "complete",
        "get_model",
        "list_providers",
        "stream",
    ),
    "_history.roles": ("BashExecution", "BranchSummary", "CompactionSummary"),
    "_limits.limiter": (
        "LimitsView",
        "budget_spent",
        "clear_limits",
        "configure_limits",
        "hold_budget",
        "inspect_limits",
        "settle_budget",
        "tallies",
        "tally",
    ),
    "_limits.stores": ("LimitSettlement", "LimitStore"),
    "_pipeline.stream": ("AssistantStream",),
    "_retirements": ("Retirement", "retirement"),
    "_routes.route": ("Deployment", "Route", "RouteStrategy"),
    "_routes.stream": ("RouteStream",),
    "_sync": ("SyncStream", "complete_sync", "stream_sync"),
    "_history.tokens": (
        "estimate_context_tokens",
        "estimate_message_tokens",
        "estimate_tokens",
        "fits_context",
    ),
    "_tools": (
        "RepairedHistory",
        "ToolHandler",
        "ToolPairAudit",
        "audit_tool_pairs",
        "check_tool_call",
        "check_tool_calls",
        "execute_tool_calls",
        "execute_tool_calls_sync",
        "fail_truncated_tool_calls",
        "repair_tool_pairs",
    ),
    "_types": (
        "KEEP_UNKNOWN_BLOCKS",
        "ApprovalRequest",
        "ApprovalResponse",
        "Citation",
        "FileContent",
        "ServerTool",
        "ServerToolCall",
        "ServerToolResult",
        "Source",
        "VendorContent",
        "AssistantMessage",
        "Attempt",
        "RateLimit",
        "Context",
        "Cost",
        "CustomMessage",
        "ErrorKind",
        "ImageContent",
        "Message",
        "ModelMessage",
        "StopReason",
        "StreamError",
        "TextContent",
        "ThinkingContent",
        "Tool",
        "ToolCall",
        "ToolResultMessage",
        "UnknownContent",
        "Usage",
        "UserMessage",
        "register_message_role",
        "total_usage",
    ),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "BLOCK_KINDS",
    "KEEP_UNKNOWN_BLOCKS",
    "SERVER_TOOL_KINDS",
    "THINKING_BUDGETS",
    "ApprovalRequest",
    "ApprovalResponse",
    "AssistantMessage",
    "AssistantStream",
    "AssistantStreamEvent",
    "Attempt",
    "BashExecution",
    "BlockDelta",
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "BranchSummary",
    "Capabilities",
    "Citation",
    "CitationAdded",
    "CompactionSummary",
    "Context",
    "Cost",
    "CustomMessage",
    "Delta",
    "Deployment",
    "ErrorKind",
    "FileContent",
    "HistoryFormatError",
    "ImageContent",
    "LimitSettlement",
    "LimitStore",
    "LimitsView",
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
    "RateLimit",
    "ReasoningEffort",
    "Record",
    "RepairedHistory",
    "Retirement",
    "Route",
    "RouteStrategy",
    "RouteStream",
    "ServerTool",
    "ServerToolCall",
    "ServerToolResult",
    "Source",
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
    "VendorContent",
    "__version__",
    "api_key_env",
    "audit_tool_pairs",
    "budget_spent",
    "check_tool_call",
    "check_tool_calls",
    "clear_limits",
    "compact",
    "compaction_cut",
    "complete",
    "complete_sync",
    "configure_connections",
    "configure_limits",
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
    "hold_budget",
    "inspect_limits",
    "is_context_overflow",
    "list_models",
    "list_providers",
    "load_messages",
    "messages_only",
    "model_messages",
    "register_message_role",
    "register_model",
    "repair_tool_pairs",
    "retirement",
    "settle_budget",
    "stream",
    "stream_sync",
    "tallies",
    "tally",
    "total_usage",
]


if not TYPE_CHECKING:
    # Hidden from type checkers, so a typo on this module is still an error for them.

    def __getattr__(name: str) -> object:
        module = _HOME.get(name)
        if module is not None:
            value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
            if module == "_types":
                # The ready-made roles join the data model's role table before it is read.
                _importlib.import_module(f"{__name__}._history.roles")
            globals()[name] = value  # later lookups are plain module attributes
            return value
        # Names that moved to the provider door stay reachable here for one release (0.1.x),
        # with a warning naming their new home; 0.2 drops them. mypy points at the new home.
        if not name.startswith("_"):
            # Not `from . import provider`: that asks this function for `provider` again.
            provider = _importlib.import_module(f"{__name__}.provider")
            if name == "provider":
                return provider
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

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


del TYPE_CHECKING
