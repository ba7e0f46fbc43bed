"""The fidelity matrix's rows: each scenario as a script for one upstream API (`Plan`),
written in what that vendor can say (Mistral's nine-character ids, Gemini's thought
signature on the call, Responses' encrypted reasoning, each vendor's error bodies), and the
status each client dialect answers an error before content with."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from matrix_clients import Ask
from matrix_vendors import UPSTREAMS

from stream_core import (
    AssistantMessage,
    Citation,
    ErrorKind,
    ServerToolCall,
    ServerToolResult,
    Source,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from stream_core.testing import FauxTurn, faux_text, faux_web_search

__all__ = ["ERRORS", "SCENARIOS", "Plan", "Skip", "http_error"]


class Skip(Exception):
    """The upstream cannot say this cell's script: the reason."""


# --- scenarios ----------------------------------------------------------------------------

SIG = "EqQBCkYIBxgCKkDmatrixThinkingSignature"
GEMINI_SIG = "CiQBmatrixGeminiThoughtSignature=="
ENCRYPTED = "gAAAAABmatrixEncryptedReasoning"
USAGE = Usage(input=120, output=30, cache_read=40, cache_write=20)
THINKING_USAGE = Usage(input=200, output=60, cache_read=50, reasoning=25)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature_c": {"type": "integer"}},
    "required": ["city", "temperature_c"],
    "additionalProperties": False,
}
SOURCES = [("https://meteo.example/paris", "Paris forecast"), ("https://wx.example/fr", "France")]


@dataclass
class Plan:
    """One cell's script: the upstream's answers in turn, what the client asks, how it
    goes on after each answer (`user`: a follow-up message; else it answers the calls),
    the opaque `state` the upstream must get back, and the kind of run."""

    turns: list[AssistantMessage | FauxTurn]
    ask: Ask = field(default_factory=Ask)
    user: str | None = None
    state: dict[str, str] = field(default_factory=dict)
    kind: str = "talk"  # talk | error | fallover | cancel
    model: str | None = None
    encrypted: str | None = None
    history: bool = False
    """The client opens with a tool exchange another vendor's model made (its own ids)."""


def _msg(*blocks: Any, stop: str = "stop", usage: Usage = USAGE) -> AssistantMessage:
    return AssistantMessage.model_validate(
        {"api": "faux", "provider": "faux", "model": "m", "content": list(blocks),
         "stop_reason": stop, "usage": usage}
    )  # fmt: skip


def _id(api: str, n: int) -> str:
    if api == "mistral-conversations":
        return f"Wq{n}k7Zp3K"  # nine letters and digits, as Mistral makes them
    if api in ("anthropic-messages", "bedrock-converse-stream"):
        return f"toolu_0{n}Matrix"
    return f"call_{n}Matrix"


def _call(api: str, n: int, city: str, **extra: Any) -> ToolCall:
    return ToolCall(id=_id(api, n), name="get_weather", arguments={"city": city}, **extra)


def text(api: str) -> Plan:
    turns: list[Any] = [_msg(TextContent(text="Paris is sunny today.")),
                        _msg(TextContent(text="Tomorrow brings rain."))]  # fmt: skip
    return Plan(turns, user="And tomorrow?")


def unstreamed(api: str) -> Plan:
    return replace(text(api), ask=Ask(stream=False))


def thinking_tool_loop(api: str) -> Plan:
    signed = api in ("anthropic-messages", "bedrock-converse-stream")
    think = ThinkingContent(
        thinking="Paris weather: call the tool.", signature=SIG if signed else None
    )
    gemini = {"thought_signature": GEMINI_SIG} if api == "google-generative-ai" else {}
    call = _call(api, 1, "Paris", **gemini)
    # Ollama's calls have no ids; Gemini's request sends none (names pair them).
    no_ids = api.startswith("ollama") or api == "google-generative-ai"
    state = {} if no_ids else {"call id": call.id}
    if signed:
        state["signature"] = SIG
    if gemini:
        state["thought_signature"] = GEMINI_SIG
    if api == "openai-responses":
        state["encrypted"] = ENCRYPTED
    turns: list[Any] = [
        _msg(think, call, stop="tool_use", usage=THINKING_USAGE),
        _msg(TextContent(text="It is 24 °C and sunny in Paris.")),
    ]
    encrypted = ENCRYPTED if api == "openai-responses" else None
    return Plan(turns, Ask(tools=True, thinking=True), state=state, encrypted=encrypted)


def tool_loop_unstreamed(api: str) -> Plan:
    plan = thinking_tool_loop(api)
    return replace(plan, ask=replace(plan.ask, stream=False))


def foreign_history(api: str) -> Plan:
    if api == "ollama-generate":
        raise Skip("ollama-generate takes no tools (use ollama-chat)")
    answer = _msg(TextContent(text="As I found: 24 °C in Paris."))
    return Plan([answer], Ask(tools=True), history=True)


def parallel_calls(api: str) -> Plan:
    first = _msg(TextContent(text="Checking both."), _call(api, 1, "Paris"), _call(api, 2, "Rome"),
                 stop="tool_use")  # fmt: skip
    turns: list[Any] = [first, _msg(TextContent(text="Paris 24 °C, Rome 19 °C."))]
    return Plan(turns, Ask(tools=True))


def structured_output(api: str) -> Plan:
    answer = json.dumps({"city": "Paris", "temperature_c": 24})
    return Plan([_msg(TextContent(text=answer))], Ask(schema=SCHEMA), kind="structured")


