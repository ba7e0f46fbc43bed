import pytest

# Plain asserts inside the kit show their values on failure, as in test modules.
pytest.register_assert_rewrite("contract_tests.grammar", "contract_tests.kit")
