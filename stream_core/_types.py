"""The data model: content blocks, messages, usage, errors, context, tools.

Messages are a union discriminated by `role`; assistant content is a list of blocks
discriminated by `type`. Everything here is a pydantic v2 model so a history
round-trips through JSON exactly (`model_dump(mode="json")` then `model_validate`).
"""

from __future__ import annotations

import time
import typing
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    PrivateAttr,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    Tag,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "KEEP_UNKNOWN_BLOCKS",
    "ApprovalRequest",
    "ApprovalResponse",
    "AssistantContent",
    "AssistantMessage",
    "Citation",
    "Context",
    "Cost",
    "CustomMessage",
    "ErrorKind",
    "FileContent",
    "ImageContent",
    "Message",
    "ModelMessage",
    "ServerTool",
    "ServerToolCall",
    "ServerToolResult",
    "Source",
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
    "VendorContent",
    "expand_messages",
    "register_message_role",
    "total_usage",
]


from ._blocks import (
    ApprovalRequest,
    ApprovalResponse,
    FileContent,
    ServerToolCall,
    ServerToolResult,
    VendorContent,
)
from ._content import (
    KEEP_UNKNOWN_BLOCKS,
    Citation,
    ImageContent,
    Source,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
    _Model,
    _now_ms,
)
from ._kinds import AssistantContent, UserContent
from ._server_tools import ServerTool
from ._usage import Cost, ErrorKind, StopReason, StreamError, Usage

# --- messages ---------------------------------------------------------------------------


class UserMessage(_Model):
    """A user turn: a string, or a list of text and image blocks."""

    role: Literal["user"] = "user"
    content: str | list[UserContent]
    timestamp: int = Field(default_factory=_now_ms)


class RateLimit(_Model):
    """One rate limit as the vendor reported it with this response
    (`AssistantMessage.limits`): `name` is `requests`, `tokens`, `input_tokens` or
    `output_tokens`; each figure is None when the vendor did not send it (or sent it
    unreadable)."""

    name: str
    limit: int | None = None
    remaining: int | None = None
    resets_at: float | None = None
    """Unix time (seconds) at which the limit is whole again."""

    def resets_in(self, now: float | None = None) -> float | None:
        """Seconds until the reset (0 once past), from `now` (default: the clock now)."""
        if self.resets_at is None:
            return None
        return max(0.0, self.resets_at - (time.time() if now is None else now))


class Attempt(_Model):
    """One deployment a `Route` call tried (`AssistantMessage.attempts`), in order."""

    provider: str
    model: str
    host: str
    """The host of the deployment's base URL (never a key)."""
    kind: ErrorKind | None = None
    """How it failed; None: it served the call."""
    status_code: int | None = None
    retry_after: float | None = None
    """Seconds the vendor asked to wait, if it said."""
    ms: float = 0.0
    """Milliseconds from sending to the end of the attempt (0 when not sent)."""
    content_started: bool = False
    """Content had reached the caller: nothing moved to another deployment after this."""
    sent: bool = True
    """False: skipped unsent (its window could not hold the request, or it could not
    take the call's options)."""


