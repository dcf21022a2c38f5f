"""Shared pytest configuration. Component fixtures live in tests/fixtures/ and are listed here."""

pytest_plugins: list[str] = [
    "tests.fixtures.spark",
    "tests.fixtures.ipfs",
    "tests.fixtures.small_fs",
    "tests.fixtures.workspace",
]
