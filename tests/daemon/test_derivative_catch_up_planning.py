"""Which derivatives ``DerivativeUpdater.catch_up`` queues, decided from chain states alone
(no Spark: the runner is never started, so queued transforms do not run)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odfd.app.node import Node
from odfd.config import NodeConfig
from odfd.daemon.derivatives import DerivativeUpdater
from odfd.daemon.metrics import DaemonMetrics
from protocol.codec.yaml import load_snapshot
from protocol.identity import DatasetId, Multihash
from protocol.model import ExecuteTransform, ExecuteTransformInput, Timestamp
from storage.catalog.mirrors import MirrorTable
from storage.dataset import Dataset
from storage.layout import object_name
from storage.workspace import Workspace
from tests.fixtures.manifests import derivative_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.replication.datagen import create_root


def _derivative(name: str) -> str:
    return derivative_snapshot(name, "cities", "SELECT event_time, value FROM cities")


async def _consume(
    derivative: Dataset, input_id: DatasetId, head: Multihash | None, last_offset: int
) -> None:
    """An ``ExecuteTransform`` that consumed the input up to ``head`` (and wrote nothing)."""
    event = ExecuteTransform(
        query_inputs=(
            ExecuteTransformInput(dataset_id=input_id, new_block_hash=head, new_offset=last_offset),
        ),
        new_watermark=Timestamp.of(2024, 1, 2),
    )
    await derivative.commit_event(event, expected_head=await derivative.chain.head())


async def test_catch_up_queues_exactly_the_derivatives_behind_their_inputs(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    writer = await create_root(workspace, "cities", slices=2, rows=10)
    cities = writer.dataset
    assert cities.id is not None
    datasets = {
        name: await workspace.create_from_snapshot(load_snapshot(_derivative(name), name))
        for name in ("never-ran", "current", "mirrored", "broken")
    }
    for name in ("current", "mirrored", "broken"):
        await _consume(datasets[name], cities.id, await cities.chain.head(), 19)
    await MirrorTable(workspace.catalog).add(
        "mirrored", "http://example.invalid/mirrored", [], 60.0
    )
    node = Node(workspace, NodeConfig(), engines=TEST_ENGINES)
    updater = DerivativeUpdater(
        lambda: node, DaemonMetrics(), asyncio.Semaphore(1), lambda _: asyncio.sleep(0)
    )

    # Never transformed while its input has blocks: queued. Consumed the input's head: not.
    assert await updater.catch_up() == [datasets["never-ran"].id]
    # Already queued: not queued twice.
    assert await updater.catch_up() == []

    # The input moves on without anyone telling the derivatives (a sync cancelled after its head
    # move); a mirrored derivative gets its blocks from its source, never from a transform.
    await writer.append(slices=1, rows=10)
    # A derivative whose chain cannot be read is skipped and logged, not the end of the sweep.
    broken = datasets["broken"]
    head = await broken.chain.head()
    assert head is not None
    (broken.layout.blocks_dir / object_name(head)).unlink()
    assert broken.id is not None
    await workspace.chain_states.delete(broken.id)
    with caplog.at_level(logging.WARNING, logger="odfd.daemon.derivatives"):
        assert await updater.catch_up() == [datasets["current"].id]
    swept = [r for r in caplog.records if r.name == "odfd.daemon.derivatives"]
    assert [getattr(r, "dataset", None) for r in swept] == ["broken"]
    assert updater.runner.queued == 2
