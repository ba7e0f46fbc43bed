"""The README's quick start runs as pasted (against recorded responses, offline)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import respx
from doc_pages import docs_text

import stream_core
from stream_core._cli.demo import demo_body
from stream_core.contract_tests.kit import sse_response
from stream_core.provider import WireAPI

README = Path(__file__).parents[1] / "README.md"
TEXT_BODY = (
    Path(__file__).parents[1]
    / "contract_tests/fixtures/anthropic-messages/llm-anthropic__test_prompt.0.body"
).read_bytes()


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text()
    first_block = text.split("```")[1]
    assert "uv run stream-core demo" in first_block and "uv run pytest" in first_block


def quick_start() -> str:
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    return code.group(1)


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        (None, "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:8080/anthropic", "http://127.0.0.1:8080/anthropic/v1/messages"),
    ],
    ids=["anthropic", "local-gateway-via-ANTHROPIC_BASE_URL"],
)
def test_quick_start_runs(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    base_url: str | None,
    url: str,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme-test-0000000000")
    if base_url is None:
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base_url)
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post(url).mock(
            side_effect=[
                sse_response([demo_body("anthropic-thinking-tool.body")]),
                sse_response([TEXT_BODY]),
            ]
        )
        exec(compile(quick_start(), "README.md", "exec"), {"__name__": "readme"})
    assert route.call_count == 2
    second = route.calls[1].request.content.decode()
    assert '"tool_result"' in second  # the tool call was answered before the next request
    out = capsys.readouterr().out
    assert "Captain" in out and "stop" in out


def test_quick_start_without_a_key_says_so_and_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with respx.mock(assert_all_mocked=True), pytest.raises(SystemExit) as exit_info:
        exec(compile(quick_start(), "README.md", "exec"), {"__name__": "readme"})

    # A non-zero exit naming what to set, not an empty answer.
    assert str(exit_info.value).startswith("auth: ") and "ANTHROPIC_API_KEY" in str(exit_info.value)


def test_plugin_section_lists_every_wire_api_field_and_the_finished_flag() -> None:
    text = docs_text()
    section = text.split("## Adding a provider")[1].split("\n## ")[0]

    for f in dataclasses.fields(WireAPI):
        assert f"`{f.name}" in section, f.name
    assert "assembler.finished = True" in section


def test_the_contract_document_ships_with_the_repo_and_is_linked() -> None:
    contract = README.parent / "docs" / "CONTRACT.md"

    assert "(docs/CONTRACT.md)" in README.read_text()
    text = contract.read_text()
    for f in dataclasses.fields(WireAPI):
        assert f"`{f.name}" in text, f.name
    assert "finished = True" in text


def test_sync_quick_start_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = README.read_text()
    setup = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S)
    sync = re.search(r"### Without async\n.*?```python\n(.*?)```", text, re.S)
    assert setup is not None and sync is not None
    # The sync block uses the quick start's names; define them without its async run.
    definitions = "\n".join(
        line for line in setup.group(1).splitlines() if not line.startswith("anyio.run(")
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme-test-0000000000")
    namespace = {"__name__": "readme"}
    with respx.mock(assert_all_mocked=True) as mock:
        route = mock.post("https://api.anthropic.com/v1/messages").mock(
            side_effect=[
                sse_response([demo_body("anthropic-thinking-tool.body")]),
                sse_response(
                    [TEXT_BODY],
                    headers={"content-type": "text/event-stream", "request-id": "req_readme"},
                ),
            ]
        )
        exec(compile(definitions, "README.md", "exec"), namespace)
        exec(compile(sync.group(1), "README.md", "exec"), namespace)
    assert route.call_count == 2
    second = route.calls[1].request.content.decode()
    assert '"tool_result"' in second  # the tool call was answered before the next request
    out = capsys.readouterr().out
    assert "Captain" in out and "stop" in out and "req_readme" in out
    assert "claude-sonnet-4-5" in out  # the served model, as the vendor reported it


def controls_table() -> str:
    """The README's control x API table, made from each provider's `WireAPI.controls`."""
    from stream_core.provider import CONTROLS

    entries = stream_core.list_providers()
    wires = sorted(
        (e.wire for e in entries if e.wire is not None and e.source == "builtin"),
        key=lambda w: w.api,
    )
    lines = ["| control | " + " | ".join(f"`{w.api}`" for w in wires) + " |"]
    lines.append("|---" * (len(wires) + 1) + "|")
    for name in CONTROLS:
        cells = [w.controls.get(name, "error: not supported").replace("|", "\\|") for w in wires]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_controls_table_is_the_providers_own() -> None:
    text = docs_text()
    start = "generated from each WireAPI.controls; tests/test_readme.py checks it -->"
    block = text.split(start)[1].split("<!-- end controls table -->")[0].strip()
    assert block == controls_table(), "README table out of date; expected:\n" + controls_table()


def test_the_layout_names_every_module_of_the_package() -> None:
    section = docs_text().split("## Layout")[1].split("\n## ")[0]
    package = README.parent / "stream_core"
    names = [p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "provider.py")]
    names += [f"{p.name}/" for p in package.iterdir() if p.is_dir() and p.name.startswith("_")]
    names = [n for n in names if n != "__pycache__/"]
    missing = [n for n in names if f"`{n}" not in section]
    assert not missing, f"README Layout lacks {missing}"
    assert "`stream_core.provider`" in section and "`stream_core.testing`" in section


def own_records_snippets() -> list[str]:
    section = docs_text().split("## Your own records in the history")[1].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_compaction_example_runs_and_sends_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stream_core import (
        AssistantMessage,
        CompactionSummary,
        TextContent,
        UserMessage,
        dump_messages,
        load_messages,
    )
    from stream_core.testing import faux_model

    compaction, own_role = own_records_snippets()
    monkeypatch.chdir(tmp_path)
    said = {"api": "faux", "provider": "faux", "model": "m"}
    dump_messages(
        [
            CompactionSummary(summary="Older summary.", timestamp=1),
            UserMessage(content="Plan a trip to Lyon.", timestamp=2),
            AssistantMessage(content=[TextContent(text="Train or car?")], **said),
            UserMessage(content="Train.", timestamp=3),
            AssistantMessage(content=[TextContent(text="The 9:00 TGV.")], **said),
        ],
        "session.jsonl",
    )
    model = faux_model(["A trip to Lyon by train is planned.", "We picked the 9:00 TGV."])

    # The guide's sizes, scaled down to this five-message session: compact past 10 tokens,
    # keep 14 (the last exchange).
    compaction = compaction.replace("100_000", "10").replace("20_000", "14")
    exec(compile(compaction, "README.md", "exec"), {"__name__": "readme", "model": model})

    saved = load_messages("session.jsonl")
    assert isinstance(saved[0], CompactionSummary)
    assert saved[0].summary == "A trip to Lyon by train is planned."
    assert [m.role for m in saved[1:]] == ["user", "assistant"]
    # The summary call saw the older summary as a user turn; the next call the new one.
    first, second = (c.messages for c in model.contexts)
    assert isinstance(first[0], UserMessage) and "Older summary." in str(first[0].content)
    assert all(not isinstance(m, CompactionSummary) for m in first + second)
    assert "<summary>\nA trip to Lyon by train is planned.\n</summary>" in str(second[0].content)
    assert second[-1].role == "user" and second[-1].content == "Where were we?"

    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(own_role, "README.md", "exec", dont_inherit=True), namespace)
    todo = namespace["TodoList"](items=["book the hotel"])  # type: ignore[operator]
    assert todo.to_messages()[0].content == "Open tasks:\n- book the hotel"


def test_the_readme_is_a_newcomers_page() -> None:
    """Install, the two commands, a quick start and links: the rest is on the docs site."""
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert "pip install stream-core" in text
    for guide in (README.parent / "docs" / "guides").glob("*.md"):
        assert f"(docs/guides/{guide.name}" in text, f"README does not link {guide.name}"
