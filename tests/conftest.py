"""Shared pytest configuration. Component fixtures live in tests/fixtures/ and are listed here.

Tests are marked by the components they use, derived from their fixtures (directly or through
other fixtures), so nobody has to remember a marker: a test that uses ``spark`` is marked
``spark``, one that uses an IPFS node is marked ``ipfs``. ``scripts/test --fast`` deselects them
(and ``slow``).
"""

from __future__ import annotations

import pytest

from tests.daemon.processes import DaemonProcess

pytest_plugins: list[str] = [
    "tests.fixtures.spark",
    "tests.fixtures.ipfs",
    "tests.fixtures.seaweedfs",
    "tests.fixtures.small_fs",
    "tests.fixtures.workspace",
    "tests.fixtures.mosquitto",
    "tests.fixtures.containers",
]

FIXTURE_MARKERS = {
    "spark": "spark",
    "ipfs_node": "ipfs",
    "ipfs_node_factory": "ipfs",
}
"""Fixture name -> the marker of every test whose fixture closure includes it."""

HELPER_MARKERS: dict[object, str] = {DaemonProcess: "spark"}
"""Test helper -> the marker of every test in a module that uses it: an ``odfd daemon`` process
starts Spark for its audits and transforms, though no fixture says so."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        module = getattr(item, "module", None)
        helpers = {id(value) for value in vars(module).values()} if module is not None else set()
        wanted = {marker for fixture, marker in FIXTURE_MARKERS.items() if fixture in used}
        wanted |= {marker for helper, marker in HELPER_MARKERS.items() if id(helper) in helpers}
        for marker in wanted:
            if item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))
