"""What an agent asks of its own vendor's model is fitted to the model the gateway sends it
to, for the fields `FITTED` names only; the rest still refuses by name."""

from __future__ import annotations

from stream_core import Context, Route, ServerTool, StreamOptions, UserMessage, get_model
from stream_core.gateway._fit import FITTED, fit_options, fit_server_tools


def _context(*tools: ServerTool) -> Context:
    return Context(messages=[UserMessage(content="hi")], tools=list(tools))


def test_claude_codes_capped_web_search_goes_to_gemini_uncapped() -> None:
    context = _context(ServerTool(kind="web_search", max_uses=8))
    fitted = fit_server_tools(context, get_model("google/gemini-2.5-pro"))
    assert fitted == ["web_search.max_uses"]
    assert context.tools == [ServerTool(kind="web_search")]


def test_the_clients_own_vendor_fields_are_let_go() -> None:
    context = _context(ServerTool(kind="web_search", options={"external_web_access": True}))
    fitted = fit_server_tools(context, get_model("anthropic/claude-sonnet-4-5"))
    assert fitted == ["web_search.options"]
    assert context.tools == [ServerTool(kind="web_search")]


def test_an_option_the_target_takes_is_kept() -> None:
    tool = ServerTool(kind="web_search", max_uses=8, allowed_domains=["example.com"])
    context = _context(tool)
    assert fit_server_tools(context, get_model("anthropic/claude-sonnet-4-5")) == []
    assert context.tools == [tool]


def test_max_tokens_is_lowered_to_the_smallest_deployment_limit() -> None:
    small = get_model("openai/gpt-4.1")
    big = get_model("anthropic/claude-sonnet-4-5")
    options = StreamOptions(max_tokens=10**6)
    assert fit_options(options, Route([big, small])) == ["max_tokens"]
    assert options.max_tokens == min(small.max_tokens, big.max_tokens)


def test_reasoning_is_dropped_for_a_model_that_does_not_reason() -> None:
    options = StreamOptions(reasoning="high", max_tokens=100)
    assert fit_options(options, get_model("openai/gpt-4.1")) == ["reasoning"]
    assert options.reasoning is None and options.max_tokens == 100
    kept = StreamOptions(reasoning="high")
    assert fit_options(kept, get_model("anthropic/claude-sonnet-4-5")) == []
    assert kept.reasoning == "high"


def test_the_guide_lists_every_fitted_field() -> None:
    assert set(FITTED) == {"max_tokens", "reasoning", "server tool options"}


def test_a_chat_client_asking_for_several_choices_is_refused_by_name() -> None:
    import pytest

    from stream_core.provider import RequestFieldError, dialect

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 3}
    with pytest.raises(RequestFieldError) as e:
        dialect("openai-completions").parse_request(body, {})
    assert e.value.field == "n"
    body["n"] = 1
    assert dialect("openai-completions").parse_request(body, {}).unmodeled == {"n": 1}