class AssistantMessage(_Model):
    """The model's answer, as every provider returns it: the content blocks (text, thinking,
    tool calls) in order, `usage`, the normalized `stop_reason` and the vendor's own
    `raw_stop_reason`, `error` when it failed (failures are data, never raised), and the
    call's facts (`response_model`, `request_id`, `ttft_ms`, `duration_ms`). Append it to
    `Context.messages` as it is to continue the conversation, with any vendor."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str
    provider: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    raw_stop_reason: str | None = None
    error: StreamError | None = None
    response_id: str | None = None
    response_model: str | None = None
    """The model id the vendor says served the call (it may differ from `model`, the id
    requested: an alias resolved to a snapshot, a router's choice)."""
    request_id: str | None = None
    """The vendor's request id (response headers), the one its support asks for."""
    ttft_ms: float | None = None
    """Milliseconds from sending the request (retries included) to the first content."""
    duration_ms: float | None = None
    """Milliseconds from sending the request to the end of the message."""
    # Left out of dumps while unset, so histories written before these fields existed
    # are written back byte for byte.
    output: Any = Field(default=None, exclude_if=lambda v: v is None)
    """With `StreamOptions.output_schema`: the answer parsed from the text (an instance of
    the model class, when one was given; JSONL keeps it as JSON). None when the message
    stopped otherwise (`length`: never a partial object) or the answer did not parse
    (`error` of kind `invalid_output`, the text kept)."""
    output_mode: Literal["native", "json_object", "tool"] | None = Field(
        default=None, exclude_if=lambda v: v is None
    )
    """How the structured answer was asked for: the vendor's schema mode, its JSON mode with
    the schema in the system prompt, or one forced tool (models without either)."""
    attempts: list[Attempt] | None = Field(default=None, exclude_if=lambda v: v is None)
    """With a `Route`: one record per deployment tried, the serving one last (None for a
    call to one model)."""
    limits: list[RateLimit] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The rate limits the vendor reported with this answer (remaining, limit, reset), for
    "resets in 42 s"; None when it reported none."""
    container: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The vendor's code-execution container as it reported it (Anthropic: `id`,
    `expires_at`, `skills`): the next request to the same API reuses it."""
    timestamp: int = Field(default_factory=_now_ms)

    def text(self) -> str:
        """The text blocks joined, for the common case of reading the answer."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    def tool_calls(self) -> list[ToolCall]:
        """The tool-call blocks, in order (truncated ones included: check `truncated`)."""
        return [b for b in self.content if isinstance(b, ToolCall)]

    def citations(self) -> list[Citation]:
        """Every citation of the text blocks, in order."""
        return [c for b in self.content if isinstance(b, TextContent) for c in b.citations or ()]

    def files(self) -> list[FileContent]:
        """The files the model or its server tools made (generated images, ...)."""
        return [b for b in self.content if isinstance(b, FileContent)]


class ToolResultMessage(_Model):
    """The answer to one tool call: `tool_call_id` and `tool_name` of the call, the result as
    text and image blocks, and `is_error` when the tool failed (the model sees it as an
    error and may try again)."""

    role: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    """The result's blocks. A string is accepted, as for `UserMessage`, and becomes one
    `TextContent`; such a message is written back as the string it was given (a record
    loaded from JSONL keeps its form)."""
    is_error: bool = False
    details: Any = None
    """Anything the harness wants to keep with the result; never sent to the model."""
    timestamp: int = Field(default_factory=_now_ms)

    _text_form: bool = PrivateAttr(default=False)

    if TYPE_CHECKING:
        # What a type checker sees: `content` may be given as a string, like a user's.
        def __init__(
            self,
            *,
            tool_call_id: str,
            tool_name: str,
            content: str | list[UserContent] = ...,
            is_error: bool = ...,
            details: Any = ...,
            timestamp: int = ...,
            role: Literal["tool_result"] = ...,
            **extra: Any,
        ) -> None: ...

    @model_validator(mode="wrap")
    @classmethod
    def _accept_text(cls, data: Any, handler: Any) -> Any:
        text = data.get("content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            return handler(data)
        message = handler({**data, "content": [TextContent(text=text)]})
        message._text_form = True
        return message

    def text(self) -> str:
        """The result's text blocks joined (images left out), as the model reads them."""
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    @field_serializer("content", mode="wrap")
    def _write_text(self, content: list[Any], handler: SerializerFunctionWrapHandler) -> Any:
        if self._text_form and len(content) == 1:
            block = content[0]
            if (
                isinstance(block, TextContent)
                and block.text_signature is None
                and not block.model_extra
            ):
                return block.text
        return handler(content)


class _Layout:
    """The keys of a record as it was loaded, in their order. Not part of the record's value:
    equal to any other layout (and to none), so a loaded record equals the one written."""

    __slots__ = ("keys",)

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, _Layout)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"_Layout({self.keys!r})"


