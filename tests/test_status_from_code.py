"""A vendor's error `code` read as an HTTP status: only three ASCII digits or an int."""

from __future__ import annotations

import pytest

from stream_core._errors import status_from_code
from stream_core.provider import error_from_vendor


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("500", 500),
        (429, 429),
        ("²³⁴", None),
        ("٤٢٩", None),
        ("5xx", None),
        (True, None),
        (99, None),
    ],
)
def test_a_code_is_a_status_only_in_ascii_digits(code: object, status: int | None) -> None:
    assert status_from_code(code) == status


def test_a_superscript_code_never_escapes_the_error_reader() -> None:
    error = error_from_vendor("²³⁴", "it went wrong")
    assert error.kind is not None
