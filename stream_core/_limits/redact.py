"""Credentials kept out of the limiter's keys, stores and log lines: a URL's userinfo and
its credential-looking query parameters (`password=`, `key=`, `access_token=`, `sig=`...),
and the API key, kept only as a slow salted hash (`digest`)."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from .._errors import KEPT_LIMIT, redact

__all__ = ["digest", "is_credential", "scrubbed", "shown_url", "without_credentials"]

_CREDENTIAL = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential|session|cookie", re.I)
"""A query parameter whose name says it carries a credential."""

_USERINFO = re.compile(r"(//)[^/\s@?#]*@")
_PARAM = re.compile(
    r"(?i)\b([\w.-]*(?:pass|pwd|secret|token|key|auth|sig|credential|session|cookie)[\w.-]*)"
    r"(\s*[=:]\s*)([^&\s'\",;)]+)"
)

SALT = b"stream-core limit key v1"
"""The library's fixed salt: every process sharing a store makes the same key."""

_digests: dict[str, str] = {}


def digest(secret: str) -> str:
    """The credential's identity in a limit key: scrypt (n=2**14, r=8, p=1: about 16 MiB
    and tens of milliseconds a guess, so a short key is not found by trying them all),
    worked out once per process per credential and kept."""
    found = _digests.get(secret)
    if found is None:
        found = hashlib.scrypt(secret.encode(), salt=SALT, n=2**14, r=8, p=1, dklen=12).hex()
        if len(_digests) >= KEPT_LIMIT:
            _digests.clear()
        _digests[secret] = found
    return found


def is_credential(name: str) -> bool:
    """Whether a query parameter of this name carries a credential."""
    return _CREDENTIAL.search(name) is not None


def without_credentials(url: str) -> tuple[str, str]:
    """(`url` without its userinfo, credential query parameters and fragment, what was
    taken out): the key keeps the endpoint, its hash tells credentials apart."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\1", url).split("?")[0].split("#")[0], url
    taken: list[str] = []
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        taken.append(userinfo)
    kept: list[str] = []
    for pair in parts.query.split("&") if parts.query else ():
        (taken if is_credential(unquote_plus(pair.partition("=")[0])) else kept).append(pair)
    if parts.fragment:
        taken.append(parts.fragment)
    cleaned = urlunsplit((parts.scheme, netloc, parts.path, "&".join(kept), ""))
    return cleaned, "\n".join(taken)


def shown_url(url: str) -> str:
    """`url` for a log line: userinfo and credential query values as `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrubbed(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{pair.partition('=')[0]}=***"
        if is_credential(unquote_plus(pair.partition("=")[0]))
        else pair
        for pair in (parts.query.split("&") if parts.query else ())
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def scrubbed(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Any text (an error a store raised) with every `secrets` value, every URL's
    userinfo and every credential-looking `name=value` blanked."""
    text = redact(text, secrets)
    text = _USERINFO.sub(r"\1***@", text)
    return _PARAM.sub(r"\1\2***", text)
