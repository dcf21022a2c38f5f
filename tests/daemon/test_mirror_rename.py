"""A mirrored dataset renamed or deleted takes its mirror along: the ``Mirror`` resource and its
``mirrors`` row (the daemon's schedule) follow a rename in the same catalog transaction, so the
next sync pulls into the renamed dataset and not into a new one under the old alias; a delete
removes both, so the deleted dataset does not come back at the next sync. Real pull over
``file://``, the daemon's syncer reading its row as its timer does."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from odfd.app.controllers import Reconciler
from odfd.app.datasets import delete_datasets, rename_dataset
from odfd.app.events import DiscardEvents
from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node
from odfd.app.resource_types import MIRROR
from odfd.app.resources import apply_manifests, parse_manifest
from odfd.config import NodeConfig
from odfd.daemon.metrics import DaemonMetrics
from odfd.daemon.mirror_schedule import MirrorSchedule
from protocol.identity import DatasetId
from storage.catalog.mirrors import AttemptBookkeeping, MirrorExistsError, MirrorTable
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from tests.replication.datagen import create_root


def _mirror(name: str, url: str) -> dict[str, object]:
    return {
        "$schema": MIRROR.schema,
        "headers": {"name": name},
        "spec": {"source": url, "every": "1h"},
    }


async def test_a_renamed_mirror_syncs_into_the_renamed_dataset(tmp_path: Path) -> None:
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as workspace,
        aiohttp.ClientSession() as session,
    ):
        writer = await create_root(source, "cities", slices=1, seed=3)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        node = Node(workspace, NodeConfig())
        await apply_manifests(workspace, [parse_manifest(_mirror("cities", url), "m")])
        await Reconciler(workspace, node.config.sync).reconcile_all()
        table = MirrorTable(workspace.catalog)
        syncer = MirrorSyncer(node, session)
        first = await syncer.sync(await table.require("cities"))
        assert first.attempt.outcome == "updated", first.attempt.error
        book = AttemptBookkeeping(
            first.attempt.finished_at, 0, None, first.attempt.source_head, 0, None, None, {}
        )
        await table.finish_attempt(first.attempt, book)
        await workspace.signed_heads.set_freeze_bound("cities", 60.0)

        await rename_dataset(node, "cities", "towns")

        assert await table.get("cities") is None
        row = await table.require("towns")
        resource = await ResourceTable(workspace.catalog).find(MIRROR.schema, "towns")
        assert resource is not None and row.resource_id == resource.id
        assert row.source_head == first.attempt.source_head
        assert [a.mirror for a in await table.attempts()] == ["towns"]
        assert await workspace.signed_heads.freeze_bounds() == {"towns": 60.0}
        head = await writer.append(slices=1)
        second = await syncer.sync(row)
        assert second.attempt.outcome == "updated", second.attempt.error
        assert [r.alias for r in await workspace.list_datasets()] == ["towns"]
        assert second.attempt.new_head == head
        # The controller finds the row it manages under the new name: nothing to change.
        results = await Reconciler(workspace, node.config.sync).reconcile_all()
        assert [(r.resource.name, r.phase) for r in results] == [("towns", "Ready")]
        assert await table.get("cities") is None


async def test_a_deleted_mirrored_dataset_does_not_come_back(tmp_path: Path) -> None:
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as workspace,
        aiohttp.ClientSession() as session,
    ):
        writer = await create_root(source, "cities", slices=1, seed=5)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        node = Node(workspace, NodeConfig())
        await apply_manifests(workspace, [parse_manifest(_mirror("cities", url), "m")])
        await Reconciler(workspace, node.config.sync).reconcile_all()
        table = MirrorTable(workspace.catalog)
        first = await MirrorSyncer(node, session).sync(await table.require("cities"))
        assert first.attempt.outcome == "updated", first.attempt.error

        await delete_datasets(
            node, ["cities"], recursive=False, confirm=lambda _: None, sink=DiscardEvents()
        )

        assert await table.list() == []
        assert await ResourceTable(workspace.catalog).list(MIRROR.schema) == []
        await Reconciler(workspace, node.config.sync).reconcile_all()
        assert await table.list() == []
        assert await workspace.list_datasets() == []


async def _nothing(_: DatasetId) -> None:
    return None


async def test_the_daemons_timer_of_a_mirror_renamed_elsewhere_arms_the_new_name(
    workspace: Workspace,
) -> None:
    """A rename by another process (``odfd rename`` beside a running daemon) leaves the daemon's
    timer under the old name: when it fires, the schedule is loaded again and the mirror is
    armed under its new name, at the time its row says."""
    schedule = MirrorSchedule(lambda: Node(workspace, NodeConfig()), DaemonMetrics(), _nothing)
    table = MirrorTable(workspace.catalog)
    await table.add("cities", "file:///nowhere/cities", [], 3600.0)
    await schedule.load()
    assert set(schedule.runner.scheduled()) == {"cities"}
    async with workspace.catalog.transaction():
        await table.follow("cities", "towns")
    await schedule._sync_job("cities")
    assert set(schedule.runner.scheduled()) == {"towns"}
    await schedule.runner.close(0)


async def test_a_rename_onto_the_name_of_another_mirror_is_refused_naming_it(
    workspace: Workspace,
) -> None:
    """A mirror of the new name not synced yet (no dataset has the alias): the rename is
    refused whole, naming both, and both mirrors stay as they were."""
    table = MirrorTable(workspace.catalog)
    await table.add("cities", "file:///nowhere/cities", [], 3600.0)
    await table.add("towns", "file:///nowhere/towns", [], 3600.0)
    with pytest.raises(MirrorExistsError, match="mirrored and a mirror named towns already"):
        async with workspace.catalog.transaction():
            await table.follow("cities", "towns")
    assert [(m.name, m.source) for m in await table.list()] == [
        ("cities", "file:///nowhere/cities"),
        ("towns", "file:///nowhere/towns"),
    ]
