"""The fidelity matrix's upstream side: which catalog model stands for each of the eight
wire APIs, and whether a request the gateway sent upstream is one that vendor accepts
(`problems`), with what it had to send back restored (`restored`).

The checks are the vendors' own documented rules, the ones the 2026 bug trackers show
broken by translating proxies: tool calls paired with their results, Mistral's
nine-character ids, Anthropic's thinking block first in a tool-use turn, signatures sent
back verbatim, no gateway state carrier ever reaching a vendor.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from stream_core.provider import CARRIER_PREFIX

__all__ = ["UPSTREAMS", "UpstreamSpec", "problems", "restored"]


@dataclass(frozen=True)
class UpstreamSpec:
    """One upstream wire API: the catalog model (`provider/id`) that stands for it, a
    second one of the same API (a route's second deployment), the model that runs a
    server tool where another one does (Bedrock: Nova), and an `api` override."""

    api: str
    model: str
    second: str
    search_model: str | None = None
    api_override: str | None = None


UPSTREAMS: dict[str, UpstreamSpec] = {
    s.api: s
    for s in (
        UpstreamSpec(
            "anthropic-messages", "anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5"
        ),
        UpstreamSpec("openai-completions", "openai/gpt-5", "openai/gpt-5-mini"),
        UpstreamSpec(
            "mistral-conversations",
            "mistral/magistral-medium-latest",
            "mistral/mistral-medium-2604",
        ),
        UpstreamSpec(
            "openai-responses", "openai/gpt-5", "openai/gpt-5-mini", api_override="openai-responses"
        ),
        UpstreamSpec("google-generative-ai", "google/gemini-2.5-pro", "google/gemini-2.5-flash"),
        UpstreamSpec(
            "bedrock-converse-stream",
            "amazon-bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "amazon-bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0",
            search_model="amazon-bedrock/amazon.nova-2-lite-v1:0",
        ),
        UpstreamSpec("ollama-chat", "ollama/qwen3", "ollama/llama3.2"),
        UpstreamSpec(
            "ollama-generate", "ollama/qwen3", "ollama/llama3.2", api_override="ollama-generate"
        ),
    )
}
"""The eight upstream wire APIs, in the matrix's column order."""

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
"""Anthropic's (and Bedrock's) `tool_use.id` / `toolUseId` pattern."""
MISTRAL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
"""Mistral: a tool call id is exactly nine letters and digits."""


def problems(api: str, body: Any, headers: dict[str, str], client_key: str) -> list[str]:
    """Why the vendor of `api` would refuse this request (empty: it accepts it)."""
    out: list[str] = []
    if not isinstance(body, dict):
        return [f"the body is not a JSON object: {body!r:.80}"]
    if CARRIER_PREFIX in json.dumps(body):
        out.append(f"a gateway state carrier ({CARRIER_PREFIX}...) reached the vendor")
    if any(client_key in v for v in headers.values()):
        out.append("the client's gateway key was sent upstream")
    check = _CHECKS.get(api)
    if check is not None:
        out += check(body)
    return out


def _anthropic(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if not isinstance(body.get("max_tokens"), int):
        out.append("max_tokens missing")
    thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    return out + _anthropic_like(
        body.get("messages") or [],
        call=lambda b: b.get("id") if b.get("type") == "tool_use" else None,
        result=lambda b: b.get("tool_use_id") if b.get("type") == "tool_result" else None,
        thought=lambda b: b.get("type") in ("thinking", "redacted_thinking"),
        signed=lambda b: bool(b.get("signature") or b.get("data")),
        thinking=thinking,
    )


def _bedrock(body: dict[str, Any]) -> list[str]:
    fields = body.get("additionalModelRequestFields") or {}
    thinking = (fields.get("thinking") or {}).get("type") in ("enabled", "adaptive")

    def signed(b: dict[str, Any]) -> bool:
        r = b["reasoningContent"]
        return bool((r.get("reasoningText") or {}).get("signature") or r.get("redactedContent"))

    return _anthropic_like(
        body.get("messages") or [],
        # Nova's system tool: its call and result sit together in the assistant turn.
        call=lambda b: _client_call(b.get("toolUse") or {}),
        result=lambda b: (b.get("toolResult") or {}).get("toolUseId"),
        thought=lambda b: "reasoningContent" in b,
        signed=signed,
        thinking=thinking,
    )


def _client_call(use: dict[str, Any]) -> str | None:
    return None if use.get("type") == "server_tool_use" else use.get("toolUseId")


def _anthropic_like(messages: list[Any], *, call, result, thought, signed, thinking) -> list[str]:  # type: ignore[no-untyped-def]
    """Claude's rules (Messages and Converse alike): each call answered in the very next
    user turn, each result answering a call of the turn before, ids of the allowed
    characters, thinking blocks signed, and (thinking on) a tool-use turn opening with its
    thinking."""
    out: list[str] = []
    if not messages or messages[0].get("role") != "user":
        out.append("the first message is not the user's")
    open_calls: set[str] = set()
    last_calls_turn = None
    for i, m in enumerate(messages):
        blocks = m.get("content")
        blocks = blocks if isinstance(blocks, list) else []
        if m.get("role") == "assistant":
            if open_calls:
                out.append(f"messages[{i}]: calls {sorted(open_calls)} were never answered")
            ids = [call(b) for b in blocks if call(b)]
            for n, b in enumerate(blocks):
                if thought(b) and not signed(b):
                    out.append(f"messages[{i}].content[{n}]: a thinking block without signature")
            for id_ in ids:
                if not ANTHROPIC_ID.match(id_):
                    out.append(f"messages[{i}]: tool id {id_!r} has characters Claude refuses")
            open_calls = set(ids)
            if ids:
                last_calls_turn = (i, blocks)
        else:
            answered = [result(b) for b in blocks if result(b)]
            for id_ in answered:
                if id_ not in open_calls:
                    out.append(f"messages[{i}]: a result for {id_!r}, which no call opened")
            missing = open_calls - set(answered)
            if missing:
                out.append(f"messages[{i}]: calls {sorted(missing)} have no result")
            open_calls = set()
    if thinking and last_calls_turn is not None and last_calls_turn == _last_assistant(messages):
        i, blocks = last_calls_turn
        if not blocks or not thought(blocks[0]):
            out.append(f"messages[{i}]: thinking is on and the tool-use turn opens without it")
    return out


def _last_assistant(messages: list[Any]) -> tuple[int, list[Any]] | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            content = messages[i].get("content")
            return i, content if isinstance(content, list) else []
    return None


def _chat(body: dict[str, Any], *, mistral: bool = False, ollama: bool = False) -> list[str]:
    out: list[str] = []
    open_calls: dict[str, Any] = {}
    for i, m in enumerate(body.get("messages") or []):
        role = m.get("role")
        if role == "tool":
            key = m.get("tool_name") if ollama else m.get("tool_call_id")
            # Ollama pairs a result with a call by the tool's name, in order.
            match = next((k for k, v in open_calls.items() if key in (k, v if ollama else k)), None)
            if match is None:
                out.append(f"messages[{i}]: a tool result for {key!r}, which no call opened")
            else:
                del open_calls[match]
            continue
        if open_calls:
            out.append(f"messages[{i}]: calls {sorted(open_calls)} were never answered")
            open_calls = {}
        for n, c in enumerate(m.get("tool_calls") or []):
            fn = c.get("function") or {}
            where = f"messages[{i}].tool_calls[{n}]"
            if ollama:
                if not isinstance(fn.get("arguments"), dict):
                    out.append(f"{where}: Ollama takes arguments as an object")
                open_calls[f"#{i}.{n}"] = fn.get("name")
                continue
            id_ = c.get("id")
            if not isinstance(id_, str) or not id_:
                out.append(f"{where}: no id")
                continue
            if "~" in id_:
                out.append(f"{where}: id {id_!r} still holds the gateway's tail")
            if mistral and not MISTRAL_ID.match(id_):
                out.append(f"{where}: Mistral refuses id {id_!r} (nine letters or digits)")
            try:
                json.loads(fn.get("arguments"))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                out.append(f"{where}: arguments are not a JSON string")
            open_calls[id_] = fn.get("name")
    if open_calls:
        out.append(f"calls {sorted(open_calls)} were never answered")
    return out


def _responses(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    items = body.get("input")
    if isinstance(items, str):
        return out
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items or []):
        kind = item.get("type")
        if kind == "function_call":
            if not isinstance(item.get("arguments"), str):
                out.append(f"input[{i}]: arguments are not a string")
            calls[item.get("call_id")] = i
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                out.append(f"input[{i}]: an output for {item.get('call_id')!r}, no call opened")
            answered.add(item.get("call_id"))
        elif kind == "reasoning" and body.get("store") is False:
            if not item.get("encrypted_content"):
                out.append(f"input[{i}]: a reasoning item without encrypted_content (store off)")
    missing = set(calls) - answered
    if missing:
        out.append(f"calls {sorted(missing)} have no function_call_output")
    return out


def _google(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    contents = body.get("contents") or []
    for i, c in enumerate(contents):
        if c.get("role") not in ("user", "model"):
            out.append(f"contents[{i}]: role {c.get('role')!r}")
        calls = [p["functionCall"].get("name") for p in c.get("parts", ()) if "functionCall" in p]
        if not calls:
            continue
        nxt = contents[i + 1] if i + 1 < len(contents) else None
        names = [
            p["functionResponse"].get("name")
            for p in (nxt or {}).get("parts", ())
            if "functionResponse" in p
        ]
        if sorted(names) != sorted(calls):
            out.append(f"contents[{i}]: calls {calls} answered by {names}")
    return out


_CHECKS = {
    "anthropic-messages": _anthropic,
    "bedrock-converse-stream": _bedrock,
    "openai-completions": _chat,
    "mistral-conversations": lambda b: _chat(b, mistral=True),
    "ollama-chat": lambda b: _chat(b, ollama=True),
    "ollama-generate": lambda b: [] if isinstance(b.get("prompt"), str) else ["no prompt"],
    "openai-responses": _responses,
    "google-generative-ai": _google,
}


def restored(api: str, body: dict[str, Any], state: dict[str, str]) -> list[str]:
    """What the vendor needs back and did not get: `state` names the scripted opaque
    values (`signature`: a thinking signature, `thought_signature`: Gemini's on a call,
    `encrypted`: a Responses reasoning item's content, `call_id`: the call's id)."""
    text = json.dumps(body)
    out = []
    for name, value in state.items():
        if json.dumps(value) not in text:
            out.append(f"the {name} {value!r} was not sent back")
    sig = state.get("signature")
    if sig and api == "anthropic-messages":
        blocks = [b for m in body.get("messages", ()) for b in _list(m.get("content"))]
        if not any(b.get("type") == "thinking" and b.get("signature") == sig for b in blocks):
            out.append("no thinking block carries the scripted signature")
    if sig and api == "bedrock-converse-stream":
        blocks = [b for m in body.get("messages", ()) for b in _list(m.get("content"))]
        got = [((b.get("reasoningContent") or {}).get("reasoningText") or {}) for b in blocks]
        if not any(r.get("signature") == sig for r in got):
            out.append("no reasoningContent carries the scripted signature")
    thought = state.get("thought_signature")
    if thought and api == "google-generative-ai":
        parts = [p for c in body.get("contents", ()) for p in c.get("parts", ())]
        if not any("functionCall" in p and p.get("thoughtSignature") == thought for p in parts):
            out.append("the functionCall part lost its thoughtSignature")
    enc = state.get("encrypted")
    if enc and api == "openai-responses":
        items: list[Any] = body["input"] if isinstance(body.get("input"), list) else []
        kinds = [(i.get("type"), i.get("encrypted_content")) for i in items]
        where = next((n for n, k in enumerate(kinds) if k == ("reasoning", enc)), None)
        call = next((n for n, k in enumerate(kinds) if k[0] == "function_call"), None)
        if where is None or call is None or where > call:
            out.append("the reasoning item does not come back before its function_call")
    return out


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
