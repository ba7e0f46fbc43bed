"""Vertex AI, the Gemini API's other home: the endpoint filled from the project and location
(never sent as a template), the express-mode key, and the OAuth token from Application
Default Credentials (the optional `vertex` extra), fetched in a worker thread."""

from __future__ import annotations

import importlib.util
import os
import sys

import anyio

from stream_core import Model, StreamError, StreamOptions
from stream_core.provider import StreamFailure, setting_in_url

__all__ = [
    "ANTHROPIC_VERTEX",
    "VERTEX",
    "VERTEX_BASE_URL",
    "VERTEX_KEY_ENV",
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


async def vertex_token(model: Model) -> str | None:
    """An OAuth token from Application Default Credentials (Vertex AI without a key).

    google-auth's refresh is blocking I/O (a metadata server or token endpoint): it runs in
    a worker thread so the event loop keeps going.
    """
    if model.provider not in _VERTEX_PROVIDERS:
        return None
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

    def fetch() -> str:
        import google.auth
        import google.auth.transport.requests

        credentials, _ = google.auth.default(scopes=[VERTEX_SCOPE])
        credentials.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call,unused-ignore]
        return str(credentials.token)

    try:
        return await anyio.to_thread.run_sync(fetch, abandon_on_cancel=True)
    except Exception as exc:  # google.auth.exceptions.* and the transport's errors
        raise StreamFailure(
            StreamError(kind="auth", message=f"Vertex AI credentials: {type(exc).__name__}: {exc}")
        ) from None
