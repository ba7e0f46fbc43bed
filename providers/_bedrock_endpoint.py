"""Where a Bedrock call goes: the AWS region (from the call, the environment, the profile or
the base URL, each checked to be a plain name), the `bedrock-runtime` endpoint of that region
(FIPS and China partitions kept), and the AWS profile named for the call."""

from __future__ import annotations

import os
import re
from urllib.parse import quote

import httpx

from stream_core import Model, StreamOptions
from stream_core.provider import setting_in_url

from . import _aws

__all__ = ["DEFAULT_REGION", "endpoint", "profile", "region"]

_ENDPOINT = re.compile(r"^bedrock-runtime(-fips)?\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
DEFAULT_REGION = "us-east-1"


def region(model: Model, options: StreamOptions) -> str:
    """The AWS region of a call (module docstring), checked to be one plain name (a region
    such as `x.evil.example:1/#` would move the request and its credential to another
    host): anything else raises at `stream()`, naming where it came from."""
    explicit = options.extra.get("region")
    if explicit is not None and explicit != "":
        return _plain(explicit, 'StreamOptions.extra["region"]')
    for env in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        found = os.environ.get(env, "")
        if found.strip():
            return _plain(found, f"{env} (from the environment)")
    configured = _aws.profile_region(profile(options))
    if configured:
        return setting_in_url(configured, "the AWS profile's region (~/.aws/config)")
    match = _ENDPOINT.match(httpx.URL(model.base_url).host)
    return match.group(2) if match else DEFAULT_REGION


def _plain(value: object, where: str) -> str:
    """A region exactly as given: whitespace around it (`AWS_REGION` with a trailing
    newline) raises too, as botocore refuses it, rather than be trimmed into a call."""
    if isinstance(value, str) and value != value.strip():
        raise ValueError(
            f"{where}: {value[:60]!r} has whitespace around the region name; set the name "
            "alone (e.g. 'us-east-1')"
        )
    return setting_in_url(value, where)


def endpoint(model: Model, options: StreamOptions) -> str:
    """The streaming URL: the region's Bedrock endpoint, or a custom base URL as is."""
    base = model.base_url.rstrip("/")
    url = httpx.URL(base or f"https://bedrock-runtime.{DEFAULT_REGION}.amazonaws.com")
    match = _ENDPOINT.match(url.host)
    if match or not base:
        fips, cn = (match.group(1) or "", match.group(3) or "") if match else ("", "")
        base = f"https://bedrock-runtime{fips}.{region(model, options)}.amazonaws.com{cn}"
    return f"{base}/model/{quote(model.id, safe='')}/converse-stream"


def profile(options: StreamOptions) -> str | None:
    profile = options.extra.get("profile")
    return profile if isinstance(profile, str) and profile else None
