"""A sync that times out after its pull moved the head (a slow push or pin afterwards) is
recorded as failed with the heads it moved between, and the moved dataset still gets its
after-sync audit: the next sync would find nothing new and trigger nothing. In-process daemon,
real pull over ``file://``, real verifier."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odfd.app.mirror_sync import MirrorSyncer, SyncReport
from odfd.app.node import Node
from odfd.config import load_config
from odfd.daemon.service import Daemon
from storage.catalog.audits import AuditTable
from storage.catalog.mirror_records import MirrorRecord
from storage.catalog.mirrors import MirrorTable
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_SPARK_CONFIG
from tests.replication.datagen import create_root

ALIAS = "cities"

# With the Spark session's settings, in case a Spark test started it in this process.
DAEMON_CONFIG = (
    TEST_SPARK_CONFIG
    + """
[sync]
startup_spread = "0s"
attempt_timeout = "3s"
[audit]
interval = "0s"
[daemon]
shutdown_timeout = "5s"
"""
)


async def test_head_moved_by_a_timed_out_sync_is_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as node,
    ):
        writer = await create_root(source, ALIAS, slices=2, seed=6)
        source_head = await writer.dataset.chain.head()
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        config_path = node.layout.config_path
        config_path.write_text(config_path.read_text() + DAEMON_CONFIG)
        await MirrorTable(node.catalog).add(ALIAS, url, [], 3600.0)
        sync = MirrorSyncer.sync

        async def pull_then_hang(self: MirrorSyncer, mirror: MirrorRecord) -> SyncReport:
            await sync(self, mirror)  # the pull commits the new head ...
            await asyncio.sleep(3600)  # ... and what follows it outlives [sync] attempt_timeout
            raise AssertionError("not reached")

        monkeypatch.setattr(MirrorSyncer, "sync", pull_then_hang)
        daemon = Daemon(
            Node(node, load_config(config_path)),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while not (audits := await AuditTable(node.catalog).latest_all()):
                assert asyncio.get_running_loop().time() < deadline, (
                    "no audit after the timed-out sync"
                )
                await asyncio.sleep(0.2)
        finally:
            await daemon.shutdown()
        (attempt, *_) = await MirrorTable(node.catalog).attempts(ALIAS)
        assert (
            attempt.outcome == "failed"
            and attempt.error is not None
            and "timed out" in attempt.error
        )
        assert (attempt.old_head, attempt.new_head, attempt.dataset_id) == (
            None,
            source_head,
            writer.dataset_id,
        )
        audit = audits[writer.dataset_id]
        assert (audit.trigger, audit.scope, audit.status, audit.head) == (
            "sync",
            "integrity",
            "ok",
            source_head,
        )
