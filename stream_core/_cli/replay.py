"""`stream-core replay FILE.body`: a recorded response body run through its provider,
offline, drawn for a person or printed as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

import anyio

from .._events import AssistantStreamEvent
from .._models import Model
from .._registry import get_provider
from .._types import AssistantMessage, Context, UserMessage
from ._common import replay_body, usage_error
from ._render import EventSink, Renderer, error, event_printer, json_line, use_color

__all__ = ["run"]

# Response headers that describe the original transfer, not the stored body.
_TRANSFER_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    path = Path(args.file)
    if not path.is_file():
        return usage_error(err, f"no such file: {path}")
    sidecar = path.with_suffix(".json")
    meta: dict[str, Any] = {}
    if sidecar.is_file() and sidecar != path:
        try:
            loaded = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return usage_error(err, f"cannot read {sidecar}: {exc}")
        if not isinstance(loaded, dict):
            return usage_error(err, f"{sidecar} is not a JSON object")
        meta = loaded
    api = args.api or meta.get("api")
    if not isinstance(api, str) or not api:
        return usage_error(
            err,
            f"which wire API recorded {path.name}? pass --api (e.g. --api "
            f'anthropic-messages) or put an "api" key in {sidecar.name}',
        )
    try:
        get_provider(api)
    except ValueError as exc:
        return usage_error(err, str(exc))
    # How the recorded call was made, where it changes how the answer reads (the fixture
    # format's `call`): a structured answer asked for, and the model's mode for it.
    raw_call = meta.get("call")
    call: dict[str, Any] = raw_call if isinstance(raw_call, dict) else {}
    schema = call.get("output_schema")
    mode = call.get("structured_output")
    model = Model(
        id=str(meta.get("model") or "replay"),
        api=api,
        provider=str(meta.get("vendor") or "replay"),
        base_url="https://replay.invalid",
        structured_output=mode if mode in ("native", "tool") else None,
    )
    status = meta.get("status")
    raw_headers = meta.get("headers")
    headers = (
        {
            str(k).lower(): str(v)
            for k, v in (raw_headers or {}).items()
            if str(k).lower() not in _TRANSFER_HEADERS
        }
        if isinstance(raw_headers, dict)
        else {}
    )

    sink: EventSink
    if args.events:
        sink = event_printer(out)
    elif args.json:
        sink = _ignore
    else:
        sink = Renderer(out, color=use_color(out))
    context = Context(messages=[UserMessage(content="(replayed recording)")])
    message = anyio.run(
        _replay_main,
        model,
        context,
        path.read_bytes(),
        sink,
        args.chunk_size,
        status if isinstance(status, int) else 200,
        headers,
        schema if isinstance(schema, dict) else None,
    )
    if args.json:
        json_line(out, message.model_dump(mode="json"))
    if _nothing_recognised(message):
        error(
            err,
            f"no event of {path.name} was recognised as {api}; "
            "is --api the wire API that recorded it?",
        )
        return 1
    return 0  # an error in the recording is output, not a failure of the command


def _nothing_recognised(message: AssistantMessage) -> bool:
    """The body failed to parse or ended without the API's terminal event, and no event
    of it changed the message: the recording is of another API (or empty)."""
    failure = message.error
    return (
        failure is not None
        and failure.kind in ("network", "protocol")
        and not message.content
        and message.raw_stop_reason is None
        and message.response_id is None
        and message.usage.total_tokens == 0
    )


async def _replay_main(
    model: Model,
    context: Context,
    body: bytes,
    sink: EventSink,
    chunk_size: int | None,
    status: int,
    headers: dict[str, str],
    output_schema: dict[str, Any] | None,
) -> AssistantMessage:
    return await replay_body(
        model,
        context,
        body,
        api_key="replay-key",
        sink=sink,
        chunk_size=chunk_size,
        status=status,
        headers=headers,
        output_schema=output_schema,
    )


def _ignore(event: AssistantStreamEvent) -> None:
    return None
