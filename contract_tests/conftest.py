import pytest

# Plain asserts inside the kit show their values on failure, as in test modules.
pytest.register_assert_rewrite(
    "stream_core.contract_tests.grammar", "stream_core.contract_tests.kit"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `run_first` (the terminal-event check) run before the rest, so the one
    failure that explains many others comes first; the rest keep their order."""
    items.sort(key=lambda item: not getattr(getattr(item, "function", None), "run_first", False))


@pytest.fixture(autouse=True)
def _fresh_limits() -> None:
    """Each contract test starts with an open limiter: a 429 served by one fault test
    pauses nothing in the next (the limiter is process-wide, as in production)."""
    from stream_core import configure_limits

    configure_limits()
