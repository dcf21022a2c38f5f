"""The daemon releases the pin of a mirror removed while its sync ran through ``odfd mirror
remove``'s own release (``odfd.app.mirrors``): an IPFS node that cannot be reached, or an address
that names no IPFS node, leaves the pin in place with a warning naming the CID, and the daemon
goes on. A real client against real addresses; the pinning itself is ``test_mirror_unpin``'s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from odfd.app.mirror_sync import SyncReport
from odfd.app.node import Node
from odfd.config import IpfsConfig, NodeConfig
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.mirror_schedule import MirrorSchedule
from protocol.identity import DatasetId
from storage.catalog.mirror_records import SyncAttempt
from storage.catalog.mirrors import MirrorTable
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import NodePorts

CID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
"""A CIDv1 of raw bytes: what a sync's pin would have made."""


async def _nothing(_: DatasetId) -> None:
    return None


@pytest.mark.parametrize(
    "api",
    [f"/ip4/127.0.0.1/tcp/{NodePorts.pick_free().api}/http", "ftp://ipfs.invalid/"],
    ids=["unreachable", "not-an-ipfs-address"],
)
async def test_a_pin_left_by_a_removed_mirror_that_cannot_be_released_is_a_warning(
    workspace: Workspace, api: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = dataclasses.replace(NodeConfig(), ipfs=IpfsConfig(api=api, pin=True))
    schedule = MirrorSchedule(lambda: Node(workspace, config), DaemonMetrics(), _nothing)
    table = MirrorTable(workspace.catalog)
    mirror = await table.add("cities", "file:///nowhere/cities", [], 3600.0)
    now = datetime.now(UTC)
    attempt = SyncAttempt(
        mirror.name, mirror.source, None, started_at=now, finished_at=now, outcome="updated"
    )
    report = SyncReport(attempt, None, CID, MappingProxyType({}), False)

    with caplog.at_level(logging.INFO, logger="odfd.daemon.mirror_schedule"):
        await schedule._release_pin_if_removed(mirror, report)  # still a mirror: its pin stays
        assert caplog.records == []
        await table.remove(mirror.name)
        async with asyncio.timeout(60):
            await schedule._release_pin_if_removed(mirror, report)
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING, warning.getMessage()
    assert warning.getMessage() == "pin of a removed mirror left in place"
    error = getattr(warning, "error", "")
    assert f"ipfs://{CID}" in error and api.rstrip("/") in error, error
