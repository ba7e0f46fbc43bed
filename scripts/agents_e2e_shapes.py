"""Tools and tool loops in each wire format, for scripts/agents_e2e.py.

`shell_call` finds an agent's own shell tool in its request's `tools` (any of the three
client dialects). Each `*_shape(body, expect)` lists what in `body` (the JSON an upstream
received as the second request of the loop) that vendor would refuse, or what it lost
of the first answer (an empty list: accepted)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SHELL_NAMES = ("Bash", "exec_command", "shell_command", "shell", "bash", "run_shell_command")


def tool_entries(tools: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema) of each function tool, in any of the three client dialects
    (Responses namespaces opened)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            out += tool_entries(tool.get("tools"))
            continue
        fn: dict[str, Any] = tool["function"] if isinstance(tool.get("function"), dict) else tool
        schema = fn.get("input_schema") or fn.get("parameters")
        if isinstance(fn.get("name"), str) and isinstance(schema, dict):
            out.append((fn["name"], schema))
    return out


def shell_call(tools: Any, command: str) -> tuple[str, dict[str, Any]] | None:
    """The agent's shell tool and the arguments that run `command` with it."""
    entries = dict(tool_entries(tools))
    for name in SHELL_NAMES:
        schema = entries.get(name)
        if schema is None:
            continue
        props = schema.get("properties") or {}
        arg = next((a for a in ("command", "cmd") if a in props), None)
        if arg is None:
            continue
        value: Any = command
        if props[arg].get("type") == "array":
            value = ["bash", "-lc", command]
        args: dict[str, Any] = {arg: value}
        if "description" in props:
            args["description"] = "Write the end-to-end token"
        return name, args
    return None


