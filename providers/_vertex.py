"""Vertex AI, the Gemini API's other home: the endpoint filled from the project and location
(never sent as a template), the express-mode key, and the OAuth token from Application
Default Credentials (the optional `vertex` extra), fetched in a worker thread and kept
until it nears its expiry."""

from __future__ import annotations

import datetime
import importlib.util
import os
import sys
import threading
import time
from typing import Any

import anyio

from stream_core import Model, StreamError, StreamOptions
from stream_core.provider import StreamFailure, setting_in_url

__all__ = [
    "ANTHROPIC_VERTEX",
    "REFRESH_MARGIN",
    "VERTEX",
    "VERTEX_BASE_URL",
    "VERTEX_KEY_ENV",
    "VertexToken",
    "google_auth_installed",
    "vertex_base_url",
    "vertex_key",
    "vertex_token",
]

VERTEX = "google-vertex"
ANTHROPIC_VERTEX = "anthropic-vertex"
"""Claude on Vertex AI: the Messages API at `.../publishers/anthropic/models/{id}:
streamRawPredict`."""
_VERTEX_PROVIDERS = frozenset({VERTEX, ANTHROPIC_VERTEX})
VERTEX_BASE_URL = "https://{host}/v1/projects/{project}/locations/{location}/publishers/google"
VERTEX_KEY_ENV = "GOOGLE_CLOUD_API_KEY"
VERTEX_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def vertex_base_url(model: Model, options: StreamOptions) -> str:
    """The Gemini API base as given. For Vertex AI, `VERTEX_BASE_URL`'s placeholders are
    filled from the project and location (a base URL without them is used as it is); each
    must be a plain name, and with no project (and no express-mode key) the call raises at
    `stream()` naming the settings: a template is never sent as it is."""
    if model.provider not in _VERTEX_PROVIDERS or "{" not in model.base_url:
        return model.base_url
    env = os.environ
    project = _vertex_setting(
        ("project", model.compat.get("project")),
        ("GOOGLE_CLOUD_PROJECT", env.get("GOOGLE_CLOUD_PROJECT")),
        ("GCLOUD_PROJECT", env.get("GCLOUD_PROJECT")),
        part="path",
    )
    location = _vertex_setting(
        ("location", model.compat.get("location")),
        ("GOOGLE_CLOUD_LOCATION", env.get("GOOGLE_CLOUD_LOCATION")),
        part="host",
    )
    location = location or "global"
    host = "aiplatform.googleapis.com"
    if location != "global":
        host = f"{location}-{host}"
    if not project:
        if model.provider == VERTEX and vertex_key(options):
            return f"https://{host}/v1/publishers/google"  # express mode: the key names it
        express = (
            f" (or give an express-mode API key in {VERTEX_KEY_ENV})"
            if model.provider == VERTEX
            else ""
        )
        raise ValueError(
            "model.base_url: Vertex AI needs a project to fill its template: set "
            f'GOOGLE_CLOUD_PROJECT or Model.compat["project"]{express}'
        )
    return model.base_url.format(host=host, project=project, location=location)


def _vertex_setting(*found: tuple[str, object], part: str) -> str | None:
    """The first setting given, checked as one host label or path segment, naming where it
    came from when it is not one (a location like `x.evil.example/#` would move the host)."""
    for name, value in found:
        if value is None or value == "" or (isinstance(value, str) and not value.strip()):
            continue
        where = f'Model.compat["{name}"]' if name.islower() else f"{name} (from the environment)"
        if isinstance(value, str) and value != value.strip():
            # A trailing newline (an env file, a secret mount) is refused, not trimmed.
            raise ValueError(
                f"{where}: {value[:60]!r} has whitespace around the name; set the name alone"
            )
        return setting_in_url(value, where, part=part)
    return None


def vertex_key(options: StreamOptions) -> str | None:
    return options.api_key or os.environ.get(VERTEX_KEY_ENV) or None


def google_auth_installed() -> bool:
    if "google.auth" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.auth") is not None
    except (ImportError, ValueError):
        return False


class VertexToken(str):
    """An access token, carrying `principal`: whom it was issued to (the service account's
    email, else the user's account or client id), never the token itself. The limiter keys
    the call on it and the project, so a refreshed token is the same key."""

    principal: str


