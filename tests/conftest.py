"""Shared pytest configuration. Component fixtures live in tests/fixtures/ and are listed here."""

import os

pytest_plugins: list[str] = [
    "tests.fixtures.spark",
    "tests.fixtures.ipfs",
    "tests.fixtures.workspace",
]

# Daemons started by tests (in-process or as `odfd daemon` processes, which inherit this) use the
# test session's Spark or start one on demand, not a Spark Connect server of their own each:
# that is a JVM per daemon. tests/pipeline/test_connect.py turns it on for the daemon it tests.
os.environ.setdefault("ODFD_DAEMON_SPARK_CONNECT", "false")
