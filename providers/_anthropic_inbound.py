"""A Messages API request read back into a `Context` and `StreamOptions`: the tested inverse
of `anthropic._build_request` (tests/gateway/test_dialect_anthropic.py builds, parses and
compares), reading the same tables (`TOOL_CHOICES`, `_anthropic_blocks`' tool types and
kinds, `ADAPTIVE_EFFORTS`, `THINKING_BUDGETS`).

- `system` (a string or text blocks, joined by a blank line) -> `system_prompt`, and
  after it the text of each `{"role": "system"}` turn of `messages` (Anthropic's
  mid-conversation system messages, which Claude Code sends: their place in the history
  is not kept, a documented degradation);
- `messages`: user text, `image` (base64 -> `ImageContent`; by URL or file id ->
  `FileContent`), `document` (PDF or plain text by data, URL or file id -> `FileContent`,
  `title` its name, `citations.enabled` its `citations`), `tool_result` (-> one
  `ToolResultMessage`, before the rest of its user turn: text, images, documents,
  `is_error`); assistant text with citations, `thinking` with its signature,
  `redacted_thinking`, `tool_use` (with `caller`), server tool calls and results
  (`_anthropic_blocks`' readings, the block kept as `raw`), any other block as
  `VendorContent`; any other user block (`search_result`, ...) as `VendorContent` too;
- a `redacted_thinking` block whose `data` starts with `CARRIER_PREFIX` is the gateway's
  state carrier: `Inbound.carriers[index of its message]`, not content;
- `tools`: function tools; the server tools `_anthropic_blocks` builds (exactly as it
  builds them) -> `ServerTool` of their kind, any other -> `ServerTool.native`;
- `tool_choice` (`disable_parallel_tool_use` -> `parallel_tool_calls=False`),
  `max_tokens`, `temperature`, `top_p`, `top_k`, `stop_sequences`, `metadata.user_id`;
- `thinking`: `enabled` with `budget_tokens` -> the effort whose default budget is the
  largest not above it, with that budget in `thinking_budgets` (the builder sends it back
  as it came); `adaptive` -> the effort of `output_config.effort` (`high` without one);
- `output_config.format` / `output_format` (`json_schema`) -> `output_schema`.

`cache_control` is not read anywhere: stream-core places its own breakpoints (the
documented degradation). Top-level fields not read (`context_management`, `container`,
`mcp_servers`, `service_tier`, ...) go to `Inbound.unmodeled` as sent; a field inside
what is read that has no place (a tool's `defer_loading`, a document's `context`,
`output_config.effort` without adaptive thinking) goes there too, under its JSON path
(`tools[2].defer_loading`), so a foreign upstream can refuse it by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stream_core import (
    AssistantMessage,
    Context,
    Message,
    ServerToolCall,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    VendorContent,
)
from stream_core.provider import CARRIER_PREFIX, Inbound, RequestFieldError, StreamFailure

from ._anthropic_blocks import (
    API,
    CALL_TYPES,
    RESULT_SUFFIX,
    TOOL_KINDS,
    read_citation,
    read_result,
)
from ._anthropic_inbound_parts import (
    IGNORED,
    adaptive_effort,
    document,
    effort_for,
    get,
    image,
    obj,
    plain,
    server_tool,
    type_name,
)
from .anthropic import TOOL_CHOICES

__all__ = ["HEADERS", "MODELED", "parse_request"]

PROVIDER = "anthropic"
"""The provider an assistant turn of the client's history is said to come from."""

MODELED = frozenset(
    {
        "model", "messages", "system", "max_tokens", "metadata", "stop_sequences", "stream",
        "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking",
        "output_config", "output_format",
    }
)  # fmt: skip
"""The top-level fields read into the context and options; any other is `unmodeled`."""

HEADERS = ("anthropic-beta", "anthropic-version")
"""The request headers the dialect defines, kept for a same-dialect upstream."""

_CHOICES = {v["type"]: k for k, v in TOOL_CHOICES.items()}
"""Anthropic's `tool_choice.type` -> ours (`tool`, with a name, is built apart)."""

_OPTION_FIELDS = {
    "stop": "stop_sequences",
    "metadata": "metadata.user_id",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "tool_choice.disable_parallel_tool_use",
    "thinking_budgets": "thinking.budget_tokens",
    "reasoning": "thinking",
    "output_schema": "output_config.format.schema",
}
"""A `StreamOptions` field -> the request field it came from (for errors)."""


def parse_request(body: Mapping[str, Any], headers: Mapping[str, str]) -> Inbound:
    """A client's Messages API request as an `Inbound` (see the module's docstring);
    raises `RequestFieldError` naming the first field it cannot read."""
    return _Reader(body).read(headers)


