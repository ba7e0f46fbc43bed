"""`stream-core synthesize SCRIPT --api API --out DIR`: a script of turns as recordings.

SCRIPT is JSON (a list of turns) or JSONL (one turn a line): a string is a text answer, an
object an `AssistantMessage` (text, thinking, tool calls, usage, stop reason, an error;
its `api`, `provider` and `model` may be left out).
Each turn is written as `DIR/<n>.body` and `DIR/<n>.json` (from 1) in the exact wire format
of API (`stream_core.testing.vendor_bytes`), so `stream-core serve --scenario MODEL=DIR`
and `replay_sequence` play them in order.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from .._types import AssistantMessage
from ._common import usage_error

__all__ = ["run"]


def _turns(path: Path) -> list[Any]:
    text = path.read_text("utf-8")
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except ValueError:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    turns: list[Any] = []
    for n, item in enumerate(items, 1):
        if isinstance(item, str):
            turns.append(item)
        elif isinstance(item, dict):
            # The call's identity is not the script's to say: the API is --api's.
            known = {"api": "synthetic", "provider": "synthetic", "model": "synthetic"}
            try:
                turns.append(AssistantMessage.model_validate({**known, **item}))
            except ValueError as exc:
                raise ValueError(f"turn {n}: {exc}") from None
        else:
            raise ValueError(f"turn {n}: a string or an assistant message object, not {item!r}")
    return turns


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..testing import vendor_bytes

    try:
        turns = _turns(Path(args.script))
    except (OSError, ValueError) as exc:
        return usage_error(err, f"{args.script}: {exc}")
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for n, turn in enumerate(turns, 1):
        try:
            made = vendor_bytes(turn, args.api, model=args.model)
        except ValueError as exc:
            return usage_error(err, f"turn {n}: {exc}")
        try:
            made.write(folder / str(n))
        except OSError as exc:
            return usage_error(err, f"turn {n}: {exc}")
    out.write(f"wrote {len(turns)} recording(s) for {args.api} to {folder}\n")
    return 0
