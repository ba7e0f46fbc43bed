"""Every API with a vendor batch codec, as the crash and fidelity tests and the benchmark
(benchmarks/batch.py) point it at the fake vendor: its model, options and settings for a
server at `url`, and whether its codec and the fake's routes for it exist yet (the codecs
land one by one: an API whose modules are missing is skipped, named)."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stream_core import Model, StreamOptions, get_model
from stream_core.batch import BatchSettings
from stream_core.provider import BATCH_CODECS

__all__ = ["API", "APIS", "AWS_UNSET", "available", "aws_env", "by_name", "path_pattern"]

KEY = "sk-batch-test-key"
ROLE = "arn:aws:iam::123456789012:role/stream-core-batch"
S3_URL = "STREAM_CORE_TEST_S3_URL"
S3_BUCKET = "STREAM_CORE_TEST_S3_BUCKET"
"""Where Bedrock's objects go (a moto server on loopback: `aws_env`), for this process
and the crash test's children."""
VERTEX = "/v1/projects/proj-1/locations/us-central1/publishers/google"


@dataclass(frozen=True)
class API:
    """One batch API as the tests drive it."""

    name: str
    provider: str
    model_id: str
    vendor: str
    """The fake's routes module: `stream_core.testing._batch_routes_<vendor>`."""
    suffix: str = ""
    """What follows the fake's URL in the model's base URL (`/v1`, `/v1beta`)."""
    thinking: bool = False
    """The API carries reasoning in its answers (a thinking turn is scripted)."""
    api: str | None = None
    """The wire API, where the model's default is another (OpenAI Responses)."""
    settings: Callable[[str], BatchSettings] = field(default=lambda url: BatchSettings())
    extra: dict[str, Any] = field(default_factory=dict)
    """More `StreamOptions` fields (beside the key and base URL)."""
    key: bool = True
    """Sent with an API key (Bedrock: AWS credentials from the environment instead)."""
    s3: bool = False
    """Needs an S3-compatible server (`aws_env`)."""

    def model(self) -> Model:
        return get_model(self.provider, self.model_id, api=self.api)

    def base_url(self, url: str) -> str:
        return url + self.suffix

    def options(self, url: str, **more: Any) -> StreamOptions:
        key = KEY if self.key else None
        return StreamOptions(api_key=key, base_url=self.base_url(url), **{**self.extra, **more})

    def min_requests(self) -> int:
        """The fewest requests the vendor takes in a batch (Bedrock: 100)."""
        module = importlib.import_module(self.codec_module())
        return int(module.BATCH.min_requests)

    def prepare(self, server: Any) -> None:
        """Point the fake vendor at what the API needs beside it (Bedrock: the S3 server)."""
        if self.s3:
            from stream_core.testing._batch_routes_bedrock import use_s3

            use_s3(server, os.environ[S3_URL])

    def codec_module(self) -> str:
        m = self.model()
        return "stream_core.providers." + BATCH_CODECS[(m.api, m.provider)]

    def routes_module(self) -> str:
        return f"stream_core.testing._batch_routes_{self.vendor}"

    def missing(self) -> str | None:
        """Why it cannot run yet (a module not there), or None."""
        for name in (self.codec_module(), self.routes_module()):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name == name:
                    return f"{name} does not exist yet"
                raise
        return None


APIS: list[API] = [
    API("anthropic", "anthropic", "claude-haiku-4-5", "anthropic", thinking=True),
    API("openai-chat", "openai", "gpt-4.1-mini", "openai", suffix="/v1"),
    API(
        "openai-responses",
        "openai",
        "gpt-5-mini",
        "openai",
        suffix="/v1",
        thinking=True,
        api="openai-responses",
    ),
    API("mistral", "mistral", "mistral-small-latest", "mistral", thinking=True),
    API("gemini", "google", "gemini-2.5-flash", "gemini", suffix="/v1beta", thinking=True),
    API(
        "vertex",
        "google-vertex",
        "gemini-2.5-flash",
        "vertex",
        suffix=VERTEX,
        thinking=True,
        settings=lambda url: BatchSettings(storage_url=url, bucket="eval-bucket"),
    ),
    API(
        "bedrock",
        "amazon-bedrock",
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        "bedrock",
        thinking=True,
        key=False,
        s3=True,
        settings=lambda url: BatchSettings(
            storage_url=os.environ[S3_URL],
            bucket=os.environ[S3_BUCKET],
            role_arn=ROLE,
            prefix="runs/eval",
        ),  # fmt: skip
    ),
]


def by_name(name: str) -> API:
    for api in APIS:
        if api.name == name:
            return api
    raise KeyError(name)


def aws_env(s3_url: str, bucket: str) -> dict[str, str]:
    """The environment Bedrock's side runs in: moto's keys (they reach no account), the
    region, the S3 server and bucket; other AWS settings unset (`None`)."""
    from moto_server import CREDENTIALS

    return {
        "AWS_ACCESS_KEY_ID": CREDENTIALS.access_key_id,
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS.secret_access_key,
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": s3_url,
        S3_URL: s3_url,
        S3_BUCKET: bucket,
    }


AWS_UNSET = ("AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION")
_MOTO: list[Any] = []


def environment(api: API) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to unset) for `api`: for Bedrock, a moto server (started
    once per process, stopped at its exit; skips the test when moto cannot start) and a
    new bucket in it; nothing for the others."""
    if not api.s3:
        return {}, ()
    import atexit
    import uuid

    from moto_server import MotoServer

    if not _MOTO:
        server = MotoServer().start()
        atexit.register(server.stop)
        _MOTO.append(server)
    server = _MOTO[0]
    bucket = server.bucket(f"sc-{uuid.uuid4().hex[:16]}")
    bucket.client.close()
    return aws_env(server.url, bucket.s3.bucket), AWS_UNSET


def available() -> list[API]:
    return [a for a in APIS if a.missing() is None]


_TAG = re.compile(r"sc[0-9a-f]{10}p\d+")


def path_pattern(path: str) -> str:
    """A path seen in one run as a pattern matching it in any run: the part's tag and the
    vendor's numbers let vary."""
    out: list[str] = []
    for piece in re.split(r"(sc[0-9a-f]{10}p\d+|\d+)", path):
        if not piece:
            continue
        if _TAG.fullmatch(piece):
            out.append(r"sc[0-9a-f]{10}p\d+")
        elif piece.isdigit():
            out.append(r"\d+")
        else:
            out.append(re.escape(piece))
    return "".join(out)