REFRESH_MARGIN = 300.0
"""Seconds before its expiry a kept token is refreshed (a call must not start on a token
that lapses mid-stream; google-auth itself refreshes 225 s before)."""


class _Kept:
    __slots__ = ("credentials", "principal", "token", "until")

    def __init__(self, credentials: Any) -> None:
        self.credentials = credentials
        self.token: VertexToken | None = None
        self.until = 0.0  # wall-clock seconds: the token's expiry less the margin
        self.principal = "application-default"


_kept: dict[tuple[object, ...], _Kept] = {}
_kept_lock = threading.Lock()
"""Credentials by their source, refreshed by one thread at a time (a burst of first calls
fetches one token, not one each)."""


def _source() -> tuple[object, ...]:
    """Where Application Default Credentials come from now: the key file named by
    `GOOGLE_APPLICATION_CREDENTIALS` (and its stamp, so a rotated key is read anew), else
    gcloud's or the metadata server's."""
    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or ""
    stamp: tuple[int, int] | None = None
    if path:
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return (path, stamp, os.environ.get("CLOUDSDK_CONFIG") or "")


def _fresh(kept: _Kept | None) -> VertexToken | None:
    if kept is None or kept.token is None:
        return None
    return kept.token if time.time() < kept.until else None


def _principal(credentials: Any) -> str:
    for name in ("service_account_email", "account", "client_id", "quota_project_id"):
        value = getattr(credentials, name, None)
        if isinstance(value, str) and value and value != "default":
            return value
    return "application-default"


def _expiry(credentials: Any) -> float:
    """Wall-clock seconds of the token's expiry (google-auth keeps a naive UTC datetime);
    an hour from now when it gives none."""
    expiry = getattr(credentials, "expiry", None)
    if isinstance(expiry, datetime.datetime):
        if expiry.tzinfo is None:
            expiry = expiry.replace(tzinfo=datetime.UTC)
        return expiry.timestamp()
    return time.time() + 3600.0


def _refresh(source: tuple[object, ...]) -> VertexToken:
    """The source's token, fetched only when none is kept or it nears expiry (blocking:
    run in a worker thread)."""
    with _kept_lock:
        kept = _kept.get(source)
        token = _fresh(kept)
        if token is not None:
            return token
        import google.auth
        import google.auth.transport.requests

        if kept is None:
            credentials, _ = google.auth.default(scopes=[VERTEX_SCOPE])
            kept = _Kept(credentials)
        kept.credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call,unused-ignore]
        token = VertexToken(str(kept.credentials.token))
        token.principal = kept.principal = _principal(kept.credentials)
        kept.token = token
        kept.until = _expiry(kept.credentials) - REFRESH_MARGIN
        if len(_kept) >= 16 and source not in _kept:
            _kept.clear()  # sources come from the environment: a handful, bounded anyway
        _kept[source] = kept
        return token


async def vertex_token(model: Model) -> str | None:
    """An OAuth token from Application Default Credentials (Vertex AI without a key), kept
    per credential source until `REFRESH_MARGIN` seconds before it expires: one token
    request for many calls. A `VertexToken`: its `principal` keys the limiter.

    google-auth's refresh is blocking I/O (a metadata server or token endpoint): it runs in
    a worker thread so the event loop keeps going.
    """
    if model.provider not in _VERTEX_PROVIDERS:
        return None
    source = _source()
    kept = _fresh(_kept.get(source))
    if kept is not None:
        return kept
    # Only look for google-auth here: importing it (requests, urllib3) is itself tens of
    # milliseconds of CPU, so it happens in the worker thread with the refresh.
    if not google_auth_installed():
        raise StreamFailure(
            StreamError(
                kind="auth",
                message="Vertex AI without an API key needs Application Default Credentials: "
                "install stream-core[vertex], or set GOOGLE_CLOUD_API_KEY",
            )
        )

    try:
        return await anyio.to_thread.run_sync(_refresh, source, abandon_on_cancel=True)
    except Exception as exc:  # google.auth.exceptions.* and the transport's errors
        raise StreamFailure(
            StreamError(kind="auth", message=f"Vertex AI credentials: {type(exc).__name__}: {exc}")
        ) from None
