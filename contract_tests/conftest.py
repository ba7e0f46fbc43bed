import pytest

# Plain asserts inside the kit show their values on failure, as in test modules.
pytest.register_assert_rewrite(
    "stream_core.contract_tests.grammar", "stream_core.contract_tests.kit"
)
