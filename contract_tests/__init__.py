"""The shared contract suite: every registered provider over every fixture of its API.

A provider joins by being registered (a module in `providers/`, or a plugin) and by
having a folder `contract_tests/fixtures/<api>/` of recorded cases (CONTRACT 6). Out of
tree, the same modules run on any provider through the pytest plugin of the `testing`
extra: `pytest --stream-core-provider=MODULE --stream-core-fixtures=DIR` (kit.UNDER_TEST,
kit.FIXTURE_DIRS).
"""
