"""`stream-core record PROVIDER/MODEL "prompt" -o NAME`: a live call written as a scrubbed
recording (NAME.body, NAME.json) in the contract fixtures' format."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import TextIO

import anyio

from .._options import StreamOptions
from .._registry import api_key_env, get_provider
from ._common import chat_model, exit_status, usage_error, user_context
from ._render import summary

__all__ = ["run"]


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..testing._record import record
    from ..testing._redact import RecordingLeak

    provider, _, model_id = args.model.partition("/")
    if not provider or not model_id:
        return usage_error(err, f"expected PROVIDER/MODEL, got {args.model!r}")
    try:
        model = chat_model(provider, model_id, args.base_url, args.reasoning is not None)
        if args.api and args.api != model.api:
            get_provider(args.api)  # ValueError naming the registered APIs
            model = model.model_copy(update={"api": args.api})
        env, required = api_key_env(model)
    except (KeyError, ValueError) as exc:
        return usage_error(err, str(exc.args[0]))
    key = os.environ.get(env) if env else None
    if required and not key:
        return usage_error(err, f"set {env} to use {provider}/{model_id}")
    context = user_context(args.system, args.prompt)
    options = StreamOptions(
        max_tokens=args.max_tokens, reasoning=args.reasoning, base_url=args.base_url,
        max_retries=0,
    )  # fmt: skip
    try:
        message, body, meta = anyio.run(
            functools.partial(record, model, context, options, Path(args.output), api_key=key)
        )
    except RecordingLeak as exc:
        err.write(f"stream-core record: {exc}\n")
        return 1
    out.write(f"wrote {body} and {meta}: {summary(message)}\n")
    return exit_status(message)
