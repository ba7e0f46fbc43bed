"""The server-tools guide (docs/guides/server-tools.md) as a reader meets it: its examples
run as pasted, offline (faux model, or each provider's own bytes from `vendor_bytes`), and
its tables are the registry's own (each API's `WireAPI.file_types`, the server-tool prices).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import stream_core

GUIDE = Path(__file__).parents[1] / "docs" / "guides" / "server-tools.md"


def _blocks() -> dict[str, str]:
    """The guide's python blocks by the name on their first line (`# server-tools: NAME`)."""
    out = {}
    for block in re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S):
        first = block.splitlines()[0]
        if first.startswith("# server-tools: "):
            out[first.removeprefix("# server-tools: ")] = block
    return out


def _run(names: list[str], namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    namespace = namespace if namespace is not None else {"__name__": "guide"}
    blocks = _blocks()
    for name in names:
        exec(compile(blocks[name], f"server-tools.md: {name}", "exec"), namespace)
    return namespace


def test_every_python_block_of_the_guide_compiles() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
        compile(block, f"server-tools.md block {i}", "exec")
    assert len(_blocks()) >= 6


def test_the_web_search_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    _run(["web search", "web search, offline"])

    out = capsys.readouterr().out
    printed = GUIDE.read_text(encoding="utf-8").split("It prints:\n\n```text\n")[1]
    assert out == printed.split("```")[0], "the guide's printed output is not what runs"
    assert "[searching the web...]" in out and "[2 pages found]" in out


def test_the_pdf_example_runs_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _run(["a PDF question", "a PDF question, offline"])

    out = capsys.readouterr().out
    assert '- report.pdf <document 0>: "Revenue in the third quarter' in out
    assert "Q3 revenue was 4.2 million euros." in out


def test_the_shell_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = _run(["a shell call", "a shell call, offline"])

    out = capsys.readouterr().out
    assert "The command printed hello." in out
    assert "['user', 'shell_call', 'shell_call_output']" in out
    sent = namespace["second_request"]["input"]
    outputs = [item for item in sent if item.get("type") == "shell_call_output"]
    assert outputs and outputs[0]["call_id"] == "call_1"
    assert "hello" in str(outputs[0])


def test_the_approval_and_handoff_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = _run(["web search", "approvals", "handoff"])

    out = capsys.readouterr().out
    # A server call and its result become one note keeping the source; cited text its text
    # and sources.
    assert '[server tool call web_search: {"query": "pep 779"}]\n- PEP 779 <https' in out
    assert "supported. [sources: PEP 779 <https://peps.python.org/pep-0779/>]" in out
    asked = namespace["AssistantMessage"](
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        content=[namespace["ApprovalRequest"](id="mcpr_1", name="ask_question", server="deepwiki")],
    )
    answer = namespace["approve_all"](asked)
    assert answer.content[0].request_id == "mcpr_1" and answer.content[0].approve


# --- tables made from the registry ----------------------------------------------------------


def _table(marker: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"<!-- {marker}")
    start = text.index("-->", start) + len("-->")
    end = text.index(f"<!-- end {marker} -->")
    return text[start:end].strip()


def file_types_table() -> str:
    """API -> the media types a `FileContent` may have, from each `WireAPI.file_types`."""
    entries = stream_core.list_providers()
    wires = sorted(
        (e.wire for e in entries if e.wire is not None and e.source == "builtin"),
        key=lambda w: w.api,
    )
    lines = [
        "| API | PDF | media types a `FileContent` may have | `ServerTool` kinds it runs |",
        "|---|---|---|---|",
    ]
    for w in wires:
        types = _media_types(w.file_types)
        pdf = "yes" if "application/pdf" in w.file_types else "no"
        kinds = ", ".join(f"`{k}`" for k in sorted(w.server_tools)) or "none"
        lines.append(f"| `{w.api}` | {pdf} | {types} | {kinds} |")
    return "\n".join(lines)


def _media_types(types: frozenset[str]) -> str:
    """`image: gif, jpeg; text: plain` (grouped by top-level type), or `none`."""
    groups: dict[str, list[str]] = {}
    for media in sorted(types):
        top, _, sub = media.partition("/")
        groups.setdefault(top, []).append(sub)
    return "; ".join(f"{top}: {', '.join(subs)}" for top, subs in groups.items()) or "none"


def prices_table() -> str:
    from stream_core._cost import SERVER_TOOL_PRICES

    lines = ["| provider | server tool | USD per call |", "|---|---|---:|"]
    for provider, prices in sorted(SERVER_TOOL_PRICES.items()):
        for kind, price in sorted(prices.items()):
            lines.append(f"| `{provider}` | `{kind}` | {'free' if not price else f'{price:g}'} |")
    return "\n".join(lines)


def test_the_file_types_table_is_the_providers_own() -> None:
    assert _table("file types table") == file_types_table(), (
        "server-tools.md file types table out of date; expected:\n" + file_types_table()
    )


def test_the_prices_table_is_the_price_tables_own() -> None:
    assert _table("server tool prices") == prices_table(), (
        "server-tools.md prices table out of date; expected:\n" + prices_table()
    )


def _write_tables() -> None:
    """Rewrite the guide's generated tables (`uv run python tests/test_modern_docs.py`)."""
    text = GUIDE.read_text(encoding="utf-8")
    for marker, table in (
        ("file types table", file_types_table()),
        ("server tool prices", prices_table()),
    ):
        start = text.index("-->", text.index(f"<!-- {marker}")) + len("-->")
        end = text.index(f"<!-- end {marker} -->")
        text = text[:start] + "\n\n" + table + "\n\n" + text[end:]
    GUIDE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    _write_tables()
