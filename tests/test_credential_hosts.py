"""A credential goes only where the caller pointed it (issue 23, points 1 and 6).

A catalog base URL that is a template (Azure's `RESOURCE` host, Vertex AI's `{host}`,
`{project}` and `{location}`, Bedrock's region) is filled from the caller's settings on
every API, or the call raises at `stream()` naming the missing or malformed setting. A
setting that is not a plain name (`evil.example:8443/#`) never moves the request, its key
and the prompt to another host. Every request here is caught by respx: nothing leaves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

import stream_core
from stream_core import AssistantMessage, Context, Model, StreamOptions, UserMessage

pytestmark = pytest.mark.anyio

KEY = "azure-secret-key-0123456789abcdef"
CONTEXT = Context(messages=[UserMessage(content="the prompt")])
_ENDPOINT_VARS = (
    "AZURE_OPENAI_RESOURCE_NAME",
    "AZURE_OPENAI_BASE_URL",
    "AZURE_OPENAI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_CLOUD_API_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "OLLAMA_HOST",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in _ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    # No profile region or credentials from the machine running the tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))


@pytest.fixture
def sent() -> Iterator[respx.Route]:
    """Every request, whatever its host, answered 400 (no retry): what was sent, and where."""
    with respx.mock(assert_all_called=False) as mock:
        yield mock.route().mock(
            return_value=httpx.Response(400, json={"error": {"message": "no", "type": "x"}})
        )


async def _call(model: Model, **opts: Any) -> AssistantMessage:
    return await stream_core.complete(model, CONTEXT, StreamOptions(**opts))


# --- point 1: Azure's placeholder host, on both OpenAI APIs -------------------------------

AZURE_APIS = ("openai-completions", "openai-responses")


@pytest.mark.parametrize("api", AZURE_APIS)
async def test_a_catalog_azure_model_with_no_endpoint_raises_at_the_call(
    api: str, sent: respx.Route
) -> None:
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    with pytest.raises(ValueError) as raised:
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
    text = str(raised.value)
    assert "AZURE_OPENAI_RESOURCE_NAME" in text and "AZURE_OPENAI_BASE_URL" in text
    assert KEY not in text
    assert sent.calls.call_count == 0


@pytest.mark.parametrize("api", AZURE_APIS)
async def test_the_resource_name_fills_the_host_on_both_apis(
    api: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "my-resource")
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    await _call(model, api_key=KEY)
    request = sent.calls.last.request
    assert request.url.host == "my-resource.openai.azure.com"
    assert request.url.path.startswith("/openai/v1/")
    assert request.headers["api-key"] == KEY


@pytest.mark.parametrize("api", AZURE_APIS)
async def test_the_whole_base_url_wins_over_the_resource_name(
    api: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "ignored")
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://gateway.example.test/azure/openai/v1/")
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    await _call(model, api_key=KEY)
    url = sent.calls.last.request.url
    assert url.host == "gateway.example.test"
    assert url.path.startswith("/azure/openai/v1/")


@pytest.mark.parametrize("api", AZURE_APIS)
@pytest.mark.parametrize(
    "name",
    ["evil.example:8443/#", "evil.example", "a b", "res\r\nx-injected: 1", "-lead", "x" * 64],
)
async def test_a_resource_name_that_is_not_one_label_raises_naming_it(
    api: str, name: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", name)
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    with pytest.raises(ValueError, match="AZURE_OPENAI_RESOURCE_NAME"):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
    assert sent.calls.call_count == 0


@pytest.mark.parametrize("api", AZURE_APIS)
async def test_a_malformed_azure_base_url_raises_naming_it(
    api: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "file:///etc/passwd")
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    with pytest.raises(ValueError, match="AZURE_OPENAI_BASE_URL"):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
    assert sent.calls.call_count == 0


@pytest.mark.parametrize("api", AZURE_APIS)
async def test_a_base_url_given_at_the_call_needs_no_setting(api: str, sent: respx.Route) -> None:
    model = stream_core.get_model("azure-openai", "gpt-4.1", api=api)
    await _call(model, api_key=KEY, base_url="https://chosen.openai.azure.com/openai/v1")
    assert sent.calls.last.request.url.host == "chosen.openai.azure.com"


async def test_a_template_host_on_any_api_is_never_sent(sent: respx.Route) -> None:
    """The pipeline's last check: a model of any API whose host is still a placeholder."""
    for api, base in (
        ("anthropic-messages", "https://RESOURCE.openai.azure.com"),
        ("mistral-conversations", "https://{host}/v1"),
        ("openai-completions", "https://{host}/openai/v1"),
    ):
        model = Model(id="m", api=api, provider="custom", base_url=base)
        with pytest.raises(ValueError, match="placeholder"):
            stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
    assert sent.calls.call_count == 0


def _one_model_per_endpoint() -> list[Model]:
    """Every catalog provider on every API it serves (one model each), and every Azure model."""
    picked: dict[tuple[str, str], Model] = {}
    out: list[Model] = []
    for model in stream_core.list_models():
        if model.provider == "azure-openai":
            out.append(model)
        else:
            picked.setdefault((model.provider, model.api), model)
    return [*picked.values(), *out]


