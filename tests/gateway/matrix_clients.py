"""The fidelity matrix's client side: the official `anthropic` and `openai` SDKs, one
adapter per dialect the gateway speaks, each doing what an app does with it: ask (tools,
thinking, a schema, web search), read the answer as the SDK accumulates it, send the
assistant turn back with the tool results, close a stream early.

Each adapter also says what an answer looks like in its dialect (`project`): the form
(`Form`) an upstream's message must take there, its usage in the dialect's own fields
(cache reads and writes included) and its stop reason in the dialect's words. A cell
compares the SDK's form with the projection of what stream-core reads from the upstream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from stream_core import (
    AssistantMessage,
    ServerToolCall,
    ServerToolResult,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from stream_core.provider import CARRIER_PREFIX

__all__ = ["CLIENTS", "Ask", "Failure", "Form", "Reading", "tool_result"]

PROMPT = "What is the weather in Paris?"
SYSTEM = "Answer briefly."
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TIMEOUT = 20.0
PARIS = {"city": "Paris"}
ANTHROPIC_ID = "toolu_01A09q90qw90lq917835lq9"
OPENAI_ID = "call_Pj6Zfq8kRdBgwsSWGcZPo0Mh"
"""Ids as the vendors make them, in a history the client brings from another model."""


@dataclass(frozen=True)
class Ask:
    """What the client asks for, said in its own dialect by its adapter."""

    tools: bool = False
    thinking: bool = False
    schema: dict[str, Any] | None = None
    web_search: bool = False
    max_tokens: int = 4096
    stream: bool = True


Form = dict[str, Any]
"""An answer in a dialect: `content` (a list of tuples: ("text", text, cited urls),
("thinking", text), ("tool", id, name, arguments), ("tool-cut", id, name),
("server_call", kind), ("server_result", urls)), `usage` (the dialect's fields), `stop`."""


@dataclass
class Reading:
    """One answer as the SDK gave it: its `form`, the `calls` to answer ([(id as sent,
    arguments)]), what goes back as the assistant turn (`echo`), the usage the first
    event reported (`start`, where the dialect has one), and other views of the same
    answer that must agree (`also`: Responses' terminal object beside its items)."""

    form: Form
    calls: list[tuple[str, dict[str, Any]]]
    echo: list[dict[str, Any]]
    start: dict[str, int] | None = None
    also: list[Form] = field(default_factory=list)


@dataclass
class Failure:
    """An error answer: status, the error's type, its `retry-after` header."""

    status: int
    type: str | None
    retry_after: str | None
    message: str = ""


def tool_result(arguments: dict[str, Any]) -> str:
    return f"{arguments.get('city', '?')}: 24 °C, sunny"


def _urls(citations: Any) -> tuple[str, ...]:
    return tuple(c.url for c in citations or () if getattr(c, "url", None))


def _common(message: AssistantMessage, *, merge: bool) -> list[tuple[Any, ...]]:
    """The message's blocks as form tuples (texts and thinking merged when `merge`)."""
    out: list[tuple[Any, ...]] = []
    for b in message.content:
        if isinstance(b, TextContent):
            out.append(("text", b.text, _urls(b.citations)))
        elif isinstance(b, ThinkingContent):
            out.append(("thinking", b.thinking))
        elif isinstance(b, ToolCall):
            out.append(
                ("tool-cut", b.id, b.name) if b.truncated else ("tool", b.id, b.name, b.arguments)
            )
        elif isinstance(b, ServerToolCall):
            out.append(("server_call", b.kind or b.name))
        elif isinstance(b, ServerToolResult):
            out.append(("server_result", tuple(s.url for s in b.sources or () if s.url)))
        else:
            out.append(("other", b.type))
    return _merged(out) if merge else out


def _merged(items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Chat Completions has one text and one reasoning string per message: texts and
    thinking joined, calls after them in order."""
    thinking = "".join(i[1] for i in items if i[0] == "thinking")
    texts = [i for i in items if i[0] == "text"]
    out: list[tuple[Any, ...]] = [("thinking", thinking)] if thinking else []
    if texts:
        out.append(("text", "".join(t[1] for t in texts), sum((t[2] for t in texts), ())))
    return out + [i for i in items if i[0] in ("tool", "tool-cut", "other")]


# --- Anthropic Messages -------------------------------------------------------------------


class AnthropicClient:
    api = "anthropic-messages"
    STOPS = {"stop": "end_turn", "tool_use": "tool_use", "length": "max_tokens"}

    def __init__(self, url: str, key: str) -> None:
        self.sdk = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0, timeout=TIMEOUT)

    def start(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": PROMPT}]

    def history(self) -> list[dict[str, Any]]:
        """A tool exchange another Claude made earlier in the session (its own ids)."""
        call = {"type": "tool_use", "id": ANTHROPIC_ID, "name": "get_weather", "input": PARIS}
        result = {"type": "tool_result", "tool_use_id": ANTHROPIC_ID, "content": tool_result(PARIS)}
        return [
            *self.start(),
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, call]},
            {"role": "user", "content": [result]},
        ]

    def _kwargs(self, model: str, convo: list[Any], ask: Ask) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": model, "max_tokens": ask.max_tokens, "messages": convo}
        kw["system"] = SYSTEM
        tools: list[dict[str, Any]] = []
        if ask.tools:
            w = WEATHER
            tools.append(
                {"name": w["name"], "description": w["description"], "input_schema": w["schema"]}
            )
        if ask.web_search:
            # Claude Code's own shape, `max_uses` included.
            tools.append({"type": "web_search_20250305", "name": "web_search", "max_uses": 3})
        if tools:
            kw["tools"] = tools
        if ask.thinking:
            kw["thinking"] = {"type": "enabled", "budget_tokens": 1024}
        if ask.schema is not None:
            kw["output_config"] = {"format": {"type": "json_schema", "schema": ask.schema}}
        return kw

    def send(self, model: str, convo: list[Any], ask: Ask) -> Reading | Failure:
        kw = self._kwargs(model, convo, ask)
        start = None
        try:
            if ask.stream:
                with self.sdk.messages.stream(**kw) as s:
                    for event in s:
                        if event.type == "message_start":
                            u = event.message.usage
                            start = {
                                "input_tokens": u.input_tokens,
                                "cache_read_input_tokens": u.cache_read_input_tokens or 0,
                                "cache_creation_input_tokens": u.cache_creation_input_tokens or 0,
                            }
                    final = s.get_final_message()
            else:
                final = self.sdk.messages.create(**kw)
        except anthropic.APIStatusError as e:
            body = e.body if isinstance(e.body, dict) else {}
            kind = (body.get("error") or {}).get("type")
            text = str((body.get("error") or {}).get("message"))
            return Failure(e.status_code, kind, e.response.headers.get("retry-after"), text)
        content: list[tuple[Any, ...]] = []
        calls = []
        cut = final.stop_reason == "max_tokens"
        for b in final.content:
            if b.type == "text":
                content.append(("text", b.text, _urls(b.citations)))
            elif b.type == "thinking":
                content.append(("thinking", b.thinking))
            elif b.type == "redacted_thinking":
                if not b.data.startswith(CARRIER_PREFIX):
                    content.append(("thinking", ""))
            elif b.type == "tool_use":
                args = dict(b.input) if isinstance(b.input, dict) else b.input
                content.append(("tool-cut", b.id, b.name) if cut else ("tool", b.id, b.name, args))
                calls.append((b.id, args))
            elif b.type == "server_tool_use":
                content.append(("server_call", b.name))
            elif b.type == "web_search_tool_result":
                found = b.content if isinstance(b.content, list) else []
                content.append(("server_result", tuple(r.url for r in found)))
            else:
                content.append(("other", b.type))
        u = final.usage
        usage = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens or 0,
            "cache_creation_input_tokens": u.cache_creation_input_tokens or 0,
        }
        echo = [
            {
                "role": "assistant",
                "content": [b.model_dump(mode="json", exclude_none=True) for b in final.content],
            }
        ]
        form = {"content": content, "usage": usage, "stop": final.stop_reason}
        return Reading(form, calls, echo, start)

    def project(self, m: AssistantMessage) -> Form:
        content = [
            ("server_call", "web_search") if c[0] == "server_call" else c
            for c in _common(m, merge=False)
        ]
        u = m.usage
        usage = {
            "input_tokens": u.input,
            "output_tokens": u.output,
            "cache_read_input_tokens": u.cache_read,
            "cache_creation_input_tokens": u.cache_write,
        }
        return {
            "content": content,
            "usage": usage,
            "stop": self.STOPS.get(m.stop_reason, m.stop_reason),
        }

    def start_usage(self, u: Any) -> dict[str, int]:
        return {
            "input_tokens": u.input,
            "cache_read_input_tokens": u.cache_read,
            "cache_creation_input_tokens": u.cache_write,
        }

    def follow(self, convo: list[Any], r: Reading, user: str | None) -> list[Any]:
        if user is not None:
            return [*convo, *r.echo, {"role": "user", "content": user}]
        results = [
            {"type": "tool_result", "tool_use_id": id_, "content": tool_result(args)}
            for id_, args in r.calls
        ]
        return [*convo, *r.echo, {"role": "user", "content": results}]

    def first_text(self, model: str, convo: list[Any], ask: Ask) -> str:
        with self.sdk.messages.stream(**self._kwargs(model, convo, ask)) as s:
            for event in s:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    return event.delta.text
        return ""


# --- OpenAI Responses ---------------------------------------------------------------------


def _openai_failure(e: openai.APIStatusError) -> Failure:
    body = e.body if isinstance(e.body, dict) else {}
    body = body.get("error", body) if isinstance(body.get("error"), dict) else body
    kind = body.get("type") or body.get("code")
    text = str(body.get("message"))
    return Failure(e.status_code, kind, e.response.headers.get("retry-after"), text)


class ResponsesClient:
    api = "openai-responses"

    def __init__(self, url: str, key: str) -> None:
        self.sdk = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=TIMEOUT)

    def start(self) -> list[dict[str, Any]]:
        return [{"role": "user", "content": PROMPT}]

    def history(self) -> list[dict[str, Any]]:
        """A tool exchange another OpenAI model made earlier in the session (its ids)."""
        args = json.dumps(PARIS)
        return [
            *self.start(),
            {"type": "function_call", "id": "fc_68a1b2c3d4e5f6a7b8c9d0e1", "call_id": OPENAI_ID,
             "name": "get_weather", "arguments": args, "status": "completed"},
            {"type": "function_call_output", "call_id": OPENAI_ID, "output": tool_result(PARIS)},
        ]  # fmt: skip

    def _kwargs(self, model: str, convo: list[Any], ask: Ask) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": model, "input": convo, "instructions": SYSTEM}
        kw["max_output_tokens"] = ask.max_tokens
        kw["store"] = False
        tools: list[dict[str, Any]] = []
        if ask.tools:
            w = WEATHER
            tools.append({"type": "function", "name": w["name"], "description": w["description"],
                          "parameters": w["schema"], "strict": False})  # fmt: skip
        if ask.web_search:
            tools.append({"type": "web_search"})
        if tools:
            kw["tools"] = tools
        if ask.thinking:
            kw["reasoning"] = {"effort": "medium", "summary": "auto"}
            kw["include"] = ["reasoning.encrypted_content"]
        if ask.schema is not None:
            fmt = {"type": "json_schema", "name": "weather", "schema": ask.schema, "strict": True}
            kw["text"] = {"format": fmt}
        return kw

    def send(self, model: str, convo: list[Any], ask: Ask) -> Reading | Failure:
        kw = self._kwargs(model, convo, ask)
        items: list[Any] = []
        final = None
        try:
            if ask.stream:
                with self.sdk.responses.stream(**kw) as s:
                    for event in s:
                        if event.type == "response.output_item.done":
                            items.append(event.item)
                        elif event.type in ("response.completed", "response.incomplete"):
                            final = event.response
            else:
                final = self.sdk.responses.create(**kw)
                items = list(final.output)
        except openai.APIStatusError as e:
            return _openai_failure(e)
        assert final is not None, "the stream ended without response.completed/incomplete"
        forms = [self._form(final, items)]
        if ask.stream:
            forms.append(self._form(final, list(final.output)))
        calls = [
            (i.call_id, json.loads(i.arguments or "{}"))
            for i in items
            if i.type == "function_call" and final.status == "completed"
        ]
        echo = [i.model_dump(mode="json", exclude_none=True) for i in items]
        return Reading(forms[0], calls, echo, None, forms[1:])

    def _form(self, final: Any, items: list[Any]) -> Form:
        content: list[tuple[Any, ...]] = []
        for i in items:
            if i.type == "reasoning":
                carrier = (i.encrypted_content or "").startswith(CARRIER_PREFIX)
                if not (carrier and not i.summary):
                    content.append(("thinking", "".join(s.text for s in i.summary)))
            elif i.type == "message":
                for part in i.content:
                    if part.type == "output_text":
                        urls = tuple(a.url for a in part.annotations if a.type == "url_citation")
                        content.append(("text", part.text, urls))
            elif i.type == "function_call":
                if i.status == "incomplete":
                    # A cut call is marked on the item itself: an agent (Codex) runs a
                    # function_call as its output_item.done arrives.
                    content.append(("tool-cut", i.call_id, i.name))
                else:
                    content.append(("tool", i.call_id, i.name, json.loads(i.arguments)))
            elif i.type == "web_search_call":
                content.append(("server_call", "web_search"))
            else:
                content.append(("other", i.type))
        u = final.usage
        usage = None
        if u is not None:
            usage = {
                "input_tokens": u.input_tokens,
                "cached_tokens": u.input_tokens_details.cached_tokens,
                "output_tokens": u.output_tokens,
                "reasoning_tokens": u.output_tokens_details.reasoning_tokens,
            }
        stop = final.status
        if final.incomplete_details is not None:
            stop += ":" + str(final.incomplete_details.reason)
        return {"content": content, "usage": usage, "stop": stop}

    def project(self, m: AssistantMessage) -> Form:
        content = [
            ("server_call", "web_search") if c[0] == "server_call" else c
            for c in _common(m, merge=False)
            if c[0] != "server_result"  # a web_search_call item holds its result
        ]
        u = m.usage
        usage = {
            "input_tokens": u.input + u.cache_read + u.cache_write,
            "cached_tokens": u.cache_read,
            "output_tokens": u.output,
            "reasoning_tokens": u.reasoning,
        }
        stop = "incomplete:max_output_tokens" if m.stop_reason == "length" else "completed"
        return {"content": content, "usage": usage, "stop": stop}

    def follow(self, convo: list[Any], r: Reading, user: str | None) -> list[Any]:
        if user is not None:
            return [*convo, *r.echo, {"role": "user", "content": user}]
        outputs = [
            {"type": "function_call_output", "call_id": id_, "output": tool_result(args)}
            for id_, args in r.calls
        ]
        return [*convo, *r.echo, *outputs]

    def first_text(self, model: str, convo: list[Any], ask: Ask) -> str:
        with self.sdk.responses.stream(**self._kwargs(model, convo, ask)) as s:
            for event in s:
                if event.type == "response.output_text.delta":
                    return event.delta
        return ""


# --- OpenAI Chat Completions --------------------------------------------------------------


class ChatClient:
    api = "openai-completions"
    STOPS = {"stop": "stop", "tool_use": "tool_calls", "length": "length"}

    def __init__(self, url: str, key: str) -> None:
        self.sdk = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=TIMEOUT)

    def start(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]

    def history(self) -> list[dict[str, Any]]:
        """A tool exchange another OpenAI model made earlier in the session (its ids)."""
        fn = {"name": "get_weather", "arguments": json.dumps(PARIS)}
        return [
            *self.start(),
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": OPENAI_ID, "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": OPENAI_ID, "content": tool_result(PARIS)},
        ]  # fmt: skip

    def _kwargs(self, model: str, convo: list[Any], ask: Ask) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": model, "messages": convo}
        kw["max_completion_tokens"] = ask.max_tokens
        if ask.tools:
            w = WEATHER
            fn = {"name": w["name"], "description": w["description"], "parameters": w["schema"]}
            kw["tools"] = [{"type": "function", "function": fn}]
        # `ask.web_search`: not asked. stream-core's Chat Completions request has no server
        # tool, so the gateway refuses `web_search_options` for another vendor (a 400
        # naming it); the cell still checks the citations an upstream's answer carries.
        if ask.thinking:
            kw["reasoning_effort"] = "medium"
        if ask.schema is not None:
            schema = {"name": "weather", "schema": ask.schema, "strict": True}
            kw["response_format"] = {"type": "json_schema", "json_schema": schema}
        return kw

    def send(self, model: str, convo: list[Any], ask: Ask) -> Reading | Failure:
        kw = self._kwargs(model, convo, ask)
        text, thinking, finish, usage = "", "", None, None
        urls: tuple[str, ...] = ()
        calls: dict[int, dict[str, str]] = {}
        try:
            if ask.stream:
                kw["stream_options"] = {"include_usage": True}
                with self.sdk.chat.completions.create(stream=True, **kw) as chunks:
                    for chunk in chunks:
                        usage = chunk.usage or usage
                        for choice in chunk.choices:
                            d = choice.delta
                            extra = d.model_extra or {}
                            text += d.content or ""
                            thinking += (
                                extra.get("reasoning_content") or extra.get("reasoning") or ""
                            )
                            urls += _chat_urls(extra.get("annotations"))
                            for c in d.tool_calls or []:
                                e = calls.setdefault(c.index, {"id": "", "name": "", "args": ""})
                                e["id"] += c.id or ""
                                e["name"] += (c.function.name or "") if c.function else ""
                                e["args"] += (c.function.arguments or "") if c.function else ""
                            finish = choice.finish_reason or finish
            else:
                done = self.sdk.chat.completions.create(**kw)
                msg, usage = done.choices[0].message, done.usage
                extra = msg.model_extra or {}
                text, finish = msg.content or "", done.choices[0].finish_reason
                thinking = extra.get("reasoning_content") or extra.get("reasoning") or ""
                urls = _chat_urls([a.model_dump() for a in msg.annotations or ()])
                for n, c in enumerate(msg.tool_calls or ()):
                    calls[n] = {"id": c.id, "name": c.function.name, "args": c.function.arguments}
        except openai.APIStatusError as e:
            return _openai_failure(e)
        content: list[tuple[Any, ...]] = [("thinking", thinking)] if thinking else []
        if text:
            content.append(("text", text, urls))
        sent = []
        for c in calls.values():
            plain = c["id"].split("~", 1)[0]
            if finish == "length":
                content.append(("tool-cut", plain, c["name"]))
                continue
            args = json.loads(c["args"] or "{}")
            content.append(("tool", plain, c["name"], args))
            sent.append((c["id"], args))
        form_usage = None
        if usage is not None:
            prompt = usage.prompt_tokens_details
            completion = usage.completion_tokens_details
            form_usage = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "cached_tokens": (prompt.cached_tokens or 0) if prompt else 0,
                "reasoning_tokens": (completion.reasoning_tokens or 0) if completion else 0,
            }
        tool_calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["args"]},
            }
            for c in calls.values()
        ]
        echo: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            echo["tool_calls"] = tool_calls
        form = {"content": content, "usage": form_usage, "stop": finish}
        return Reading(form, sent, [echo])

    def project(self, m: AssistantMessage) -> Form:
        content = [c for c in _common(m, merge=True) if not c[0].startswith("server")]
        u = m.usage
        usage = {
            "prompt_tokens": u.input + u.cache_read + u.cache_write,
            "completion_tokens": u.output,
            "cached_tokens": u.cache_read,
            "reasoning_tokens": u.reasoning,
        }
        return {
            "content": content,
            "usage": usage,
            "stop": self.STOPS.get(m.stop_reason, m.stop_reason),
        }

    def follow(self, convo: list[Any], r: Reading, user: str | None) -> list[Any]:
        if user is not None:
            return [*convo, *r.echo, {"role": "user", "content": user}]
        results = [
            {"role": "tool", "tool_call_id": id_, "content": tool_result(args)}
            for id_, args in r.calls
        ]
        return [*convo, *r.echo, *results]

    def first_text(self, model: str, convo: list[Any], ask: Ask) -> str:
        with self.sdk.chat.completions.create(
            stream=True, **self._kwargs(model, convo, ask)
        ) as chunks:
            for chunk in chunks:
                for choice in chunk.choices:
                    if choice.delta.content:
                        return str(choice.delta.content)
        return ""


def _chat_urls(annotations: Any) -> tuple[str, ...]:
    out = []
    for a in annotations or ():
        cite = a.get("url_citation") if isinstance(a, dict) else None
        if isinstance(cite, dict) and cite.get("url"):
            out.append(cite["url"])
    return tuple(out)


CLIENTS = {c.api: c for c in (AnthropicClient, ResponsesClient, ChatClient)}
"""The three dialects, in the matrix's order."""