class _Reader:
    """One request's reading: the messages so far, the calls they made (for the results
    that answer them), what has no place (`unmodeled`) and the carriers found."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.model = ""
        self.messages: list[Message] = []
        self.unmodeled: dict[str, Any] = {}
        self.carriers: dict[int, str] = {}
        self.calls: dict[str, str] = {}
        """A tool call's id -> its tool's name (a result's `tool_name`)."""
        self.late_system: list[str] = []
        """The text of the `system` turns among the messages."""
        self.servers: dict[str, str] = {}
        """A server call's id -> its tool's name (the result's reading needs it)."""

    def read(self, headers: Mapping[str, str]) -> Inbound:
        body = self.body
        self.model = get(body, "model", str, "model", required=True)
        for key, value in body.items():
            if key not in MODELED:
                self.unmodeled[key] = value
        self._messages()
        context = Context(
            system_prompt=self._system(),
            messages=self.messages,
            tools=self._tools() or None,
        )
        options = self._options(context)
        stream = get(body, "stream", bool, "stream") or False
        lowered = {k.lower(): v for k, v in headers.items()}
        return Inbound(
            model=self.model,
            context=context,
            options=options,
            stream=stream,
            unmodeled=self.unmodeled,
            carriers=self.carriers,
            headers={h: lowered[h] for h in HEADERS if h in lowered},
        )

    def _extra(self, o: Mapping[str, Any], known: frozenset[str] | set[str], where: str) -> None:
        """Record the keys of `obj` read nowhere (under their path)."""
        for key, value in o.items():
            if key not in known and key not in IGNORED and value is not None:
                self.unmodeled[f"{where}.{key}"] = value

    # --- system ------------------------------------------------------------------------

    def _system(self) -> str | None:
        """`system` and the text of every `system` turn of `messages` (Anthropic's
        mid-conversation system messages, which Claude Code sends), in order."""
        system = get(self.body, "system", (str, list), "system")
        texts = self._texts(system, "system") + self.late_system
        return "\n\n".join(texts) or None

    def _texts(self, value: str | list[Any] | None, where: str) -> list[str]:
        """A system prompt's text: a string, or text blocks."""
        if value is None or isinstance(value, str):
            return [value] if value else []
        texts = []
        for i, block in enumerate(value):
            at = f"{where}[{i}]"
            block = obj(block, at)
            if block.get("type") != "text":
                raise RequestFieldError(f"{at}.type", "a system prompt holds text blocks only")
            texts.append(get(block, "text", str, f"{at}.text", required=True))
            self._extra(block, {"type", "text"}, at)
        return texts

    # --- messages ----------------------------------------------------------------------

    def _messages(self) -> None:
        raw = get(self.body, "messages", list, "messages", required=True)
        for i, message in enumerate(raw):
            where = f"messages[{i}]"
            message = obj(message, where)
            self._extra(message, {"role", "content"}, where)
            role = message.get("role")
            content = message.get("content")
            if not isinstance(content, (str, list)):
                raise RequestFieldError(
                    f"{where}.content", f"expected a string or an array, got {type_name(content)}"
                )
            if role == "user":
                self._user(content, where)
            elif role == "assistant":
                self._assistant(content, where)
            elif role == "system":
                # A mid-conversation system turn: its text joins the system prompt.
                self.late_system += self._texts(content, f"{where}.content")
            else:
                raise RequestFieldError(
                    f"{where}.role", f"expected user, assistant or system, got {role!r}"
                )

    def _user(self, content: str | list[Any], where: str) -> None:
        if isinstance(content, str):
            self.messages.append(UserMessage(content=content))
            return
        parts: list[Any] = []
        results = 0
        for j, block in enumerate(content):
            at = f"{where}.content[{j}]"
            block = obj(block, at)
            if block.get("type") == "tool_result":
                self.messages.append(self._tool_result(block, at))
                results += 1
            else:
                parts.append(self._user_block(block, at))
        if parts or not results:
            self.messages.append(UserMessage(content=parts))

    def _user_block(self, block: dict[str, Any], where: str) -> Any:
        btype = block.get("type")
        if btype == "text":
            self._extra(block, {"type", "text"}, where)
            return TextContent(text=get(block, "text", str, f"{where}.text", required=True))
        if btype == "image":
            self._extra(block, {"type", "source"}, where)
            return image(block, where)
        if btype == "document":
            return document(block, where)
        if not isinstance(btype, str):
            raise RequestFieldError(f"{where}.type", f"expected a string, got {type_name(btype)}")
        return VendorContent(api=API, data=plain(block))  # search_result, ...: as sent

    def _tool_result(self, block: dict[str, Any], where: str) -> ToolResultMessage:
        self._extra(block, {"type", "tool_use_id", "content", "is_error"}, where)
        call_id = get(block, "tool_use_id", str, f"{where}.tool_use_id", required=True)
        content = get(block, "content", (str, list), f"{where}.content")
        parts: list[Any] = []
        if isinstance(content, str):
            parts = [TextContent(text=content)] if content else []
        elif content is not None:
            for k, item in enumerate(content):
                at = f"{where}.content[{k}]"
                parts.append(self._user_block(obj(item, at), at))
        return ToolResultMessage(
            tool_call_id=call_id,
            tool_name=self.calls.get(call_id, ""),
            content=parts,
            is_error=get(block, "is_error", bool, f"{where}.is_error") or False,
        )

    def _assistant(self, content: str | list[Any], where: str) -> None:
        index = len(self.messages)
        blocks: list[Any] = []
        if isinstance(content, str):
            blocks.append(TextContent(text=content))
        else:
            for j, block in enumerate(content):
                at = f"{where}.content[{j}]"
                try:
                    self._assistant_block(obj(block, at), at, index, blocks)
                except StreamFailure as e:  # a reading of `_anthropic_blocks` refused it
                    raise RequestFieldError(at, str(e)) from None
        calls = any(isinstance(b, ToolCall) for b in blocks)
        self.messages.append(
            AssistantMessage(
                api=API,
                provider=PROVIDER,
                model=self.model,
                content=blocks,
                stop_reason="tool_use" if calls else "stop",
            )
        )

    def _assistant_block(self, block: dict[str, Any], where: str, index: int,
                         out: list[Any]) -> None:  # fmt: skip
        btype = block.get("type")
        if btype == "text":
            self._extra(block, {"type", "text", "citations"}, where)
            cites = get(block, "citations", list, f"{where}.citations") or []
            citations = [
                read_citation(obj(c, f"{where}.citations[{k}]")) for k, c in enumerate(cites)
            ]
            text = get(block, "text", str, f"{where}.text", required=True)
            out.append(TextContent(text=text, citations=citations or None))
        elif btype == "thinking":
            self._extra(block, {"type", "thinking", "signature"}, where)
            out.append(
                ThinkingContent(
                    thinking=get(block, "thinking", str, f"{where}.thinking", required=True),
                    signature=get(block, "signature", str, f"{where}.signature") or None,
                )
            )
        elif btype == "redacted_thinking":
            self._extra(block, {"type", "data"}, where)
            data = get(block, "data", str, f"{where}.data", required=True)
            if data.startswith(CARRIER_PREFIX):
                self.carriers[index] = data  # the gateway's own state, not content
            else:
                out.append(ThinkingContent(signature=data, redacted=True))
        elif btype == "tool_use":
            self._extra(block, {"type", "id", "name", "input", "caller"}, where)
            call = ToolCall(
                id=get(block, "id", str, f"{where}.id", required=True),
                name=get(block, "name", str, f"{where}.name", required=True),
                arguments=get(block, "input", dict, f"{where}.input") or {},
                caller=get(block, "caller", dict, f"{where}.caller"),
            )
            self.calls[call.id] = call.name
            out.append(call)
        elif isinstance(btype, str) and btype in CALL_TYPES:
            raw = plain(block)
            call_id = get(block, "id", str, f"{where}.id") or ""
            name = get(block, "name", str, f"{where}.name") or ""
            self.servers[call_id] = name
            out.append(
                ServerToolCall(
                    id=call_id,
                    name=name,
                    kind="mcp" if btype == "mcp_tool_use" else TOOL_KINDS.get(name),
                    input=block.get("input", {}),
                    caller=get(block, "caller", dict, f"{where}.caller"),
                    raw=raw,
                )
            )
        elif isinstance(btype, str) and btype.endswith(RESULT_SUFFIX):
            answers = get(block, "tool_use_id", str, f"{where}.tool_use_id") or ""
            called = self.servers.get(answers)
            if btype == "mcp_tool_result" and called is None:
                called = "mcp"
            result, files = read_result(plain(block), called)
            if btype == "mcp_tool_result":
                result.kind = "mcp"
            out.append(result)
            out.extend(files)
        elif isinstance(btype, str):
            out.append(VendorContent(api=API, data=plain(block)))
        else:
            raise RequestFieldError(f"{where}.type", f"expected a string, got {type_name(btype)}")

    # --- tools -------------------------------------------------------------------------

    def _tools(self) -> list[Any]:
        tools = get(self.body, "tools", list, "tools") or []
        out: list[Any] = []
        for i, tool in enumerate(tools):
            where = f"tools[{i}]"
            tool = obj(tool, where)
            ttype = get(tool, "type", str, f"{where}.type")
            if ttype is None or ttype == "custom":
                self._extra(tool, {"type", "name", "description", "input_schema"}, where)
                out.append(
                    Tool(
                        name=get(tool, "name", str, f"{where}.name", required=True),
                        description=get(tool, "description", str, f"{where}.description") or "",
                        parameters=get(
                            tool, "input_schema", dict, f"{where}.input_schema", required=True
                        ),
                    )
                )
            else:
                out.append(server_tool(plain(tool)))
        return out

    # --- options -----------------------------------------------------------------------

    def _options(self, context: Context) -> StreamOptions:
        body = self.body
        fields: dict[str, Any] = {
            "max_tokens": get(body, "max_tokens", int, "max_tokens", required=True),
            "temperature": get(body, "temperature", float, "temperature"),
            "top_p": get(body, "top_p", float, "top_p"),
            "top_k": get(body, "top_k", int, "top_k"),
        }
        stop = get(body, "stop_sequences", list, "stop_sequences")
        if stop:
            fields["stop"] = list(stop)
        self._tool_choice(fields, context)
        self._thinking(fields)
        self._output(fields)
        self._metadata(fields)
        try:
            return StreamOptions(**{k: v for k, v in fields.items() if v is not None})
        except (TypeError, ValueError) as e:
            found = re.match(r"StreamOptions\.(\w+)", str(e))
            name = found.group(1) if found else "body"
            text = str(e).split(": ", 1)[-1]
            raise RequestFieldError(_OPTION_FIELDS.get(name, name), text) from None

    def _tool_choice(self, fields: dict[str, Any], context: Context) -> None:
        choice = get(self.body, "tool_choice", dict, "tool_choice")
        if choice is None:
            return
        self._extra(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")
        ctype = choice.get("type")
        if ctype == "tool":
            name = get(choice, "name", str, "tool_choice.name", required=True)
            names = {t.name for t in context.tools or () if isinstance(t, Tool)}
            if name not in names:
                raise RequestFieldError("tool_choice.name", f"no tool named {name!r} in tools")
            fields["tool_choice"] = {"tool": name}
        elif isinstance(ctype, str) and ctype in _CHOICES:
            fields["tool_choice"] = _CHOICES[ctype]
        else:
            known = ", ".join([*_CHOICES, "tool"])
            raise RequestFieldError("tool_choice.type", f"expected one of {known}, got {ctype!r}")
        where = "tool_choice.disable_parallel_tool_use"
        if get(choice, "disable_parallel_tool_use", bool, where):
            fields["parallel_tool_calls"] = False

    def _thinking(self, fields: dict[str, Any]) -> None:
        thinking = get(self.body, "thinking", dict, "thinking")
        config = get(self.body, "output_config", dict, "output_config") or {}
        effort = get(config, "effort", str, "output_config.effort")
        ttype = thinking.get("type") if thinking is not None else None
        if thinking is not None:
            self._extra(thinking, {"type", "budget_tokens"}, "thinking")
        if ttype == "enabled":
            budget = get(thinking or {}, "budget_tokens", int, "thinking.budget_tokens",
                          required=True)  # fmt: skip
            if budget <= 0:
                raise RequestFieldError("thinking.budget_tokens", f"must be > 0, got {budget}")
            fields["reasoning"] = effort_for(budget)
            fields["thinking_budgets"] = {fields["reasoning"]: budget}
        elif ttype == "adaptive":
            fields["reasoning"] = adaptive_effort(effort, "output_config.effort")
            effort = None
        elif ttype not in (None, "disabled"):
            raise RequestFieldError(
                "thinking.type", f"expected enabled, adaptive or disabled, got {ttype!r}"
            )
        if effort is not None:
            self.unmodeled["output_config.effort"] = effort  # an effort without thinking

    def _output(self, fields: dict[str, Any]) -> None:
        config = get(self.body, "output_config", dict, "output_config") or {}
        self._extra(config, {"format", "effort"}, "output_config")
        fmt, where = config.get("format"), "output_config.format"
        if fmt is None:
            fmt, where = self.body.get("output_format"), "output_format"
        if fmt is None:
            return
        fmt = obj(fmt, where)
        if fmt.get("type") != "json_schema":
            raise RequestFieldError(
                f"{where}.type", f"expected json_schema, got {fmt.get('type')!r}"
            )
        self._extra(fmt, {"type", "schema"}, where)
        fields["output_schema"] = get(fmt, "schema", dict, f"{where}.schema", required=True)

    def _metadata(self, fields: dict[str, Any]) -> None:
        metadata = get(self.body, "metadata", dict, "metadata")
        if not metadata:
            return
        user = metadata.get("user_id")
        rest = {k: v for k, v in metadata.items() if k != "user_id"}
        if isinstance(user, str):
            try:
                StreamOptions(metadata={"user_id": user})
            except (TypeError, ValueError):
                rest = metadata  # an id no vendor field takes: as sent
            else:
                fields["metadata"] = {"user_id": user}
        elif user is not None:
            rest = metadata
        if rest:
            self.unmodeled["metadata"] = metadata
