"""The key a call is limited under: (provider, base URL, a hash of the API key, model),
with no part of a credential in it (`redact`)."""

from __future__ import annotations

from .._errors import KEPT_LIMIT
from . import redact

__all__ = ["known_key", "limit_key"]


_endpoints: dict[str, tuple[str, str]] = {}
"""Each base URL that carries a credential: (without it, the credential)."""


_known: dict[tuple[str, str, str | None, str], str] = {}
"""The keys worked out in this process, by what they were made of."""


def known_key(parts: tuple[str, str, str | None, str]) -> str | None:
    """The key `limit_key(*parts)` made before in this process, else None."""
    return _known.get(parts)


def limit_key(provider: str, base_url: str, secret: str | None, model: str) -> str:
    """The key a call is limited under. No part of a credential is in it: the API key
    only as a slow salted hash (`redact.digest`, worked out once per process), the base
    URL without userinfo or credential query parameters (folded into the hash, so two
    credentials are still two keys)."""
    parts = (provider, base_url, secret, model)
    if "@" in base_url or "?" in base_url or "#" in base_url:
        found = _endpoints.get(base_url)
        if found is None:
            found = redact.without_credentials(base_url)
            if len(_endpoints) >= KEPT_LIMIT:
                _endpoints.clear()
            _endpoints[base_url] = found
        base_url, taken = found
        if taken:
            secret = f"{secret or ''}\n{taken}"
    digest = redact.digest(secret) if secret else "-"
    key = f"{provider}|{base_url}|{digest}|{model}"
    if len(_known) >= KEPT_LIMIT:
        _known.clear()
    _known[parts] = key
    return key
