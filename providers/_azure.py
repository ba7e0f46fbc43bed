"""Azure OpenAI's endpoint, shared by the two OpenAI APIs (`openai_completions`,
`openai_responses`): which models are Azure's, and the host a catalog model is sent to.

The catalog's Azure base URL is a template, `https://RESOURCE.openai.azure.com/openai/v1`:
`RESOURCE` is nobody's resource. It is filled from the caller's settings on both APIs
(`AZURE_OPENAI_BASE_URL`, the whole URL, wins over `AZURE_OPENAI_RESOURCE_NAME`, one DNS
label); with neither set, the call raises at `stream()` naming both, so the key never
leaves for a placeholder host. A base URL the model or the call chose is used as given.
"""

from __future__ import annotations

import os

from stream_core import Model
from stream_core.provider import base_url_problem, setting_in_url

__all__ = [
    "AZURE_HOST",
    "BASE_URL_ENV",
    "RESOURCE_ENV",
    "TEMPLATE_HOST",
    "azure_base_url",
    "is_azure",
]

AZURE_HOST = ".openai.azure.com"
TEMPLATE_HOST = "//RESOURCE.openai.azure.com"
"""The placeholder host of the catalog's Azure base URL."""
RESOURCE_ENV = "AZURE_OPENAI_RESOURCE_NAME"
BASE_URL_ENV = "AZURE_OPENAI_BASE_URL"


def is_azure(model: Model) -> bool:
    """Azure OpenAI: the provider, or a `*.openai.azure.com` base URL."""
    return model.provider == "azure-openai" or AZURE_HOST in model.base_url.lower()


def azure_base_url(model: Model) -> str:
    """The base URL a model is sent to, its `RESOURCE` placeholder filled (module doc)."""
    base = model.base_url.rstrip("/")
    if TEMPLATE_HOST.lower() not in base.lower():
        return base
    whole = os.environ.get(BASE_URL_ENV, "").strip()
    if whole:
        # Checked like any base URL (scheme, host, no control characters) before use.
        problem = base_url_problem(whole)
        if problem is not None:
            raise ValueError(f"{BASE_URL_ENV} (from the environment): {problem}")
        return whole.rstrip("/")
    name = os.environ.get(RESOURCE_ENV, "").strip()
    if name:
        resource = setting_in_url(name, f"{RESOURCE_ENV} (from the environment)")
        start = base.lower().index(TEMPLATE_HOST.lower())
        return base[: start + 2] + resource + base[start + 2 + len("RESOURCE") :]
    raise ValueError(
        f"model.base_url: {model.provider}/{model.id} has the catalog's placeholder host "
        f"RESOURCE.openai.azure.com; set {RESOURCE_ENV} (your resource's name) or "
        f"{BASE_URL_ENV} (its whole base URL), or pass StreamOptions(base_url=...)"
    )
