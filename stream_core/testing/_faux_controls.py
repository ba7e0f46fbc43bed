"""The portable controls, honoured by the faux model the way a vendor would honour them.

A call's controls reach the faux "vendor" in its request (`FauxModel.requests` shows them);
each scripted turn is then shaped by them before it is streamed: `tool_choice` is checked
against the turn (a script that contradicts the call ends it `invalid_request`, naming the
turn), `stop` cuts the text at the first stop sequence (stop reason `stop`), and
`max_tokens` cuts text, thinking and tool arguments at about 4 characters a token (stop
reason `length`, a cut call truncated, as the contract says). `output_schema` is the
pipeline's own (the faux API answers in native mode: the text is the answer). Sampling
controls are recorded and otherwise accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "CONTROLS", "shape_turn"]

CHARS_PER_TOKEN = 4
"""How `max_tokens` is counted against scripted text: about 4 characters a token."""

CONTROLS = {
    "tool_choice": "checked against the scripted turn (a contradiction ends the call "
    "invalid_request, naming the turn)",
    "parallel_tool_calls": "recorded",
    "stop": "cuts the scripted text at the first stop sequence (stop reason stop)",
    "top_p": "recorded",
    "top_k": "recorded",
    "seed": "recorded",
    "presence_penalty": "recorded",
    "frequency_penalty": "recorded",
    "output_schema": "native: the scripted text is the answer, validated into output",
}
"""What the faux model does with each portable control (`WireAPI.controls`)."""

_PIECES = ("text", "thinking", "args")


def shape_turn(
    frames: Sequence[dict[str, Any]], request: dict[str, Any], turn: int
) -> list[dict[str, Any]]:
    """The frames of scripted turn number `turn` (from 1) as the call's controls shape
    them (`request`: the call's recorded payload)."""
    problem = _tool_choice_problem(frames, request.get("tool_choice"))
    if problem is not None:
        return [
            {
                "error": {
                    "kind": "invalid_request",
                    "message": f"faux script turn {turn} {problem}; change the script or the call",
                    "retryable": False,
                }
            }
        ]
    stops: list[str] = [s for s in request.get("stop") or [] if isinstance(s, str) and s]
    max_tokens = request.get("max_tokens")
    left = max_tokens * CHARS_PER_TOKEN if isinstance(max_tokens, int) else None
    if not stops and left is None:
        return list(frames)
    out: list[dict[str, Any]] = []
    ended: str | None = None
    for frame in frames:
        if ended is not None:
            if "done" in frame:
                out.append({"done": {**frame["done"], "stop": ended}})
            continue
        key = next((k for k in _PIECES if k in frame), None)
        if key is None or not isinstance(frame[key], str):
            out.append(frame)
            continue
        value: str = frame[key]
        if key == "text" and stops:
            at = min((i for i in (value.find(s) for s in stops) if i >= 0), default=-1)
            if at >= 0:
                value, ended = value[:at], "stop"
        if left is not None and len(value) > left:
            value, ended = value[:left], "length"
        if left is not None:
            left -= len(value)
        out.append({**frame, key: value})
        if ended == "stop":
            out.append({"end": frame.get("b")})
    if ended is not None and not any("done" in f for f in out):
        out.append({"done": {"stop": ended, "usage": {}}})
    return out


def _tool_choice_problem(frames: Sequence[dict[str, Any]], choice: Any) -> str | None:
    calls = [f["tool"].get("name") for f in frames if isinstance(f.get("tool"), dict)]
    if any("error" in f for f in frames) or choice in (None, "auto"):
        return None
    if choice == "none" and calls:
        return f"calls {calls[0]!r}, but the call set tool_choice='none'"
    if choice == "required" and not calls:
        return "calls no tool, but the call set tool_choice='required'"
    if isinstance(choice, dict) and choice.get("tool") not in calls:
        found = f"calls {', '.join(map(repr, calls))}" if calls else "calls no tool"
        return f"{found}, but the call set tool_choice={choice!r}"
    return None
