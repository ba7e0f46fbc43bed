"""The catalog: its generator on a models.dev-shaped tree, the shipped file, `get_model`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from stream_core import Model, get_model, list_models, register_model
from stream_core import _models as models_module
from stream_core.providers.openai_completions import COMPAT

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "stream_core" / "catalog.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_catalog", ROOT / "scripts" / "generate_catalog.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _generator()

# --- the generator on a small models.dev-shaped tree ---------------------------------------

_SONNET = """
name = "Claude Sonnet 4.5"
reasoning = true
knowledge = "2025-07-31"
[cost]
input = 3.00
output = 15.00
cache_read = 0.30
cache_write = 3.75
[limit]
context = 200_000
output = 64_000
[modalities]
input = ["text", "image", "pdf"]
output = ["text"]
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Every served provider with no models, plus a few that exercise each rule."""
    for row in gen.PROVIDERS.values():
        _write(tmp_path / "providers" / row.source / "provider.toml", 'name = "X"\nenv = ["K"]\n')
    anthropic = tmp_path / "providers" / "anthropic" / "models"
    _write(anthropic / "claude-sonnet-4-5.toml", _SONNET)
    _write(
        anthropic / "claude-old.toml",
        _SONNET.replace('name = "Claude Sonnet 4.5"', 'name = "Old"\nstatus = "deprecated"'),
    )
    openai = tmp_path / "providers" / "openai" / "models"
    _write(
        openai / "gpt-x.toml",
        '[limit]\ncontext = 1000\noutput = 100\n[modalities]\ninput = ["text"]\n'
        'output = ["text"]\n[cost]\ninput = 1\noutput = 2\n',
    )
    _write(openai / "gpt-x-pro.toml", "[limit]\ncontext = 1000\noutput = 100\n")
    _write(openai / "text-embedding-x.toml", "[limit]\ncontext = 8000\noutput = 3000\n")
    _write(openai / "gpt-image-x.toml", '[modalities]\ninput = ["text"]\noutput = ["image"]\n')
    # A provider file inheriting from a shared model, overriding one price, dropping another.
    _write(tmp_path / "models" / "meta" / "llama-x.toml", _SONNET.replace("Sonnet 4.5", "Llama"))
    _write(
        tmp_path / "providers" / "groq" / "models" / "meta-llama" / "llama-x.toml",
        'base_model = "meta/llama-x"\nbase_model_omit = ["cost.cache_write"]\n'
        "[cost]\ninput = 0.5\n",
    )
    return tmp_path


def test_generator_maps_models_dev_files_to_entries(tree: Path) -> None:
    catalog = gen.generate(tree, "abc123")
    by_key = {(m["provider"], m["id"]): m for m in catalog["models"]}

    assert catalog["source"]["revision"] == "abc123"
    assert "MIT" in catalog["source"]["licence"]
    assert set(catalog["providers"]) == set(gen.PROVIDERS)
    # Deprecated, embedding and image-only models are not chat models we serve.
    assert sorted(by_key) == [
        ("anthropic", "claude-sonnet-4-5"),
        ("groq", "meta-llama/llama-x"),
        ("openai", "gpt-x"),
        ("openai", "gpt-x-pro"),
    ]
    sonnet = by_key[("anthropic", "claude-sonnet-4-5")]
    assert sonnet == {
        "provider": "anthropic",
        "id": "claude-sonnet-4-5",
        "name": "Claude Sonnet 4.5",
        "reasoning": True,
        "input": ["text", "image"],
        "context_window": 200_000,
        "max_tokens": 64_000,
        "knowledge": "2025-07-31",
        "prices": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    }
    llama = by_key[("groq", "meta-llama/llama-x")]
    assert llama["name"] == "Claude Llama"
    assert llama["prices"] == {"input": 0.5, "output": 15.0, "cache_read": 0.3}
    assert "prices" not in by_key[("openai", "gpt-x-pro")]  # unknown stays unknown, not 0
    # Pro models are served through the Responses API only.
    assert by_key[("openai", "gpt-x-pro")]["apis"] == ["openai-responses"]
    assert "apis" not in by_key[("openai", "gpt-x")]


def test_generator_output_is_stable_and_checkable(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    args = [str(tree), "--revision", "abc123", "--out", str(out)]

    assert gen.main(args) == 0
    first = out.read_text(encoding="utf-8")
    assert gen.main([*args, "--check"]) == 0
    assert json.loads(first)["models"][0]["id"] == "claude-sonnet-4-5"
    # One model per line: a price change is a one-line diff.
    assert sum('"provider": ' in line for line in first.splitlines()) == 4

    _write(tree / "providers" / "openai" / "models" / "gpt-y.toml", "[limit]\ncontext = 5\n")
    assert gen.main([*args, "--check"]) == 1
    assert out.read_text(encoding="utf-8") == first  # --check never writes


# --- the shipped file -----------------------------------------------------------------------


def test_shipped_catalog_has_every_served_provider() -> None:
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    providers = {m["provider"] for m in data["models"]}

    assert set(data["providers"]) == set(gen.PROVIDERS) == providers
    # Every hosted OpenAI-compatible row has its models; local servers take custom models.
    hosted = set(COMPAT) - {"vllm", "lmstudio", "llama.cpp", "ollama"}
    assert hosted <= providers
    assert len(data["source"]["revision"]) == 40
    for row in data["providers"].values():
        for api in row["apis"]:
            assert api in {
                "anthropic-messages",
                "openai-completions",
                "openai-responses",
                "google-generative-ai",
                "bedrock-converse-stream",
                "mistral-conversations",
            }


def test_shipped_catalog_is_sorted_and_every_entry_builds() -> None:
    keys = [(m.provider, m.id) for m in list_models()]

    assert keys == sorted(keys)
    assert len(keys) > 500
    for m in list_models():
        assert m.context_window > 0 and m.max_tokens > 0, m
        assert m.prices.input is None or m.prices.input >= 0


def test_the_package_ships_the_catalog() -> None:
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # The wheel packages the whole stream_core folder; the data file is inside it.
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["stream_core"]
    assert SHIPPED.parent.name == "stream_core"
    assert pyproject["project"]["requires-python"] == ">=3.11"


# --- get_model ------------------------------------------------------------------------------


def test_known_models_carry_their_metadata() -> None:
    sonnet = get_model("anthropic", "claude-sonnet-4-5")

    assert sonnet.api == "anthropic-messages"
    assert sonnet.base_url == "https://api.anthropic.com"
    assert sonnet.reasoning and "image" in sonnet.input
    assert sonnet.context_window == 200_000 and sonnet.max_tokens == 64_000
    assert sonnet.prices.input == 3.0 and sonnet.prices.cache_write == 3.75
    assert sonnet.knowledge == "2025-07-31"
    gemini = get_model("google", "gemini-2.5-pro")
    assert gemini.api == "google-generative-ai"
    assert get_model("amazon-bedrock", list_models("amazon-bedrock")[0].id).api == (
        "bedrock-converse-stream"
    )
    assert get_model("mistral", list_models("mistral")[0].id).api == "mistral-conversations"


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [("anthropic", "claude-sonnet-4-5-20250929"), ("openai", "gpt-4o-2024-08-06")],
)
def test_dated_snapshots_resolve(provider: str, model_id: str) -> None:
    model = get_model(provider, model_id)

    assert model.id == model_id
    assert model.provider == provider


def test_a_dated_snapshot_the_catalog_lacks_resolves_to_its_alias() -> None:
    model = get_model("openai", "gpt-4.1-2025-04-14")

    assert model.id == "gpt-4.1-2025-04-14"  # the snapshot is what goes on the wire
    assert model.context_window == get_model("openai", "gpt-4.1").context_window


def test_provider_slash_model_works_as_on_the_command_line() -> None:
    assert get_model("anthropic/claude-haiku-4-5") == get_model("anthropic", "claude-haiku-4-5")
    # OpenRouter ids contain slashes themselves: only the first one splits.
    some = next(m for m in list_models("openrouter") if "/" in m.id)
    assert get_model(f"openrouter/{some.id}").id == some.id


def test_an_unknown_name_lists_the_close_ones() -> None:
    with pytest.raises(KeyError, match="claude-sonnet-4-5") as info:
        get_model("anthropic", "claude-sonet-4-5")
    assert "close:" in str(info.value)

    with pytest.raises(KeyError, match="did you mean anthropic"):
        get_model("antropic", "claude-sonnet-4-5")


def test_openai_models_are_served_through_both_apis() -> None:
    assert get_model("openai", "gpt-4o").api == "openai-completions"
    assert get_model("openai", "gpt-4o", api="openai-responses").api == "openai-responses"
    assert get_model("openai", "gpt-5-pro").api == "openai-responses"
    with pytest.raises(KeyError, match="not served through"):
        get_model("openai", "gpt-5-pro", api="openai-completions")


def test_get_model_returns_a_fresh_model_each_time() -> None:
    first = get_model("anthropic", "claude-haiku-4-5")
    first.max_tokens = 1

    assert get_model("anthropic", "claude-haiku-4-5").max_tokens == 64_000


def test_registered_models_win_and_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models_module, "_registered", {})
    mine = Model(
        id="claude-haiku-4-5",
        api="anthropic-messages",
        provider="anthropic",
        base_url="https://proxy.example",
    )
    register_model(mine)
    custom = Model(id="tiny", api="openai-completions", provider="mylab", base_url="http://x")
    register_model(custom)

    assert get_model("anthropic", "claude-haiku-4-5") is mine
    assert get_model("mylab/tiny") is custom
    assert mine in list_models("anthropic")
    assert list_models("mylab") == [custom]


# --- stream-core models ---------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from stream_core._cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_models_command_lists_one_provider(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "models", "anthropic")

    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("anthropic (18 models")
    assert lines[-2].startswith("catalog: models.dev f3fc69229967 (MIT")
    assert "genai-prices" in lines[-2]
    assert lines[-1].startswith("REFUSES: what stream() raises for")
    assert lines[1].split() == [
        "ID", "API", "CONTEXT", "MAX", "OUT", "IN", "OUT", "CACHE", "R", "CACHE", "W",
        "REASONING", "IMG", "REFUSES",
    ]  # fmt: skip
    sonnet = next(line.split() for line in lines if line.startswith("claude-sonnet-4-5 "))
    assert sonnet == [
        "claude-sonnet-4-5", "anthropic-messages", "200k", "64k", "3", "15", "0.3", "3.75", "all",
        "yes", "frequency_penalty,", "presence_penalty,", "seed,", "temperature+top_p",
    ]  # fmt: skip
    opus = next(line.split() for line in lines if line.startswith("claude-opus-4-7 "))
    assert opus[8:10] == ["all", "(adaptive)"] and "temperature," in opus


def test_models_command_shows_every_api_and_unknown_prices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _cli(capsys, "models", "openai")

    assert code == 0
    gpt4o = next(line.split() for line in out.splitlines() if line.startswith("gpt-4o "))
    # OpenAI publishes no cache-write price: shown as unknown, not 0.
    assert gpt4o[1:] == [
        "openai-completions,openai-responses", "128k", "16k", "2.5", "10", "1.25", "-", "no", "yes",
        "top_k",
    ]  # fmt: skip


def test_models_command_without_provider_lists_them_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _cli(capsys, "models")

    assert code == 0
    headers = [line.split(" (")[0] for line in out.splitlines() if " models; prices" in line]
    # The models.dev providers, and Claude on Vertex AI (derived from Anthropic's rows).
    assert headers == sorted([*gen.PROVIDERS, "anthropic-vertex"])


def test_models_command_names_the_known_providers_for_a_typo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _cli(capsys, "models", "antropic")

    assert code == 2
    assert out == ""
    assert "no models for provider 'antropic'" in err and "anthropic" in err