class CustomMessage(_Model):
    """The base of a message role of the harness's own (a compaction summary, a shell command
    the user ran, ...): a record kept in the history as it is, and sent to the model as the
    built-in messages `to_messages()` returns.

    A subclass declares `role: Literal["my_role"] = "my_role"` and its fields, overrides
    `to_messages`, and is registered with `register_message_role` (a class decorator). Then
    `Context` takes it beside the built-in messages, every provider sends its conversion,
    `load_messages` returns it as an instance and `dump_messages` writes it back (unknown
    fields kept, like the built-in messages).
    """

    role: str
    _layout: _Layout | None = PrivateAttr(default=None)

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        self._layout = None  # made in code, not loaded: written with all its fields

    @model_validator(mode="wrap")
    @classmethod
    def _remember_layout(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        message = handler(data)
        if isinstance(data, dict) and isinstance(message, CustomMessage):
            message._layout = _Layout(tuple(str(k) for k in data))
        return message

    @model_serializer(mode="wrap")
    def _dump_as_loaded(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A record made from data (a history line) is written back with the keys it had, in
        # their order: a field it lacked is not added with its default, so a harness's own
        # records round-trip byte for byte. Fields set since come after them.
        data = handler(self)
        layout = self._layout
        if layout is None or not isinstance(data, dict):
            return data
        position = {k: n for n, k in enumerate(layout.keys)}
        late = len(position)
        aliases: dict[str, str] = {
            name: field.alias for name, field in type(self).model_fields.items() if field.alias
        }
        order: list[tuple[int, str]] = []
        for key in data:
            at = position.get(key, position.get(aliases.get(key) or key, late))
            if at < late or key in self.model_fields_set or key in (self.__pydantic_extra__ or ()):
                order.append((at, key))
        order.sort(key=lambda entry: entry[0])  # stable: keys set since keep their order
        return {key: data[key] for _, key in order}

    def to_messages(self) -> Sequence[Message]:
        """What the model reads in place of this record: built-in messages (or other
        registered records, converted in turn). Called when a request is built, so the same
        record must always give the same messages (prompt caches match on them)."""
        raise NotImplementedError(f"{type(self).__name__} must define to_messages()")


ModelMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""A message a model reads: what providers send, and what `CustomMessage.to_messages`
returns."""

Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | CustomMessage
"""Any message of a history: the built-in ones and records of a registered role. A plain
union: `list[Message]` annotates a list mixing kinds (mypy infers a private base class for
an unannotated one), and `isinstance(x, Message)` tells a message from an unknown
`load_messages` record."""

_BUILTIN_ROLES = ("user", "assistant", "tool_result")
_ROLES: dict[str, type[CustomMessage]] = {}
_C = TypeVar("_C", bound=CustomMessage)
_MAX_EXPANSION_DEPTH = 8


def register_message_role(cls: type[_C]) -> type[_C]:
    """Register a `CustomMessage` subclass under its role (usable as a class decorator).

    Raises TypeError when `cls` is not such a class, its `role` is not one `Literal`
    string, or it does not define `to_messages`; ValueError when the role is a built-in one
    or another class has it. Registering a class again (or a redefinition of the same class,
    e.g. a notebook cell run twice) replaces it.
    """
    if not (isinstance(cls, type) and issubclass(cls, CustomMessage)) or cls is CustomMessage:
        raise TypeError(f"register_message_role takes a CustomMessage subclass, not {cls!r}")
    name = f"{cls.__module__}.{cls.__qualname__}"
    field = cls.model_fields.get("role")
    values = typing.get_args(field.annotation) if field is not None else ()
    if (
        field is None
        or typing.get_origin(field.annotation) is not Literal
        or len(values) != 1
        or not isinstance(values[0], str)
        or not values[0]
    ):
        raise TypeError(
            f"{name}: declare its role as one string, e.g. `role: Literal['my_role'] = 'my_role'`"
        )
    role: str = values[0]
    if role in _BUILTIN_ROLES:
        raise ValueError(f"{name}: {role!r} is a built-in message role")
    if cls.to_messages is CustomMessage.to_messages:
        raise TypeError(f"{name} must define to_messages()")
    existing = _ROLES.get(role)
    if existing is not None and f"{existing.__module__}.{existing.__qualname__}" != name:
        raise ValueError(
            f"message role {role!r} is already registered to "
            f"{existing.__module__}.{existing.__qualname__}"
        )
    _ROLES[role] = cls
    return cls


def registered_role(role: object) -> type[CustomMessage] | None:
    """The class registered for `role`, or None. stream-core's ready-made roles (`_history.roles`)
    are registered by whatever reads messages from outside (the call's checks, `_history.jsonl`,
    the package's door), each importing that module: this one never does."""
    return _ROLES.get(role) if isinstance(role, str) else None


def _role_list() -> str:
    registered = ", ".join(sorted(_ROLES)) or "none"
    return f"built-in: {', '.join(_BUILTIN_ROLES)}; registered: {registered}"


def _role_tag(value: Any) -> str | None:
    role = value.get("role") if isinstance(value, dict) else getattr(value, "role", None)
    if not isinstance(role, str):
        return None  # no tag: pydantic names the missing discriminator
    return role if role in _BUILTIN_ROLES else "custom"


def _custom_message(value: Any, info: ValidationInfo) -> CustomMessage:
    role = value.get("role") if isinstance(value, dict) else getattr(value, "role", None)
    cls = registered_role(role)
    if cls is None:
        raise PydanticCustomError(
            "unknown_role",
            "unknown message role {role} ({roles}; register_message_role adds one)",
            {"role": repr(role), "roles": _role_list()},
        )
    if isinstance(value, cls):
        return value  # like a built-in message instance: kept, not copied
    if isinstance(value, CustomMessage):
        raise PydanticCustomError(
            "unregistered_class",
            "a {cls} has role {role}, which is registered to {registered}",
            {
                "cls": type(value).__name__,
                "role": repr(role),
                "registered": cls.__qualname__,
            },
        )
    return cls.model_validate(value, context=info.context)


_Tagged = Annotated[
    Annotated[UserMessage, Tag("user")]
    | Annotated[AssistantMessage, Tag("assistant")]
    | Annotated[ToolResultMessage, Tag("tool_result")]
    # Serialized as the instance's own class (all its fields), not as the base.
    | Annotated[SerializeAsAny[CustomMessage], PlainValidator(_custom_message), Tag("custom")],
    Discriminator(_role_tag),
]


def total_usage(records: Iterable[object]) -> Usage:
    """The usage of a whole conversation: every `AssistantMessage` in `records` summed, with
    the usage a record carries for the calls it replaced (`CompactionSummary.usage`); other
    messages and the plain-dict records of `load_messages` are skipped.

    Token counts add up. The cost is the sum of the messages' costs, or None as soon as one
    message's cost is None (its price unknown): unknown is not zero, so a total cost is
    given only when every call was priced. No assistant message: zero tokens, zero cost."""
    total = Usage(cost=Cost())
    for record in records:
        if isinstance(record, AssistantMessage):
            total = total + record.usage
        elif isinstance(record, CustomMessage):
            # A record that replaced calls (a compaction summary) carries their usage.
            carried = getattr(record, "usage", None)
            if isinstance(carried, Usage):
                total = total + carried
    return total


# Core schemas are built at first use, not at import (most programs validate few of these).
_DEFERRED = ConfigDict(defer_build=True)
MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(_Tagged, config=_DEFERRED)
MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[_Tagged], config=_DEFERRED)
_ModelTagged = Annotated[ModelMessage, Field(discriminator="role")]
MODEL_MESSAGE_ADAPTER: TypeAdapter[ModelMessage] = TypeAdapter(_ModelTagged, config=_DEFERRED)


def expand_messages(messages: Sequence[Message], where: str = "messages") -> list[ModelMessage]:
    """`messages` with every record of a registered role replaced by its `to_messages()`
    (converted again while they hold such records), in a new list; built-in messages are
    the same objects. Raises TypeError naming `where[index]` when a conversion returns
    something that is not a message, or keeps returning records of its own."""
    out: list[ModelMessage] = []
    for i, m in enumerate(messages):
        if isinstance(m, CustomMessage):
            out.extend(expand_message(m, f"{where}[{i}]"))
        else:
            out.append(m)
    return out


def expand_message(message: CustomMessage, where: str, depth: int = 0) -> list[ModelMessage]:
    """One record's conversion (see `expand_messages`); errors name `where`."""
    name = type(message).__name__
    if depth >= _MAX_EXPANSION_DEPTH:
        raise TypeError(
            f"{where}: {name}.to_messages() still returns records of a custom role after "
            f"{_MAX_EXPANSION_DEPTH} conversions (a cycle?)"
        )
    produced = message.to_messages()
    if isinstance(produced, (str, bytes, BaseModel)) or not isinstance(produced, Sequence):
        raise TypeError(
            f"{where}: {name}.to_messages() must return a list of messages, "
            f"not {type(produced).__name__}"
        )
    out: list[ModelMessage] = []
    for item in produced:
        if isinstance(item, CustomMessage):
            out.extend(expand_message(item, where, depth + 1))
        elif isinstance(item, (UserMessage, AssistantMessage, ToolResultMessage)):
            out.append(item)
        else:
            raise TypeError(
                f"{where}: {name}.to_messages() returned a {type(item).__name__}, not a message"
            )
    return out


# --- tools and context ------------------------------------------------------------------


class Tool(_Model):
    """A tool the model may call: `name`, a `description` the model reads to decide when to
    call it, and `parameters`, the JSON Schema of its arguments object. `from_model` builds
    one from a pydantic model."""

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""

    @classmethod
    def from_model(
        cls, model: type[BaseModel], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool whose arguments are `model`: parameters from its JSON Schema, name from the
        class (or `name=`), description from its docstring (or `description=`).

        `name=` lets one pydantic class serve as several tools, or give a tool a name that
        is not a valid class name (`get-weather`); `description=""` sends none.
        """
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            shown = type(model).__name__ if not isinstance(model, type) else model.__name__
            raise TypeError(
                f"Tool.from_model takes a pydantic model class (class Args(BaseModel): ...), "
                f"not {shown}; for a JSON Schema dict use Tool(name=..., description=..., "
                "parameters=schema)"
            )
        schema = model.model_json_schema()
        schema.pop("title", None)
        doc = description if description is not None else (model.__doc__ or "").strip()
        schema.pop("description", None)
        return cls(name=name or model.__name__, description=doc, parameters=schema)


def _tool_tag(value: Any) -> str:
    if isinstance(value, ServerTool):
        return "server"
    if isinstance(value, dict) and (
        value.get("type") == "server_tool" or ("kind" in value and "name" not in value)
    ):
        return "server"
    return "function"


_AnyTool = Annotated[
    Annotated[Tool, Tag("function")] | Annotated[ServerTool, Tag("server")],
    Discriminator(_tool_tag),
]


class Context(BaseModel):
    """What a call sends: the system prompt, the history and the tools.

    `messages` holds built-in messages and records of registered roles (`CustomMessage`);
    each of those is sent as its `to_messages()`. A role nobody registered raises, naming
    the index."""

    # Forbid unknown fields: a typo such as `system=` must fail at the call, naming the field.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    system_prompt: str | None = None
    messages: list[_Tagged] = Field(default_factory=list)
    tools: list[_AnyTool] | None = None
    """Function tools (the harness runs them) and server tools (the vendor runs them)."""

    if typing.TYPE_CHECKING:
        # Any sequence of messages: `list[ModelMessage]` (from `model_messages`) too.
        def __init__(
            self,
            *,
            system_prompt: str | None = None,
            messages: Sequence[Message] = ...,
            tools: Sequence[Tool | ServerTool] | None = None,
        ) -> None: ...
