from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stream_core._history.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    estimate_context_tokens,
    estimate_message_tokens,
    estimate_tokens,
    fits_context,
)
from stream_core._types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

ENGLISH = (
    "The quick brown fox jumps over the lazy dog. A harness checks that a request fits "
    "the model's context window before it sends anything, and trims the history if not. "
)
CHINESE = "我们在发送请求之前估计令牌数量以确保上下文窗口足够大并且不会溢出"


def test_empty_text_is_zero_tokens() -> None:
    assert estimate_tokens("") == 0


def test_any_nonempty_text_costs_at_least_one_token() -> None:
    assert estimate_tokens("a") == 1
    assert estimate_tokens("é") == 1
    assert estimate_tokens("字") == 1


def test_english_is_about_a_quarter_of_its_length() -> None:
    text = ENGLISH * 50
    expected = len(text) / 4
    assert abs(estimate_tokens(text) - expected) <= 0.1 * expected


def test_chinese_is_about_one_token_per_ideograph() -> None:
    text = (CHINESE * 40)[:1000]
    assert len(text) == 1000
    assert 800 <= estimate_tokens(text) <= 1200


def test_japanese_and_korean_and_fullwidth_count_per_character() -> None:
    assert estimate_tokens("ひらがなカタカナ") == 8
    assert estimate_tokens("한국어텍스트") == 6
    assert estimate_tokens("ＡＢＣ１２３") == 6


def test_mixed_text_lies_between_ascii_and_cjk() -> None:
    ascii_part = "x" * 500
    cjk_part = (CHINESE * 20)[:500]
    mixed = ascii_part + cjk_part
    all_ascii = estimate_tokens("x" * 1000)
    all_cjk = estimate_tokens((CHINESE * 40)[:1000])
    assert all_ascii < estimate_tokens(mixed) < all_cjk
    assert estimate_tokens(mixed) == estimate_tokens(ascii_part) + estimate_tokens(cjk_part)


def test_other_non_ascii_costs_more_than_ascii() -> None:
    # Cyrillic and accented text take more tokens per character than English.
    assert estimate_tokens("привет мир" * 100) > estimate_tokens("hello wor!" * 100)


def test_whitespace_runs_are_cheap() -> None:
    indented = "x" + " " * 4000 + "y"
    assert estimate_tokens(indented) == 1
    assert estimate_tokens("a\n\n\n\n\n\nb") == estimate_tokens("a\nb")


@given(st.text(), st.text())
def test_appending_text_never_lowers_the_estimate(a: str, b: str) -> None:
    assert estimate_tokens(a + b) >= estimate_tokens(a)


@given(st.text(), st.text())
def test_estimating_pieces_separately_never_undercounts(a: str, b: str) -> None:
    # A harness may sum per-chunk estimates; that must bound the whole from above.
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


def test_huge_system_prompt_does_not_fit_200k_window() -> None:
    context = Context(system_prompt="a" * 3_000_000)
    assert estimate_context_tokens(context) > 200_000
    assert not fits_context(context, 200_000)


def test_small_context_fits_unless_output_budget_overflows() -> None:
    context = Context(system_prompt="Be brief.", messages=[UserMessage(content="hi")])
    used = estimate_context_tokens(context)
    assert fits_context(context, 200_000, max_output_tokens=8_000)
    assert fits_context(context, used + 100, max_output_tokens=100)
    assert not fits_context(context, used + 100, max_output_tokens=101)


def test_each_image_adds_a_flat_charge() -> None:
    text_only = UserMessage(content=[TextContent(text="what is this?")])
    with_images = UserMessage(
        content=[
            TextContent(text="what is this?"),
            ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            ImageContent(data="iVBORw0KGgo=" * 10_000, mime_type="image/png"),
        ]
    )
    added = estimate_message_tokens(with_images) - estimate_message_tokens(text_only)
    assert added == 2 * IMAGE_TOKENS  # by count, not by base64 size


def test_every_message_pays_the_overhead() -> None:
    empty: list[Message] = [UserMessage(content="") for _ in range(10)]
    assert estimate_context_tokens(Context(messages=empty)) == 10 * MESSAGE_OVERHEAD_TOKENS


def test_assistant_thinking_and_tool_calls_count() -> None:
    bare = AssistantMessage(api="a", provider="p", model="m")
    full = AssistantMessage(
        api="a",
        provider="p",
        model="m",
        content=[
            ThinkingContent(thinking="Let me think " * 100, signature="sig" * 1000),
            TextContent(text="Checking."),
            ToolCall(id="c1", name="read_file", arguments={"path": "/etc/" + "x" * 400}),
        ],
    )
    thinking_only = AssistantMessage(
        api="a", provider="p", model="m", content=[ThinkingContent(thinking="Let me think " * 100)]
    )
    assert estimate_message_tokens(bare) == MESSAGE_OVERHEAD_TOKENS
    assert estimate_message_tokens(thinking_only) >= MESSAGE_OVERHEAD_TOKENS + 300
    # Tool call arguments (400+ chars) count on top of the thinking text.
    assert estimate_message_tokens(full) >= estimate_message_tokens(thinking_only) + 100


def test_tool_results_count() -> None:
    result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="read_file",
        content=[TextContent(text="line\n" * 1000), ImageContent(data="x", mime_type="image/png")],
    )
    assert estimate_message_tokens(result) >= MESSAGE_OVERHEAD_TOKENS + 1000 + IMAGE_TOKENS


def test_tools_count_name_description_and_schema() -> None:
    tool = Tool(
        name="search",
        description="Search the web for a query. " * 20,
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    without = estimate_context_tokens(Context(messages=[UserMessage(content="hi")]))
    with_tool = estimate_context_tokens(Context(messages=[UserMessage(content="hi")], tools=[tool]))
    assert with_tool - without >= 140


def test_dict_records_count_their_json() -> None:
    record = {"role": "note", "text": "x" * 400}
    assert estimate_message_tokens(record) >= MESSAGE_OVERHEAD_TOKENS + 100
