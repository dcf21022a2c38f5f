"""``MirrorSyncer`` in-process against a real IPFS node: the pin follows the dataset's head,
also when pinning failed on the attempt that moved the head (the next attempt catches up)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from odfd.app.mirror_sync import MirrorSyncer, SyncReport
from odfd.app.node import Node
from odfd.config import IpfsConfig, NodeConfig
from storage.catalog.mirror_records import MirrorRecord
from storage.catalog.mirrors import MirrorTable
from storage.ipfs_client import IpfsClient, parse_cid
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import LocalIpfsNode, NodePorts
from tests.replication.datagen import create_root

pytestmark = pytest.mark.ipfs


def _after(record: MirrorRecord, report: SyncReport) -> MirrorRecord:
    """What the daemon records of an attempt, as far as the next attempt reads it."""
    failed = report.failed
    return replace(
        record,
        pinned_cid=report.pinned_cid,
        target_state=report.target_state,
        consecutive_failures=record.consecutive_failures + 1 if failed else 0,
        last_error=report.attempt.error,
    )


async def test_pin_follows_the_head_after_a_failed_pin(
    workspace: Workspace, ipfs_node: LocalIpfsNode, tmp_path: Path
) -> None:
    ipfs = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)
    live = NodeConfig(
        ipfs=IpfsConfig(api=ipfs_node.api_multiaddr, gateway=ipfs_node.gateway_url, pin=True)
    )
    dead_api = f"/ip4/127.0.0.1/tcp/{NodePorts.pick_free().api}/http"  # nothing listens there
    dead = replace(live, ipfs=replace(live.ipfs, api=dead_api))
    async with await Workspace.init(tmp_path / "a") as source:
        writer = await create_root(source, "cities", slices=2, seed=5)
        source_folder = source.layout.dataset(writer.dataset_id).root
        record = await MirrorTable(workspace.catalog).add(
            "cities", source_folder.as_uri(), [], 60.0
        )
        folder = workspace.layout.dataset(writer.dataset_id).root
        async with aiohttp.ClientSession() as session:
            first = await MirrorSyncer(Node(workspace, live), session).sync(record)
            assert first.attempt.outcome == "updated" and first.pinned_cid is not None
            assert first.pinned_cid == str(
                await ipfs.add_directory(folder, exclude=("info",), only_hash=True)
            )
            record = _after(record, first)

            # The head moves while the IPFS node is unreachable: the attempt fails, the old pin stays.
            new_head = await writer.append(slices=1)
            second = await MirrorSyncer(Node(workspace, dead), session).sync(record)
            assert second.failed and second.attempt.new_head == new_head
            assert second.attempt.error is not None and second.attempt.error.startswith(
                "pinning in IPFS:"
            )
            assert second.pinned_cid == first.pinned_cid
            record = _after(record, second)

            # Nothing new at the source, the node is back: the new head gets pinned, the old pin goes.
            third = await MirrorSyncer(Node(workspace, live), session).sync(record)
            assert third.attempt.outcome == "unchanged", third.attempt.error
            expected = await ipfs.add_directory(folder, exclude=("info",), only_hash=True)
            assert third.pinned_cid == str(expected) != first.pinned_cid
            pins = await ipfs.pin_ls()
            assert parse_cid(third.pinned_cid) in pins and parse_cid(first.pinned_cid) not in pins
            record = _after(record, third)

            # A quiet attempt after a good one does not touch IPFS at all.
            fourth = await MirrorSyncer(Node(workspace, dead), session).sync(record)
            assert fourth.attempt.outcome == "unchanged" and fourth.pinned_cid == third.pinned_cid
