"""The shared contract suite: every registered provider over every fixture of its API.

A provider joins by being registered (a module in `providers/`, or a plugin) and by
having a folder `contract_tests/fixtures/<api>/` of recorded cases (CONTRACT 6).
"""
