"""Portable request controls and structured output on Gemini (and Vertex AI, same builder):
the exact `generationConfig` / `toolConfig` fields each control becomes, the ones that
raise at `stream()`, the native JSON Schema request and the forced-tool fallback, and the
answer read back from a stream."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
import respx
from pydantic import BaseModel
from structured_answer import ANSWER, SCHEMA, Weather

import stream_core
from stream_core import Context, Model, StreamOptions, Tool, UserMessage
from stream_core.contract_tests.kit import Run, contract_model, options, run_provider, sse_response
from stream_core.provider import CONTROLS
from stream_core.providers import google

API = "google-generative-ai"
ZOOM = Tool(
    name="zoom",
    description="Zoom in.",
    parameters={"type": "object", "properties": {"factor": {"type": "integer"}}},
)


def _model(provider: str = "google", **kw: Any) -> Model:
    if provider == "google-vertex":
        base_url = google.VERTEX_BASE_URL
        kw.setdefault("compat", {"project": "proj", "location": "us-central1"})
    else:
        base_url = "https://generativelanguage.googleapis.com/v1beta"
    return Model(
        id="gemini-2.5-flash",
        api=API,
        provider=provider,
        base_url=base_url,
        reasoning=False,
        input=["text", "image"],
        **kw,
    )


def _context(*tools: Tool) -> Context:
    return Context(messages=[UserMessage(content="Weather in Paris?")], tools=list(tools) or None)


def _chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    obj = {"candidates": [candidate], "responseId": "resp-1", **extra}
    return f"data: {json.dumps(obj)}\n\n".encode()


OK = _chunk({"text": "ok"}, finish="STOP")


def _send(model: Model, context: Context, **opts: Any) -> dict[str, Any]:
    """Make the call through `stream_core.stream` and return the JSON body it sent."""

    async def main() -> httpx.Request:
        with respx.mock(assert_all_mocked=True) as mock:
            route = mock.route().mock(return_value=sse_response([OK]))
            await stream_core.stream(model, context, options(**opts)).result()
            return route.calls[0].request

    body: dict[str, Any] = json.loads(anyio.run(main).content)
    return body


def _built(model: Model, context: Context, **opts: Any) -> dict[str, Any]:
    return google.WIRE.build_request(model, context, StreamOptions(api_key="k", **opts)).payload


# --- the tables ---------------------------------------------------------------------------


def test_declares_every_control_but_parallel_tool_calls_and_reads_one_extra_key() -> None:
    assert set(google.WIRE.controls) == set(CONTROLS) - {"parallel_tool_calls"}
    assert set(google.WIRE.extra) == {"cached_content"}
    assert google.WIRE.output_mode(_model()) == "native"


# --- tool_choice --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "calling"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"tool": "zoom"}, {"mode": "ANY", "allowedFunctionNames": ["zoom"]}),
    ],
)
def test_tool_choice_becomes_function_calling_config(choice: Any, calling: Any) -> None:
    body = _send(_model(), _context(ZOOM), tool_choice=choice)
    assert body["toolConfig"] == {"functionCallingConfig": calling}
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "zoom"


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_without_tools_sends_no_tool_config(choice: str) -> None:
    body = _send(_model(), _context(), tool_choice=choice)
    assert "toolConfig" not in body and "tools" not in body


def test_no_tool_choice_sends_no_tool_config() -> None:
    assert "toolConfig" not in _send(_model(), _context(ZOOM))


def test_tool_choice_naming_no_tool_or_required_without_tools_raises_at_stream() -> None:
    with pytest.raises(ValueError, match=r"StreamOptions\.tool_choice: no tool named 'pan'"):
        stream_core.stream(_model(), _context(ZOOM), options(tool_choice={"tool": "pan"}))
    with pytest.raises(ValueError, match=r"StreamOptions\.tool_choice: 'required'"):
        stream_core.stream(_model(), _context(), options(tool_choice="required"))


def test_tool_choice_in_extra_is_gone_and_raises_pointing_at_the_control() -> None:
    with pytest.raises(ValueError, match=r"unknown key 'tool_choice'.*StreamOptions\.tool_choice"):
        stream_core.stream(_model(), _context(ZOOM), options(extra={"tool_choice": "any"}))


# --- parallel_tool_calls: no such knob ----------------------------------------------------


def test_parallel_tool_calls_false_raises_at_stream_naming_the_api() -> None:
    with pytest.raises(
        ValueError, match=r"StreamOptions\.parallel_tool_calls: google-generative-ai has no such"
    ):
        stream_core.stream(_model(), _context(ZOOM), options(parallel_tool_calls=False))


def test_parallel_tool_calls_true_is_the_default_and_sends_nothing() -> None:
    body = _send(_model(), _context(ZOOM), parallel_tool_calls=True)
    assert "toolConfig" not in body
    assert "parallel" not in json.dumps(body).lower()


# --- generationConfig fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("control", "value", "field"),
    [
        ("stop", ["\n\n", "END"], "stopSequences"),
        ("top_p", 0.9, "topP"),
        ("top_k", 40, "topK"),
        ("seed", 1234, "seed"),
        ("seed", 0, "seed"),
        ("presence_penalty", 0.5, "presencePenalty"),
        ("frequency_penalty", -0.25, "frequencyPenalty"),
    ],
)
def test_sampling_control_becomes_its_generation_config_field(
    control: str, value: Any, field: str
) -> None:
    body = _send(_model(), _context(), **{control: value})
    assert body["generationConfig"] == {field: value}


def test_all_controls_together_alongside_temperature_and_max_tokens() -> None:
    body = _send(
        _model(),
        _context(ZOOM),
        temperature=0.3,
        max_tokens=100,
        stop=["STOP"],
        top_p=0.5,
        top_k=3,
        seed=7,
        presence_penalty=0.1,
        frequency_penalty=0.2,
        tool_choice={"tool": "zoom"},
    )
    assert body["generationConfig"] == {
        "temperature": 0.3,
        "maxOutputTokens": 100,
        "stopSequences": ["STOP"],
        "topP": 0.5,
        "topK": 3,
        "seed": 7,
        "presencePenalty": 0.1,
        "frequencyPenalty": 0.2,
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["zoom"]}
    }


def test_vertex_builds_the_same_fields() -> None:
    opts: dict[str, Any] = {
        "stop": ["STOP"],
        "top_p": 0.5,
        "top_k": 3,
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
        "tool_choice": "required",
        "output_schema": SCHEMA,
        "extra": {"cached_content": "cachedContents/abc"},
    }
    gemini = google.WIRE.build_request(_model(), _context(ZOOM), StreamOptions(**opts))
    vertex = google.WIRE.build_request(
        _model("google-vertex"), _context(ZOOM), StreamOptions(api_key="k", **opts)
    )
    assert vertex.payload == gemini.payload
    assert vertex.url.startswith("https://us-central1-aiplatform.googleapis.com/v1/projects/proj/")
    assert vertex.payload["generationConfig"]["responseJsonSchema"] == SCHEMA
    assert vertex.payload["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


def test_vertex_through_stream_sends_the_controls() -> None:
    body = _send(_model("google-vertex"), _context(ZOOM), top_k=5, tool_choice="none")
    assert body["generationConfig"] == {"topK": 5}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


# --- extra --------------------------------------------------------------------------------


def test_cached_content_extra_is_sent_as_cached_content() -> None:
    body = _send(_model(), _context(), extra={"cached_content": "cachedContents/abc"})
    assert body["cachedContent"] == "cachedContents/abc"


def test_unknown_extra_key_raises_at_stream_listing_the_known_one() -> None:
    with pytest.raises(
        ValueError,
        match=r"StreamOptions\.extra: unknown key 'cachedContent' for google-generative-ai "
        r"\(it reads: cached_content\)",
    ):
        stream_core.stream(_model(), _context(), options(extra={"cachedContent": "x"}))


# --- structured output: the request -------------------------------------------------------


def test_native_output_schema_is_response_json_schema_with_json_mime_type() -> None:
    body = _send(_model(), _context(), output_schema=SCHEMA)
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    }
    assert "tools" not in body and "toolConfig" not in body


def test_native_output_schema_keeps_the_callers_tools_and_tool_choice() -> None:
    body = _send(_model(), _context(ZOOM), output_schema=SCHEMA, tool_choice="auto")
    assert [d["name"] for d in body["tools"][0]["functionDeclarations"]] == ["zoom"]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert body["generationConfig"]["responseJsonSchema"] == SCHEMA


class Place(BaseModel):
    name: str
    country: str | None = None


class Trip(BaseModel):
    """A trip."""

    stops: list[Place]
    kind: str = "short"


def test_a_pydantic_class_is_sent_as_json_schema_with_refs_and_null_branches_kept() -> None:
    body = _send(_model(), _context(), output_schema=Trip)
    sent = body["generationConfig"]["responseJsonSchema"]
    assert sent["properties"]["stops"] == {
        "type": "array",
        "title": "Stops",
        "items": {"$ref": "#/$defs/Place"},
    }
    country = sent["$defs"]["Place"]["properties"]["country"]
    assert country["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "default" not in country and "default" not in sent["properties"]["kind"]


def test_json_schema_trims_to_the_documented_keywords() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "definitions": {"P": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "properties": {
            "p": {"$ref": "#/definitions/P", "description": "a point"},
            "q": {"allOf": [{"$ref": "#/$defs/Q"}], "description": "merged"},
            "mode": {"const": "fast"},
            "flag": {"enum": [True, False]},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "maybe": {"type": ["string", "null"], "pattern": "^a"},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
        },
        "$defs": {"Q": {"type": "string"}},
        "required": ["p"],
        "additionalProperties": False,
    }
    assert google.json_schema(schema) == {
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/P"},
            "q": {"$ref": "#/$defs/Q"},
            "mode": {"enum": ["fast"]},
            "flag": {},
            "tags": {"type": "array", "items": {"type": "string"}},
            "maybe": {"type": ["string", "null"]},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
        },
        "$defs": {
            "Q": {"type": "string"},
            "P": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
        "required": ["p"],
        "additionalProperties": False,
    }


def test_tool_mode_fallback_forces_the_schema_tool_by_name() -> None:
    body = _send(_model(structured_output="tool"), _context(), output_schema=SCHEMA)
    (declaration,) = body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "final_answer"
    assert declaration["parameters"] == google.clean_schema(SCHEMA)
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["final_answer"]}
    }
    assert "generationConfig" not in body  # no responseJsonSchema in tool mode


def test_tool_mode_fallback_with_the_callers_tools_requires_any_call() -> None:
    body = _send(_model(structured_output="tool"), _context(ZOOM), output_schema=Weather)
    names = [d["name"] for d in body["tools"][0]["functionDeclarations"]]
    assert names == ["zoom", "Weather"]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


# --- structured output: the answer --------------------------------------------------------


def _replay(*chunks: bytes, model: Model | None = None, **opts: Any) -> Run:
    async def main() -> Run:
        return await run_provider(
            API, [sse_response([b"".join(chunks)])], opts=options(**opts), model=model
        )

    return anyio.run(main)


def test_native_answer_is_parsed_into_output() -> None:
    run = _replay(
        _chunk({"text": '{"city": "Pa'}),
        _chunk({"text": 'ris", "temp_c": 18.5}'}, finish="STOP"),
        output_schema=SCHEMA,
    )
    m = run.message
    assert m.stop_reason == "stop"
    assert m.output == ANSWER and m.output_mode == "native"
    assert m.text() == '{"city": "Paris", "temp_c": 18.5}'


def test_a_pydantic_class_gives_an_instance() -> None:
    run = _replay(_chunk({"text": json.dumps(ANSWER)}, finish="STOP"), output_schema=Weather)
    assert run.message.output == Weather(city="Paris", temp_c=18.5)
    assert isinstance(run.message.output, Weather)


def test_a_cut_answer_has_length_stop_and_no_output() -> None:
    run = _replay(_chunk({"text": '{"city": "Par'}, finish="MAX_TOKENS"), output_schema=SCHEMA)
    m = run.message
    assert m.stop_reason == "length" and m.output is None
    assert m.text() == '{"city": "Par'


def test_invalid_json_ends_invalid_output_keeping_the_text() -> None:
    run = _replay(_chunk({"text": "Paris, 18.5 degrees"}, finish="STOP"), output_schema=SCHEMA)
    m = run.message
    assert m.stop_reason == "error"
    assert m.error is not None and m.error.kind == "invalid_output"
    assert m.output is None and m.text() == "Paris, 18.5 degrees"


def test_tool_mode_answer_becomes_the_text_and_output() -> None:
    run = _replay(
        _chunk({"functionCall": {"name": "final_answer", "args": ANSWER}}, finish="STOP"),
        model=contract_model(API, structured_output="tool"),
        output_schema=SCHEMA,
    )
    m = run.message
    assert m.stop_reason == "stop"
    assert m.output == ANSWER and m.output_mode == "tool"
    assert json.loads(m.text()) == ANSWER
    assert not any(b.type == "tool_call" for b in m.content)