def length_cut(api: str) -> Plan:
    cut = ToolCall(id=_id(api, 1), name="get_weather", arguments={},
                   partial_json='{"city": "Par', truncated=True)  # fmt: skip
    message = _msg(TextContent(text="Let me check."), cut, stop="length",
                   usage=Usage(input=50, output=64))  # fmt: skip
    return Plan([message], Ask(tools=True, max_tokens=64))


VENDOR_ERRORS = {
    "anthropic-messages": {
        "overloaded": (529, "overloaded_error"),
        "rate_limit": (429, "rate_limit_error"),
    },
    "google-generative-ai": {
        "overloaded": (503, "UNAVAILABLE"),
        "rate_limit": (429, "RESOURCE_EXHAUSTED"),
    },
}
"""Each vendor's status and error word for a busy server and a rate limit (OpenAI-style
bodies elsewhere: 503 `server_error`, 429 `rate_limit_exceeded`)."""


def http_error(api: str, kind: ErrorKind, text: str, retry_after: float) -> FauxTurn:
    """An HTTP error in the vendor's own body shape (what a same-dialect client gets
    forwarded as is), with a `retry-after` past `max_retry_delay`: answered at once, not
    retried (a fast cell)."""
    status, word = VENDOR_ERRORS.get(api, {}).get(kind) or (
        (503, "server_error") if kind == "overloaded" else (429, "rate_limit_exceeded")
    )
    body: dict[str, Any]
    if api == "anthropic-messages":
        body = {"type": "error", "error": {"type": word, "message": text}}
    elif api == "google-generative-ai":
        body = {"error": {"code": status, "message": text, "status": word}}
    elif api == "bedrock-converse-stream":
        body = {"message": text}
    elif api.startswith("ollama"):
        body = {"error": text}
    else:
        body = {"error": {"message": text, "type": word, "param": None, "code": word}}
    data = json.dumps(body).encode()
    return FauxTurn(
        frames=(), status=status, http_body=data, error_kind=kind, retry_after=retry_after
    )


def error_before_content(api: str) -> Plan:
    return Plan([http_error(api, "overloaded", "the upstream is busy", 120)], kind="error")


def fallover_429(api: str) -> Plan:
    return Plan([_msg(TextContent(text="Served by the second deployment."))], kind="fallover")


def cancel_mid_stream(api: str) -> Plan:
    return Plan([faux_text("tick ")], kind="cancel")


def server_tools(api: str) -> Plan:
    cited = [Citation(url=u, title=t, start=0, end=13) for u, t in SOURCES]
    answer = "Sunny, 24 °C."
    plan = Plan([], Ask(web_search=True), user="Thanks.")
    after = _msg(TextContent(text="You are welcome."))
    if api in ("anthropic-messages", "openai-responses"):
        plan.turns = [faux_web_search("weather in Paris", SOURCES, answer), after]
    elif api in ("openai-completions", "mistral-conversations"):
        # Chat APIs say no server call: a search model's answer carries the citations.
        plan.turns = [_msg(TextContent(text=answer, citations=cited)), after]
        plan.ask = Ask()
    elif api == "google-generative-ai":
        call = ServerToolCall(id="gemini-grounding", name="google_search", kind="web_search",
                              input={"queries": ["weather in Paris"]})  # fmt: skip
        result = ServerToolResult(call_id=call.id, name="google_search", kind="web_search",
                                  sources=[Source(url=u, title=t) for u, t in SOURCES])  # fmt: skip
        usage = USAGE.model_copy(update={"server_tools": {"web_search": 1}})
        plan.turns = [
            _msg(TextContent(text=answer, citations=cited), call, result, usage=usage),
            after,
        ]
    elif api == "bedrock-converse-stream":
        call = ServerToolCall(id="tooluse_1", name="nova_grounding", kind="web_search",
                              input={"query": "weather in Paris"})  # fmt: skip
        result = ServerToolResult(
            call_id=call.id, name="nova_grounding", kind="web_search", text="found"
        )
        text_ = TextContent(
            text=answer, citations=[Citation(url=SOURCES[0][0], title=SOURCES[0][1])]
        )
        usage = USAGE.model_copy(update={"server_tools": {"web_search": 1}})
        plan.turns = [_msg(call, result, text_, usage=usage), after]
        plan.model = UPSTREAMS[api].search_model
    else:
        raise Skip(f"{api} streams no server tools or citations")
    return plan


SCENARIOS: dict[str, Callable[[str], Plan]] = {
    "text": text,
    "text, not streamed": unstreamed,
    "thinking + tool loop": thinking_tool_loop,
    "tool loop, not streamed": tool_loop_unstreamed,
    "parallel tool calls": parallel_calls,
    "another vendor's tool history": foreign_history,
    "structured output": structured_output,
    "length cut mid-call": length_cut,
    "error before content": error_before_content,
    "429 falls over": fallover_429,
    "cancel mid-stream": cancel_mid_stream,
    "server tools + citations": server_tools,
}
"""The matrix's rows: scenario -> its script for an upstream API."""

ERRORS: dict[str, dict[str, tuple[int, str | None]]] = {
    "anthropic-messages": {
        "overloaded": (529, "overloaded_error"),
        "rate_limit": (429, "rate_limit_error"),
        "server": (500, "api_error"),
    },
    "openai-responses": {
        "overloaded": (503, None),
        "rate_limit": (429, None),
        "server": (500, None),
    },
    "openai-completions": {
        "overloaded": (503, None),
        "rate_limit": (429, None),
        "server": (500, None),
    },
}
"""The status (and error type, where the SDK's users read it) each dialect answers an
error before content with."""
