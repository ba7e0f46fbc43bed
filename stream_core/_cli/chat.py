"""`stream-core chat PROVIDER/MODEL "prompt"`: a live answer, drawn as it streams."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

import anyio

from .._options import StreamOptions
from .._registry import api_key_env
from ._common import chat_model, consume, exit_status, usage_error, user_context
from ._render import Renderer, use_color

__all__ = ["run"]


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    provider, _, model_id = args.model.partition("/")
    if not provider or not model_id:
        return usage_error(
            err, f"expected PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5), got {args.model!r}"
        )
    try:
        model = chat_model(provider, model_id, args.base_url, args.reasoning is not None)
    except KeyError as exc:
        return usage_error(err, str(exc.args[0]))
    try:
        env, required = api_key_env(model)
    except ValueError as exc:
        return usage_error(err, str(exc))
    if required and env and not os.environ.get(env):
        # Checked here, before any I/O, so the person gets one actionable line.
        return usage_error(err, f"set {env} to use {provider}/{model_id}")
    options = StreamOptions(
        max_tokens=args.max_tokens, reasoning=args.reasoning, base_url=args.base_url
    )
    renderer = Renderer(out, color=use_color(out))
    context = user_context(args.system, args.prompt)
    message = anyio.run(consume, model, context, options, renderer, 0.0)
    return exit_status(message)
