"""The log reader against a file cut at any byte (a writer killed mid-line, a disk that
filled): it yields exactly the rows whose line is whole, never raises, and a row written
after the cut reads back too."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_core import AssistantMessage, Cost, StreamError, TextContent, ToolCall, Usage
from stream_core.runs import ResultLog

ids = st.one_of(st.text(max_size=12), st.integers(-(2**40), 2**40))
texts = st.text(max_size=60)


@st.composite
def messages(draw: st.DrawFn) -> AssistantMessage:
    failed = draw(st.booleans())
    return AssistantMessage(
        api="faux",
        provider=draw(st.sampled_from(["a", "b"])),
        model=draw(texts),
        content=[
            TextContent(text=draw(texts)),
            ToolCall(id="c", name="t", arguments={"id": draw(texts), "n": {"id": draw(ids)}}),
        ],
        usage=Usage(
            input=draw(st.integers(0, 10**6)),
            cost=draw(st.none() | st.builds(Cost, total=st.floats(0, 10, allow_nan=False))),
        ),
        stop_reason="error" if failed else "stop",
        error=StreamError(kind="server", message=draw(texts)) if failed else None,
        timestamp=1,
    )


rows = st.lists(st.tuples(ids, messages()), min_size=1, max_size=5)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cuts")


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(written=rows, later=rows, where=st.floats(0, 1))
def test_a_file_cut_anywhere_reads_its_whole_rows(
    folder: Path,
    written: list[tuple[str | int, AssistantMessage]],
    later: list[tuple[str | int, AssistantMessage]],
    where: float,
) -> None:
    path = folder / "r.jsonl"
    path.unlink(missing_ok=True)
    with ResultLog(path) as log:
        for row_id, message in written:
            log.write(row_id, message)
    data = path.read_bytes()
    cut = round(where * len(data))
    path.write_bytes(data[:cut])
    # A row is read when its line is whole (its newline may be what was cut).
    ends = [i for i, b in enumerate(data) if b == ord("\n")]
    whole = [w for w, end in zip(written, ends, strict=True) if end <= cut]
    got = [(r.id, r.message) for r in ResultLog.read(path)]
    assert got == whole
    log = ResultLog(path, done_kinds="all")
    assert log.done == {row_id for row_id, _ in whole}
    # The next writer starts a line of its own: nothing written after the cut is lost.
    with log:
        for row_id, message in later:
            log.write(row_id, message)
    got = [(r.id, r.message) for r in ResultLog.read(path)]
    assert got == whole + later
    inside = 0 < cut and data[cut - 1] != ord("\n") and cut not in ends
    assert ResultLog(path).cut_lines == (1 if inside else 0)
