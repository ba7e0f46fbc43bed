from typing import Any

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


_FIRST_FAILURE: dict[str, str] = {}
"""API -> the `run_first` test that failed for it: the cause later failures follow from."""


def _api_of(item: pytest.Item) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        api = getattr(value, "api", value)
        if isinstance(api, str) and api in _apis_under_test():
            return api
    return None


def _apis_under_test() -> list[str]:
    from stream_core.contract_tests.kit import apis_under_test

    return apis_under_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """One cause, reported once: after the `run_first` check fails for an API, every later
    failure of that API says it follows from it (fix that one first, then run again)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    api = _api_of(item)
    if api is None:
        return
    first = _FIRST_FAILURE.get(api)
    if first is None:
        if getattr(getattr(item, "function", None), "run_first", False):
            _FIRST_FAILURE[api] = item.nodeid
        return
    report.longrepr = (
        f"follows from the first failure for {api} ({first}): fix that one first, then "
        f"run again.\n{report.longrepr}"
    )
