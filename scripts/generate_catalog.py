"""Generate `stream_core/catalog.json` from a local copy of the models.dev data.

    uv run python scripts/generate_catalog.py PATH_TO_MODELS_DEV [--revision REV] [--check]

models.dev (https://github.com/sst/models.dev, MIT licence, (c) 2025 models.dev) keeps one
TOML file per model under `providers/<provider>/models/`, some of them inheriting from a
shared `models/<id>.toml` through `base_model`. This script reads those files for the
providers stream-core serves (the `PROVIDERS` table below), keeps what a caller needs
(limits, reasoning, input modalities, knowledge cut-off, list prices) and writes one JSON
file, sorted and one model per line, so a refresh is one command and its diff reviewable.

The shipped file was generated from models.dev revision
f3fc692299671838c7c65fd8126bf84d81a2e817 (2026-07-02). `--check` exits 1 when the file on
disk differs from what the data gives (the reproducibility check).

Prices: genai-prices' base prices (`stream_core/prices.json`) where it knows the model, so
`Model.prices` is the price `Usage.cost` is computed with; models.dev's elsewhere. After a
prices refresh, `generate_catalog.py -` aligns the shipped file without models.dev.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "stream_core" / "catalog.json"

# Chat Completions first: it is the API every OpenAI-compatible row speaks and the one
# served today; the Responses API is listed so `get_model(..., api="openai-responses")`
# picks it. Models only reachable through Responses (pro, codex, deep research) list it alone.
_OPENAI_APIS = ["openai-completions", "openai-responses"]
_RESPONSES_ONLY = re.compile(r"(-pro$|-pro-|codex|deep-research)")


@dataclass(frozen=True)
class Row:
    """How stream-core serves one models.dev provider."""

    source: str
    """The models.dev provider directory."""
    name: str
    apis: list[str]
    base_url: str
    compat: dict[str, Any] = field(default_factory=dict)
    """Flags for the OpenAI-compatible provider, for rows its COMPAT table lacks."""


# Our provider name -> where its models come from and how they are reached.
PROVIDERS: dict[str, Row] = {
    "anthropic": Row("anthropic", "Anthropic", ["anthropic-messages"], "https://api.anthropic.com"),
    "openai": Row("openai", "OpenAI", _OPENAI_APIS, "https://api.openai.com/v1"),
    "azure-openai": Row(
        "azure",
        "Azure OpenAI",
        _OPENAI_APIS,
        "https://RESOURCE.openai.azure.com/openai/v1",
    ),
    "google": Row(
        "google",
        "Google",
        ["google-generative-ai"],
        "https://generativelanguage.googleapis.com/v1beta",
    ),
    # Vertex and Bedrock build their endpoint from project/location or region.
    # Vertex AI speaks the Gemini API; the provider fills project, location and host in.
    "google-vertex": Row(
        "google-vertex",
        "Vertex AI",
        ["google-generative-ai"],
        "https://{host}/v1/projects/{project}/locations/{location}/publishers/google",
    ),
    "amazon-bedrock": Row(
        "amazon-bedrock",
        "Amazon Bedrock",
        ["bedrock-converse-stream"],
        "https://bedrock-runtime.us-east-1.amazonaws.com",
    ),
    "mistral": Row("mistral", "Mistral", ["mistral-conversations"], "https://api.mistral.ai"),
    "openrouter": Row(
        "openrouter", "OpenRouter", ["openai-completions"], "https://openrouter.ai/api/v1"
    ),
    "groq": Row("groq", "Groq", ["openai-completions"], "https://api.groq.com/openai/v1"),
    "xai": Row("xai", "xAI", ["openai-completions"], "https://api.x.ai/v1"),
    "deepseek": Row("deepseek", "DeepSeek", ["openai-completions"], "https://api.deepseek.com"),
    "cerebras": Row("cerebras", "Cerebras", ["openai-completions"], "https://api.cerebras.ai/v1"),
    "together": Row(
        "togetherai", "Together AI", ["openai-completions"], "https://api.together.xyz/v1"
    ),
    "fireworks": Row(
        "fireworks-ai",
        "Fireworks AI",
        ["openai-completions"],
        "https://api.fireworks.ai/inference/v1",
    ),
    "ollama-cloud": Row(
        "ollama-cloud",
        "Ollama Cloud",
        ["openai-completions"],
        "https://ollama.com/v1",
        compat={"env": "OLLAMA_API_KEY", "key_required": True},
    ),
    "lmstudio": Row("lmstudio", "LM Studio", ["openai-completions"], "http://localhost:1234/v1"),
}

_IMAGE_INPUT = ("text", "image")


def load_toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


def merge_deep(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` wins; tables merge key by key, arrays and values are replaced (as models.dev)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_deep(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def omit(target: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    node: Any = target
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def resolve(raw: dict[str, Any], root: Path) -> dict[str, Any]:
    """A provider model file with its `base_model` (a shared `models/<id>.toml`) applied."""
    base_id = raw.get("base_model")
    if base_id is None:
        return raw
    base = load_toml(root / "models" / f"{base_id}.toml")
    for key in ("benchmarks", "license", "links", "weights"):
        base.pop(key, None)
    over = {k: v for k, v in raw.items() if k not in ("base_model", "base_model_omit")}
    merged = merge_deep(base, over)
    for dotted in raw.get("base_model_omit", []):
        omit(merged, dotted)
    return merged


def _price(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def convert(model_id: str, data: dict[str, Any], row: Row) -> dict[str, Any] | None:
    """Our entry for one model, or None for what a chat stream cannot use."""
    if data.get("status") == "deprecated" or data.get("provider"):
        # A per-model `[provider]` routes elsewhere (another SDK or endpoint): not one of ours.
        return None
    modalities = data.get("modalities", {})
    if "text" not in modalities.get("output", ["text"]) or "embed" in model_id:
        return None
    limit = data.get("limit", {})
    if not limit.get("context"):
        return None  # speech and image-generation models carry no token window
    entry: dict[str, Any] = {
        "id": model_id,
        "name": data.get("name", model_id),
        "reasoning": bool(data.get("reasoning", False)),
        "input": [m for m in _IMAGE_INPUT if m in modalities.get("input", ["text"])],
        "context_window": int(limit.get("context", 0)),
        "max_tokens": int(limit.get("output", 0)),
    }
    if row.apis == _OPENAI_APIS and _RESPONSES_ONLY.search(model_id):
        entry["apis"] = ["openai-responses"]
    if data.get("knowledge"):
        entry["knowledge"] = str(data["knowledge"])
    cost = data.get("cost")
    if isinstance(cost, dict):
        prices = {
            k: p
            for k in ("input", "output", "cache_read", "cache_write")
            if (p := _price(cost.get(k))) is not None
        }
        if prices:
            entry["prices"] = prices
    return entry


def generate(root: Path, revision: str) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    models: list[dict[str, Any]] = []
    for ours, row in sorted(PROVIDERS.items()):
        src = root / "providers" / row.source
        meta = load_toml(src / "provider.toml")
        providers[ours] = {
            "name": row.name,
            "apis": row.apis,
            "base_url": row.base_url,
            "env": meta.get("env", []),
            "source": row.source,
        }
        if row.compat:
            providers[ours]["compat"] = row.compat
        model_dir = src / "models"
        for path in sorted(model_dir.rglob("*.toml")):
            model_id = path.relative_to(model_dir).as_posix()[: -len(".toml")]
            entry = convert(model_id, resolve(load_toml(path), root), row)
            if entry is not None:
                models.append({"provider": ours, **entry})
    models.sort(key=lambda m: (m["provider"], m["id"]))
    align_prices(providers, models)
    return {
        "source": {
            "data": "https://github.com/sst/models.dev",
            "revision": revision,
            "licence": "MIT (c) 2025 models.dev",
        },
        "providers": providers,
        "models": models,
    }


def align_prices(providers: dict[str, Any], models: list[dict[str, Any]]) -> int:
    """Give each model the prices its cost is computed with: genai-prices' base prices
    (`stream_core/prices.json`) where it knows the model, else models.dev's. One price per
    model (issue 27): `Model.prices` never disagrees with `Usage.cost`. Returns how many
    changed."""
    from stream_core import Model, ModelPrices
    from stream_core._cost import list_prices

    changed = 0
    for entry in models:
        row = providers[entry["provider"]]
        model = Model(
            id=entry["id"],
            api=(entry.get("apis") or row["apis"])[0],
            provider=entry["provider"],
            base_url=row["base_url"],
            prices=ModelPrices(**entry.get("prices", {})),
        )
        found = list_prices(model)
        prices = {k: v for k, v in found.model_dump().items() if v is not None}
        if prices != entry.get("prices", {}):
            changed += 1
            if prices:
                entry["prices"] = prices
            else:
                entry.pop("prices", None)
    return changed


def render(catalog: dict[str, Any]) -> str:
    """Stable JSON: sorted keys, one model per line (a price change is a one-line diff)."""
    head = {k: v for k, v in catalog.items() if k != "models"}
    text = json.dumps(head, indent=1, sort_keys=True, ensure_ascii=False)
    lines = [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in catalog["models"]]
    body = ",\n  ".join(lines)
    return text[:-2] + ',\n "models": [\n  ' + body + "\n ]\n}\n"


def _git_revision(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "models_dev",
        type=Path,
        help="a local copy of the models.dev repository ('-': align the shipped file's "
        "prices with prices.json only)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--revision", help="models.dev commit the copy is at (default: ask git, else unknown)"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if --out differs instead of writing it"
    )
    args = parser.parse_args(argv)
    if str(args.models_dev) == "-":
        catalog = json.loads(args.out.read_text(encoding="utf-8"))
        changed = align_prices(catalog["providers"], catalog["models"])
        args.out.write_text(render(catalog), encoding="utf-8")
        print(f"wrote {args.out}: {changed} models' prices aligned with prices.json")
        return 0
    revision = args.revision or _git_revision(args.models_dev) or "unknown"
    text = render(generate(args.models_dev, revision))
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date with {args.models_dev}", file=sys.stderr)
            return 1
        print(f"{args.out} matches {args.models_dev} at {revision}")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
