"""Keeping every fragment of a key out of a recording (`stream-core record`).

A vendor may echo the key it was sent: whole, `\\u`-escaped inside a JSON string, split
across two streamed deltas, behind a gzip `content-encoding`, or quoted in part in a 401
("sk-abcdefgh...wxyz"). A recording must hold no run of `MIN_FRAGMENT` or more consecutive
characters of any secret, in the bytes or in any decoded view of them. So:

1. the body is stored decoded (`decode_body`): gzip, deflate or br is undone, and the
   recording's headers never carry a `content-encoding`;
2. every run of a secret's characters is scrubbed in the raw bytes, and in each JSON string
   literal once its escapes are undone (`scrub_fragments`), the literal re-encoded so the
   body stays valid;
3. the caller replays the scrubbed body and checks the message it makes (the concatenated
   deltas); a fragment still there has every JSON string literal that shares a few
   characters with a secret scrubbed whole (`scrub_loosely`);
4. whatever is left is checked once more (`leaked`): a recording that still holds a
   fragment is refused, never written.
"""

from __future__ import annotations

import json
import re
import zlib

__all__ = [
    "MIN_FRAGMENT",
    "RecordingLeak",
    "decode_body",
    "leaked",
    "scrub_fragments",
    "scrub_loosely",
]

MIN_FRAGMENT = 8
"""The shortest run of a secret's characters that counts as a leak."""
_LOOSE = 4
"""`scrub_loosely` scrubs a JSON string sharing this many characters with a secret."""
_MAX_DECODED = 256 * 1024 * 1024
_PLACEHOLDER = "[scrubbed]"
_LITERAL = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


class RecordingLeak(ValueError):
    """A recording that would still hold a fragment of a secret: nothing was written."""


def decode_body(body: bytes, content_encoding: str) -> bytes:
    """`body` with its content-encoding undone (at most 256 MiB of output)."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in reversed([c for c in codings if c != "identity"]):
        if coding in ("gzip", "x-gzip", "deflate"):
            wbits = 47 if coding != "deflate" else 15
            try:
                inflater = zlib.decompressobj(wbits)
                out = inflater.decompress(body, _MAX_DECODED)
            except zlib.error:
                if coding != "deflate":
                    raise RecordingLeak("the response body is not valid gzip") from None
                inflater = zlib.decompressobj(-15)  # raw deflate, as some servers send
                out = inflater.decompress(body, _MAX_DECODED)
            if inflater.unconsumed_tail:
                raise RecordingLeak("the response body inflates past 256 MiB")
            body = out
        elif coding == "br":
            try:
                import brotli  # type: ignore[import-not-found,unused-ignore]
            except ImportError:
                raise RecordingLeak(
                    "the response body is brotli-compressed and `brotli` is not installed: "
                    "it cannot be checked for key material, so it is not written"
                ) from None
            body = brotli.decompress(body)
        else:
            raise RecordingLeak(f"the response body's content-encoding {coding!r} is unknown")
    return body


def _windows(secrets: tuple[str, ...], size: int) -> re.Pattern[bytes] | None:
    runs = {s[i : i + size].encode("utf-8") for s in secrets for i in range(len(s) - size + 1)}
    if not runs:
        return None
    # Longest alternatives first is irrelevant (all the same length); repeated, a match
    # covers a whole run of the secret, leaving at most `size - 1` of its characters.
    return re.compile(b"(?:" + b"|".join(re.escape(r) for r in sorted(runs)) + b")+")


def scrub_fragments(data: bytes, secrets: tuple[str, ...]) -> bytes:
    """`data` with every run of `MIN_FRAGMENT` characters of a secret replaced, in the raw
    bytes and inside JSON string literals whose escapes hide it (`\\u0073k-...`)."""
    pattern = _windows(tuple(s for s in secrets if s), MIN_FRAGMENT)
    if pattern is None:
        return data
    data = pattern.sub(_PLACEHOLDER.encode(), data)

    def literal(match: re.Match[bytes]) -> bytes:
        raw = match.group()
        if b"\\" not in raw:
            return raw  # the raw pass saw it as it is
        value = _unescape(raw)
        if value is None:
            return raw
        cleaned = pattern.sub(_PLACEHOLDER.encode(), value.encode("utf-8", "surrogatepass"))
        if cleaned == value.encode("utf-8", "surrogatepass"):
            return raw
        return _literal(cleaned.decode("utf-8", "surrogatepass"))

    return _LITERAL.sub(literal, data)


def scrub_loosely(data: bytes, secrets: tuple[str, ...]) -> bytes:
    """`data` with every JSON string literal that shares `_LOOSE` consecutive characters
    with a secret replaced whole: for a key split across deltas, no one of which holds a
    whole fragment."""
    pattern = _windows(tuple(s for s in secrets if s), _LOOSE)
    if pattern is None:
        return data

    def literal(match: re.Match[bytes]) -> bytes:
        raw = match.group()
        value = _unescape(raw)
        text = raw if value is None else value.encode("utf-8", "surrogatepass")
        return _literal(_PLACEHOLDER) if pattern.search(text) else raw

    return _LITERAL.sub(literal, data)


def leaked(data: bytes | str, secrets: tuple[str, ...]) -> bool:
    """Whether `data`, raw or with its JSON string escapes undone, holds a run of
    `MIN_FRAGMENT` characters of a secret."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    pattern = _windows(tuple(s for s in secrets if s), MIN_FRAGMENT)
    if pattern is None:
        return False
    if pattern.search(raw):
        return True
    for match in _LITERAL.finditer(raw):
        if b"\\" in match.group():
            value = _unescape(match.group())
            if value is not None and pattern.search(value.encode("utf-8", "surrogatepass")):
                return True
    return False


def _unescape(literal: bytes) -> str | None:
    try:
        value = json.loads(literal.decode("utf-8", "surrogateescape"))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) else None


def _literal(value: str) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
