"""`--stream-core-fixtures` pointed at a folder of recordings not named after an API says
which layout it expected (issue point: it silently read the folder's parent instead, then
said "needs a recording" in the wrong place)."""

from __future__ import annotations

import shutil

import pytest

pytest_plugins = ["pytester"]

PROVIDER = """
from stream_core.providers.anthropic import API, WIRE, stream  # noqa: F401
"""


def _recordings(target: object) -> None:
    from stream_core.contract_tests.kit import FIXTURES

    source = FIXTURES / "anthropic-messages"
    for body in sorted(source.glob("*.body"))[:3]:
        shutil.copy(body, target / body.name)  # type: ignore[operator]
        if body.with_suffix(".json").exists():
            shutil.copy(body.with_suffix(".json"), target / body.with_suffix(".json").name)  # type: ignore[operator]


@pytest.mark.slow
def test_a_recordings_folder_not_named_after_an_api_says_the_layout(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(my_provider=PROVIDER)
    folder = pytester.path / "tests" / "my-recs"
    folder.mkdir(parents=True)
    _recordings(folder)

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--stream-core-provider=my_provider",
        f"--stream-core-fixtures={folder}", "-q",
    )  # fmt: skip

    said = result.stderr.str() + result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, said[-2000:]
    assert "my-recs" in said and "anthropic-messages" in said
    assert f"{folder.parent}/anthropic-messages/" not in said  # not the parent's folder
    assert "<api>/" in said  # the layout it expected


@pytest.mark.slow
def test_a_folder_named_after_the_api_is_still_taken_as_its_recordings(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(my_provider=PROVIDER)
    folder = pytester.path / "tests" / "anthropic-messages"
    folder.mkdir(parents=True)
    _recordings(folder)

    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--stream-core-provider=my_provider",
        f"--stream-core-fixtures={folder}", "-q", "-x", "--co",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, (result.stdout.str() + result.stderr.str())[-2000:]
