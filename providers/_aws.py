"""AWS request signing (Signature Version 4) and the standard credential chain.

Written on the standard library (hashlib, hmac, configparser) rather than botocore or
aws-sdk-signers: signing one POST is some sixty lines, pinned by AWS's published test
vectors (tests/test_bedrock.py), and the heavy SDKs would bring session machinery onto
the request path for nothing.

Credentials come, first found wins, from: the environment (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), then the profile (`AWS_PROFILE`, else
`default`) in the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
`~/.aws/credentials`), then the same profile's static keys in the config file
(`AWS_CONFIG_FILE`, else `~/.aws/config`, sections `[profile NAME]`). SSO, process and
instance-role credentials are not read: export them (`aws configure export-credentials
--format env`) or use a Bedrock API key.
"""

from __future__ import annotations

import configparser
import datetime
import hashlib
import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import httpx

__all__ = ["Credentials", "find_credentials", "profile_region", "sign_request"]

_ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.secret_access_key, self.session_token) if s)


def _profile_name(profile: str | None) -> str:
    return (
        profile
        or os.environ.get("AWS_PROFILE")
        or os.environ.get("AWS_DEFAULT_PROFILE")
        or "default"
    )


_files: dict[str, tuple[tuple[int, int] | None, configparser.RawConfigParser]] = {}


def _read(path_env: str, default: str) -> configparser.RawConfigParser:
    """The parsed file, read once per process and again only when it changes.

    Called from the request's build and signing, on the event loop: a `stat` (its mtime
    and size) per call instead of reading and parsing the file each time, so a rotated
    key (`aws sso login`, `aws configure`) is still picked up at the next call.
    """
    path = os.path.expanduser(os.environ.get(path_env) or str(Path.home() / ".aws" / default))
    try:
        st = os.stat(path)
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    cached = _files.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    parser = configparser.RawConfigParser()
    if stamp is not None:
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            parser = configparser.RawConfigParser()  # an unreadable file has no credentials
    _files[path] = (stamp, parser)
    return parser


def _section(parser: configparser.RawConfigParser, *names: str) -> dict[str, str]:
    for name in names:
        if parser.has_section(name):
            return dict(parser.items(name))
    return {}


def _from(values: dict[str, str]) -> Credentials | None:
    key = values.get("aws_access_key_id", "").strip()
    secret = values.get("aws_secret_access_key", "").strip()
    if not key or not secret:
        return None
    token = values.get("aws_session_token", "").strip() or None
    return Credentials(key, secret, token)


def find_credentials(profile: str | None = None) -> Credentials | None:
    """The first credentials of the chain (module docstring), or None. An explicit
    `profile` skips the environment keys, as the AWS CLI does."""
    if profile is None:
        env = {
            "aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID", ""),
            "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
            "aws_session_token": os.environ.get("AWS_SESSION_TOKEN", ""),
        }
        found = _from(env)
        if found is not None:
            return found
    name = _profile_name(profile)
    found = _from(_section(_read("AWS_SHARED_CREDENTIALS_FILE", "credentials"), name))
    if found is not None:
        return found
    config = _read("AWS_CONFIG_FILE", "config")
    return _from(_section(config, f"profile {name}", name))


def profile_region(profile: str | None = None) -> str | None:
    """The `region` of the profile in the config file, if it sets one."""
    name = _profile_name(profile)
    region = _section(_read("AWS_CONFIG_FILE", "config"), f"profile {name}", name).get("region")
    return region.strip() or None if region else None


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def sign_request(
    request: httpx.Request,
    credentials: Credentials,
    *,
    region: str,
    service: str,
    now: datetime.datetime | None = None,
) -> str:
    """Add `x-amz-date` (and `x-amz-security-token`) and the `authorization` header to
    `request`, signing its method, path, query, host and those headers, and its exact body;
    returns the signature. Path segments are encoded a second time, as every AWS service
    but S3 expects; for `service="s3"` the path is encoded once and the body's hash is sent
    and signed as `x-amz-content-sha256`, as S3 requires."""
    when = (now or _utcnow()).astimezone(datetime.UTC)
    stamp = when.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    headers = request.headers
    headers["x-amz-date"] = stamp
    if credentials.session_token:
        headers["x-amz-security-token"] = credentials.session_token
    signed = {
        "host": headers.get("host") or request.url.netloc.decode("ascii"),
        "x-amz-date": stamp,
    }
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    body_hash = hashlib.sha256(request.content).hexdigest()
    raw_path = request.url.raw_path.split(b"?", 1)[0].decode("ascii") or "/"
    if service == "s3":
        headers["x-amz-content-sha256"] = signed["x-amz-content-sha256"] = body_hash
        path = quote(unquote(raw_path), safe="/~")
    else:
        path = quote(raw_path, safe="/~")
    names = ";".join(sorted(signed))
    query = "&".join(
        sorted(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
            for k, v in request.url.params.multi_items()
        )
    )
    canonical = "\n".join(
        [
            request.method,
            path,
            query,
            "".join(f"{k}:{' '.join(signed[k].split())}\n" for k in sorted(signed)),
            names,
            body_hash,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [_ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()]
    )
    key = _hmac(("AWS4" + credentials.secret_access_key).encode("utf-8"), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"{_ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    return signature