async def test_no_catalog_model_sends_a_key_to_a_placeholder(
    sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a key and no endpoint settings, every catalog model either raises at `stream()`
    naming a setting, or sends to a real host."""
    for var in ("AWS_BEARER_TOKEN_BEDROCK", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    raised = 0
    models = _one_model_per_endpoint()
    for model in models:
        try:
            s = stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
        except ValueError as exc:
            raised += 1
            assert "AZURE_OPENAI" in str(exc) or "GOOGLE_CLOUD_PROJECT" in str(exc), exc
            continue
        await s.result()
    hosts = {str(call.request.url.host) for call in sent.calls}
    assert hosts, "no request was sent at all"
    for host in hosts:
        assert "resource" not in host.split(".")[0].lower() or not host.endswith("azure.com")
        assert "{" not in host and "%7b" not in host.lower()
    # Every Azure model (87) raised: none was sent anywhere; so did Claude on Vertex AI (one
    # endpoint), which has no express mode. Gemini on Vertex AI with a key and no project is
    # express mode, whose host the key names.
    azure = sum(1 for m in models if m.provider == "azure-openai")
    claude_vertex = sum(1 for m in models if m.provider == "anthropic-vertex")
    assert azure == 87 and claude_vertex == 1
    assert raised == azure + claude_vertex
    assert "aiplatform.googleapis.com" in hosts
    assert not any(h.endswith(".openai.azure.com") for h in hosts)


# --- point 6: a region, location or project that is not a plain name ----------------------

BAD_NAMES = ["evil.example:8443/#", "us-east-1.evil.example", "us east 1", "us-\r\nx"]


def _bedrock() -> Model:
    return stream_core.get_model("amazon-bedrock", stream_core.list_models("amazon-bedrock")[0].id)


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_a_bedrock_region_that_is_not_a_name_raises_naming_where_it_came_from(
    bad: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=r'extra\["region"\]'):
        stream_core.stream(_bedrock(), CONTEXT, StreamOptions(api_key=KEY, extra={"region": bad}))
    monkeypatch.setenv("AWS_REGION", bad)
    with pytest.raises(ValueError, match="AWS_REGION"):
        stream_core.stream(_bedrock(), CONTEXT, StreamOptions(api_key=KEY))
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", bad)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE12")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-access-key-0123456789")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-0123456789abcdef")
    with pytest.raises(ValueError, match="AWS_DEFAULT_REGION"):
        stream_core.stream(_bedrock(), CONTEXT)  # signed with a session token: never sent
    assert sent.calls.call_count == 0


async def test_a_bedrock_region_of_another_type_raises(sent: respx.Route) -> None:
    with pytest.raises(TypeError, match=r"extra\['region'\]"):
        stream_core.stream(_bedrock(), CONTEXT, StreamOptions(api_key=KEY, extra={"region": 7}))


async def test_a_plain_bedrock_region_picks_its_host(sent: respx.Route) -> None:
    await _call(_bedrock(), api_key=KEY, extra={"region": "eu-central-2"})
    assert sent.calls.last.request.url.host == "bedrock-runtime.eu-central-2.amazonaws.com"


def _vertex() -> Model:
    return stream_core.get_model("google-vertex", stream_core.list_models("google-vertex")[0].id)


@pytest.mark.parametrize("bad", BAD_NAMES)
async def test_a_vertex_location_that_is_not_a_name_raises_naming_it(
    bad: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", bad)
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_LOCATION"):
        stream_core.stream(_vertex(), CONTEXT, StreamOptions(api_key=KEY))
    model = _vertex().model_copy(update={"compat": {"location": bad}})
    with pytest.raises(ValueError, match=r'compat\["location"\]'):
        stream_core.stream(model, CONTEXT, StreamOptions(api_key=KEY))
    assert sent.calls.call_count == 0


@pytest.mark.parametrize("bad", ["../../other", "p/x", "p?x=1", "p#", "%2e%2e"])
async def test_a_vertex_project_that_is_not_one_segment_raises_naming_it(
    bad: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", bad)
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_PROJECT"):
        stream_core.stream(_vertex(), CONTEXT, StreamOptions(api_key=KEY))
    assert sent.calls.call_count == 0


async def test_vertex_without_a_project_raises_naming_the_settings(sent: respx.Route) -> None:
    with pytest.raises(ValueError, match="GOOGLE_CLOUD_PROJECT"):
        stream_core.stream(_vertex(), CONTEXT)
    assert sent.calls.call_count == 0


async def test_a_plain_vertex_location_and_project_fill_the_template(
    sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "example.com:my-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    await _call(_vertex(), api_key=KEY)
    url = sent.calls.last.request.url
    assert url.host == "us-central1-aiplatform.googleapis.com"
    assert url.path.startswith("/v1/projects/example.com:my-proj/locations/us-central1/")


@pytest.mark.parametrize(
    "value", ["file:///etc/passwd", "unix:///var/run/ollama.sock", "localhost:11434\r\nX-A: b"]
)
async def test_an_ollama_host_that_cannot_be_a_server_raises_naming_it(
    value: str, sent: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = stream_core.get_model("ollama/llama3.2")
    monkeypatch.setenv("OLLAMA_HOST", value)
    with pytest.raises(ValueError, match="OLLAMA_HOST"):
        stream_core.get_model("ollama/llama3.2")
    with pytest.raises(ValueError, match="OLLAMA_HOST"):
        stream_core.stream(default, CONTEXT)
    assert sent.calls.call_count == 0