def upstream_tools(api: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if api == "google-generative-ai":
        return [
            (d.get("name", ""), d.get("parameters") or d.get("parametersJsonSchema") or {})
            for t in body.get("tools") or []
            for d in t.get("functionDeclarations") or []
        ]
    return tool_entries(body.get("tools"))


@dataclass(frozen=True)
class Expect:
    """What the upstream's first answer said, and what the command printed."""

    name: str  # the shell tool called
    args: dict[str, Any]  # its arguments
    call_id: str  # the call's id as the upstream gave it (Gemini: none)
    signature: str  # Gemini's thought signature / Anthropic's thinking signature
    token: str  # what the command printed


def clip(data: bytes | str, n: int = 300) -> str:
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _args_match(got: Any, want: dict[str, Any]) -> bool:
    return isinstance(got, dict) and all(got.get(k) == v for k, v in want.items())


def gemini_shape(body: dict[str, Any], script: Expect) -> list[str]:
    """Gemini's rules for a tool loop: roles user/model; the model turn's functionCall
    parts (thought signature given back) answered, in the next user turn, by as many
    functionResponse parts of the same names."""
    name, args = script.name, script.args
    p: list[str] = []
    contents = body.get("contents") or []
    for i, c in enumerate(contents):
        if c.get("role") not in ("user", "model") or not c.get("parts"):
            p.append(
                f"contents[{i}]: role {c.get('role')!r} with {len(c.get('parts') or [])} parts"
            )
    calls = [
        (i, part)
        for i, c in enumerate(contents)
        for part in c.get("parts") or []
        if "functionCall" in part
    ]
    if len(calls) != 1:
        return [*p, f"{len(calls)} functionCall parts in the history, expected 1"]
    i, part = calls[0]
    call = part["functionCall"]
    if contents[i].get("role") != "model" or call.get("name") != name:
        p.append(
            f"contents[{i}]: the call is {call.get('name')!r} in a {contents[i].get('role')!r} turn"
        )
    if not _args_match(call.get("args"), args):
        p.append(f"contents[{i}]: functionCall args {call.get('args')} are not {args}")
    if part.get("thoughtSignature") != script.signature:
        p.append(
            f"contents[{i}]: the functionCall's thoughtSignature did not come back (Gemini 3: 400)"
        )
    after = contents[i + 1] if i + 1 < len(contents) else {}
    responses = [q["functionResponse"] for q in after.get("parts") or [] if "functionResponse" in q]
    if after.get("role") != "user" or len(responses) != 1:
        p.append(f"contents[{i + 1}]: not a user turn with one functionResponse")
    elif responses[0].get("name") != name or script.token not in json.dumps(responses[0]):
        got = clip(json.dumps(responses[0]))
        p.append(f"contents[{i + 1}]: the functionResponse lacks the output: {got}")
    return p


def chat_shape(body: dict[str, Any], script: Expect) -> list[str]:
    """Chat Completions' rules: an assistant message's tool_calls answered, right after
    it, by one `tool` message per call id; arguments a JSON string; ids as the upstream
    gave them (no gateway carrier left on them)."""
    name, args = script.name, script.args
    p: list[str] = []
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
            p.append(f"messages[{i}]: role {m.get('role')!r}")
    with_calls = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    if len(with_calls) != 1:
        return [*p, f"{len(with_calls)} assistant messages with tool_calls, expected 1"]
    i = with_calls[0]
    calls = messages[i]["tool_calls"]
    if messages[i].get("role") != "assistant" or len(calls) != 1:
        return [
            *p,
            f"messages[{i}]: {len(calls)} tool calls in a {messages[i].get('role')!r} message",
        ]
    call = calls[0]
    fn = call.get("function") or {}
    if call.get("type") != "function" or fn.get("name") != name:
        p.append(f"messages[{i}].tool_calls[0]: {clip(json.dumps(call))}")
    try:
        got = json.loads(fn.get("arguments") or "")
    except (TypeError, ValueError):
        got = None
    if not _args_match(got, args):
        p.append(f"messages[{i}].tool_calls[0]: arguments {fn.get('arguments')!r} are not {args}")
    if call.get("id") != script.call_id:
        got, gave = call.get("id"), script.call_id
        p.append(f"messages[{i}].tool_calls[0].id {got!r}, the upstream gave {gave!r}")
    after = messages[i + 1] if i + 1 < len(messages) else {}
    if after.get("role") != "tool" or after.get("tool_call_id") != call.get("id"):
        got = clip(json.dumps(after))
        p.append(f"messages[{i + 1}]: not the tool message answering {call.get('id')!r}: {got}")
    elif script.token not in json.dumps(after.get("content")):
        p.append(f"messages[{i + 1}]: the tool message lacks the output: {clip(json.dumps(after))}")
    return p


def anthropic_shape(body: dict[str, Any], script: Expect) -> list[str]:
    """Anthropic's rules: user and assistant alternate from a user turn (a `system`
    message between them is Claude Code's, under its mid-conversation-system beta); no
    empty text block; the tool_use answered by tool_result blocks first in the next user
    turn; the signed thinking given back before the tool_use."""
    name, args = script.name, script.args
    p: list[str] = []
    messages = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    for i, m in enumerate(messages):
        if m.get("role") != ("user" if i % 2 == 0 else "assistant"):
            p.append(f"messages[{i}]: role {m.get('role')!r} breaks user/assistant alternation")
        content = m.get("content")
        for j, b in enumerate(content if isinstance(content, list) else []):
            if b.get("type") == "text" and not b.get("text"):
                p.append(f"messages[{i}].content[{j}]: an empty text block")
    uses = [
        (i, j, b)
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), list)
        for j, b in enumerate(m["content"])
        if b.get("type") == "tool_use"
    ]
    if len(uses) != 1:
        return [*p, f"{len(uses)} tool_use blocks in the history, expected 1"]
    i, j, use = uses[0]
    if use.get("name") != name or not _args_match(use.get("input"), args):
        p.append(f"messages[{i}].content[{j}]: {clip(json.dumps(use))}")
    if use.get("id") != script.call_id:
        p.append(
            f"messages[{i}].content[{j}].id {use.get('id')!r}, the upstream gave {script.call_id!r}"
        )
    blocks = messages[i]["content"]
    thinking = [b for b in blocks if b.get("type") == "thinking"]
    if not thinking or thinking[0].get("signature") != script.signature:
        p.append(f"messages[{i}]: the signed thinking block did not come back")
    elif blocks[0].get("type") != "thinking":
        p.append(f"messages[{i}]: the thinking block is not first")
    after = messages[i + 1].get("content") if i + 1 < len(messages) else None
    first = after[0] if isinstance(after, list) and after else {}
    if first.get("type") != "tool_result" or first.get("tool_use_id") != use.get("id"):
        p.append(
            f"messages[{i + 1}]: does not open with the tool_result: {clip(json.dumps(after))}"
        )
    elif script.token not in json.dumps(first.get("content")):
        p.append(f"messages[{i + 1}]: the tool_result lacks the output: {clip(json.dumps(first))}")
    return p


def responses_shape(body: dict[str, Any], script: Expect) -> list[str]:
    """Responses' rules: the function_call item (its call_id as the upstream gave it)
    followed by the function_call_output of the same call_id."""
    name, args = script.name, script.args
    p: list[str] = []
    items = body.get("input") or []
    calls = [i for i, it in enumerate(items) if it.get("type") == "function_call"]
    if len(calls) != 1:
        return [f"{len(calls)} function_call items in the input, expected 1"]
    i = calls[0]
    call = items[i]
    try:
        got = json.loads(call.get("arguments") or "")
    except (TypeError, ValueError):
        got = None
    if call.get("name") != name or not _args_match(got, args):
        p.append(f"input[{i}]: {clip(json.dumps(call))}")
    if call.get("call_id") != script.call_id:
        p.append(
            f"input[{i}].call_id {call.get('call_id')!r}, the upstream gave {script.call_id!r}"
        )
    outputs = [it for it in items[i + 1 :] if it.get("type") == "function_call_output"]
    if not outputs or outputs[0].get("call_id") != call.get("call_id"):
        p.append(f"no function_call_output answers {call.get('call_id')!r}")
    elif script.token not in json.dumps(outputs[0].get("output")):
        p.append(f"the function_call_output lacks the output: {clip(json.dumps(outputs[0]))}")
    return p


SHAPES: dict[str, Callable[[dict[str, Any], Expect], list[str]]] = {
    "google-generative-ai": gemini_shape,
    "openai-completions": chat_shape,
    "anthropic-messages": anthropic_shape,
    "openai-responses": responses_shape,
}
