"""The request step: a call's context, options and model to the HTTP request it sends.

Pure and synchronous, run inside `stream()` before any I/O: the endpoint (a call's
`base_url`, an SDK variable, a filled template; never a placeholder host), the key, the
vendor payload (and `StreamOptions.on_payload`), the headers, the body serialized once,
and the request signed when the API signs. A mistake in the code raises here (CONTRACT 1);
what the environment lacks (a key, credentials) is returned as `failure`, which the
stream reports as its first event.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import httpx

from .._checks import base_url_problem, key_problem, placeholder_problem
from .._errors import StreamFailure, secrets_in
from .._history.handoff import sanitize_surrogates
from .._models import Model
from .._options import StreamOptions
from .._types import Context, StreamError
from .._wire import WireAPI, WireRequest

__all__ = [
    "PreparedRequest",
    "asks_server_tools",
    "key_for",
    "missing_key",
    "prepare_request",
    "serialized_payload",
]


@dataclass(slots=True)
class PreparedRequest:
    """What `prepare_request` made: the request (None when it could not be signed), every
    credential it carries (redacted from every error and log line, CONTRACT 4), and why
    it cannot be sent, when the environment lacks something."""

    request: httpx.Request | None
    secrets: tuple[str, ...] = ()
    failure: StreamError | None = None
    server_tools: bool = False
    """The payload asks for a tool the vendor runs itself (web search, code execution):
    one answer may then sample several times, each round re-reading the prompt."""


_FUNCTION_TOOL_KEYS = frozenset({"input_schema", "functionDeclarations", "toolSpec"})
"""Keys that mark a payload's tool entry as a function the caller runs (Anthropic, Gemini,
Bedrock); entries typed `function` or `custom` are too (the OpenAI family, Mistral,
Ollama, Anthropic's `custom`). Anything else in a tools list is a vendor-run tool."""


def asks_server_tools(payload: dict[str, object]) -> bool:
    """Whether a vendor payload's tools include one the vendor runs itself."""
    tools = payload.get("tools")
    if tools is None:
        config = payload.get("toolConfig")
        tools = config.get("tools") if isinstance(config, dict) else None
    if not isinstance(tools, list):
        return False
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") in ("function", "custom") or not _FUNCTION_TOOL_KEYS.isdisjoint(tool):
            continue
        return True
    return False


def prepare_request(
    wire: WireAPI, model_in: Model, context: Context, opts: StreamOptions
) -> PreparedRequest:
    """The request a call sends (module docstring); raises for a mistake in the call."""
    try:
        return _prepare(wire, model_in, context, opts)
    except StreamFailure as failure:  # a builder that needs what the environment lacks
        return PreparedRequest(None, (), failure.error)


def _prepare(
    wire: WireAPI, model_in: Model, context: Context, opts: StreamOptions
) -> PreparedRequest:
    model = _endpoint(wire, model_in, opts)
    missing: StreamError | None = None
    secrets: tuple[str, ...] = ()
    api_key, env = key_for(wire, model, opts)
    req = wire.build_request(model, context, opts)
    unfilled = placeholder_problem(req.url)
    if unfilled is not None:
        # The last check before a credential is attached: never to nobody's host.
        raise ValueError(
            f"model.base_url: the request would go to {req.url.split('?')[0][:120]!r}, "
            f"but {unfilled}; configure the endpoint (for Azure OpenAI: "
            "AZURE_OPENAI_RESOURCE_NAME or AZURE_OPENAI_BASE_URL) or pass "
            "StreamOptions(base_url=...)"
        )
    body, _ = serialized_payload(req, model, opts)
    headers = {
        # The request is built here, not by the client: its own defaults come first.
        **(opts.client.headers if opts.client is not None else {}),
        "accept": "text/event-stream",
        # Compressed SSE arrives all at once; ask for it plain.
        "accept-encoding": "identity",
        **req.headers,
        **(wire.auth_headers(model, api_key) if api_key else {}),
        **model.headers,
        **opts.headers,
    }
    # Every credential the request carries, however it was supplied (an injected
    # client's default headers included), is redacted from every error and log line
    # (CONTRACT 4).
    client_headers = opts.client.headers if opts.client is not None else {}
    secrets = secrets_in({**client_headers, **headers}, api_key)
    if api_key is None and not secrets and wire.key_required(model):
        missing = StreamError(kind="auth", message=missing_key(model, env))
    timeout = httpx.Timeout(
        connect=opts.connect_timeout, read=None, write=60.0, pool=opts.pool_timeout
    )
    headers.setdefault("content-type", "application/json")
    request = httpx.Request(
        "POST",
        req.url,
        headers=headers,
        content=body.encode("utf-8"),
        extensions={"timeout": timeout.as_dict()},
    )
    if wire.sign is not None:
        try:
            secrets += wire.sign(request, model, opts, api_key)
        except StreamFailure as failure:  # no credentials to sign with: the first event
            return PreparedRequest(None, secrets, failure.error)
    return PreparedRequest(request, secrets, missing, asks_server_tools(req.payload))


def key_for(wire: WireAPI, model: Model, opts: StreamOptions) -> tuple[str | None, str | None]:
    """(the call's API key: `StreamOptions.api_key`, else the API's environment variable;
    that variable's name, None when the API names none)."""
    env = wire.api_key_env(model)
    api_key = opts.api_key
    if api_key is None and env:
        api_key = api_key_from_env(env)
    return api_key, env


def missing_key(model: Model, env: str | None) -> str:
    """What a call without a key is told (the `auth` error's words)."""
    where = f"set {env} or pass" if env else "pass"
    return f"no API key for {model.provider}: {where} StreamOptions(api_key=...)"


def serialized_payload(req: WireRequest, model: Model, opts: StreamOptions) -> tuple[str, bool]:
    """The request's body text: `StreamOptions.on_payload` applied to the built payload
    (`req.payload` replaced when the hook returns one), then the payload serialized once,
    for every provider and for a batch line alike. Lone surrogates (from a truncated tool
    output, say) cannot be encoded as UTF-8 and are removed from all outbound text, tool
    arguments and schemas included (the bool says some were); NaN is not JSON and fails
    loudly. Raises for a hook that fails or returns something else than a dict."""
    hooked = ""
    if opts.on_payload is not None:
        try:
            replaced = opts.on_payload(req.payload, model)
        except Exception as exc:
            raise ValueError(
                f"StreamOptions.on_payload raised {type(exc).__name__}: {exc}"
            ) from exc
        if replaced is not None:
            if not isinstance(replaced, dict):
                raise TypeError(
                    "StreamOptions.on_payload must return a dict or None, "
                    f"not {type(replaced).__name__}"
                )
            req.payload = replaced
        hooked = " (after StreamOptions.on_payload)"
    try:
        text = json.dumps(req.payload, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"request payload{hooked}: not JSON: {exc}") from None
    body = sanitize_surrogates(text)
    return body, body is not text


def api_key_from_env(env: str) -> str | None:
    """The key in environment variable `env`, surrounding whitespace removed (a `.env` file
    or `$(cat key)` adds a newline or a carriage return; no key has one); None when unset
    or blank. Anything else that is not a key's character raises, naming the variable and
    never showing the key."""
    key = os.environ.get(env, "").strip()
    if not key:
        return None
    problem = key_problem(key)
    if problem is not None:
        raise ValueError(f"{env} (from the environment): {problem}")
    return key


def _endpoint(wire: WireAPI, model: Model, options: StreamOptions) -> Model:
    """The model as it is sent: `options.base_url` wins; else the vendor SDK's variable
    (`OPENAI_BASE_URL`, ...) replaces the vendor's default host, never a URL the model
    chose itself, so a gateway or a local server needs no code change."""
    url = options.base_url or None
    if url is None:
        env = wire.base_url_env.get(model.base_url.rstrip("/"))
        url = (os.environ.get(env, "").strip() or None) if env else None
        problem = base_url_problem(url) if url is not None else None
        if problem is not None:
            raise ValueError(f"{env} (from the environment): {problem}")
    if url is None or url == model.base_url:
        return model
    return model.model_copy(update={"base_url": url})
