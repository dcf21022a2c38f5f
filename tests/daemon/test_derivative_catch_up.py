"""A derivative whose mirrored input moved while the daemon was not listening (a sync cancelled
at shutdown after its head move, a kill) is brought up to date after start-up, although the
mirror's next sync finds nothing new, through ``odfd pull DERIVATIVE``'s use case: its new block is
in the write log as the daemon's. The daemon runs in-process on the session's SparkSession."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from odfd.app.node import Node
from odfd.app.write_log import DAEMON, BlockWriters, writes_of
from odfd.config import load_config
from odfd.coordinator.transform import update_derivative
from odfd.daemon.service import Daemon
from odfd.sync.pull import pull
from protocol.codec.yaml import load_snapshot
from protocol.identity import DatasetId, Multihash
from storage.catalog.mirrors import MirrorTable
from storage.chain.rules import ChainState
from storage.workspace import Workspace
from tests.fixtures.manifests import derivative_snapshot
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
from tests.replication.datagen import create_root
from verifier.engine.spark import session as spark_session

pytestmark = pytest.mark.spark

T = TypeVar("T")

# Audits are off: they would only add verifier runs that this test does not look at.
DAEMON_CONFIG = (
    TEST_SPARK_CONFIG
    + """
[sync]
startup_spread = "0s"
[audit]
after_sync = false
interval = "0s"
[daemon]
shutdown_timeout = "5s"
"""
)

DERIVATIVE = derivative_snapshot(
    "cities.values", "cities", "SELECT event_time, upper(value) AS value FROM cities"
)


async def _eventually(what: str, probe: Callable[[], Awaitable[T | None]], within: float) -> T:
    """Polls: the daemon records its progress in the catalog, which signals nothing."""
    try:
        async with asyncio.timeout(within):
            while True:
                if value := await probe():
                    return value
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"timed out after {within:g} s waiting for {what}") from None


async def _state(workspace: Workspace, dataset_id: DatasetId) -> ChainState:
    return await workspace.open_dataset(dataset_id).chain.state()


def _idle(daemon: Daemon) -> Callable[[], Awaitable[bool]]:
    async def idle() -> bool:
        runner = daemon.derivatives.runner
        return runner.queued == 0 and runner.running == 0

    return idle


def _consumed(state: ChainState, input_id: DatasetId) -> Multihash | None:
    entry = state.transform_inputs.get(input_id)
    return None if entry is None else entry.new_block_hash or entry.prev_block_hash


async def test_derivative_behind_its_mirrored_input_is_updated_after_start_up(
    spark: object, tmp_path: Path
) -> None:
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as node,
    ):
        writer = await create_root(source, "cities", slices=2, rows=10, seed=7)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        config_path = node.layout.config_path
        config_path.write_text(config_path.read_text() + DAEMON_CONFIG)

        # The mirror's first sync and the derivative's first transaction.
        await MirrorTable(node.catalog).add("cities", url, [], 3600.0)
        mirrored = await pull(node, url, alias="cities")
        mirrored_id = mirrored.dataset_id
        assert mirrored_id is not None
        derivative = await node.create_from_snapshot(load_snapshot(DERIVATIVE, "derivative"))
        derivative_id = derivative.id
        assert derivative_id is not None
        first = await update_derivative(node, derivative, engines=TEST_ENGINES)
        assert not first.up_to_date and first.num_records == 20
        assert _consumed(await _state(node, derivative_id), mirrored_id) == mirrored.new_head

        # New data at the source; a sync pulls it, and the daemon goes down before anything
        # else hears of it (what a sync cancelled after its head move leaves behind).
        source_head = await writer.append(slices=1, rows=10)
        assert (await pull(node, url, alias="cities")).new_head == source_head

        daemon = Daemon(
            Node(node, load_config(config_path)),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        try:

            async def caught_up() -> ChainState | None:
                state = await _state(node, derivative_id)
                return state if _consumed(state, mirrored_id) == source_head else None

            state = await _eventually("the derivative to consume the new input head", caught_up, 90)
            attempts = await _eventually(
                "the mirror's start-up sync",
                lambda: MirrorTable(node.catalog).attempts("cities"),
                30,
            )
            # The sync found nothing new: only the catch-up can have triggered the transform.
            assert [a.outcome for a in attempts] == ["unchanged"]
            assert state.last_offset == 29  # the third slice's ten records went through
            assert state.head != first.new_head
            # Up to date now: nothing more to queue.
            await _eventually("the transform to finish", _idle(daemon), 30)
            assert await daemon.derivatives.catch_up() == []
        finally:
            await daemon.shutdown()
        assert spark_session.is_running()  # the daemon leaves a session it did not start alone

        # The transaction read exactly the input blocks after the previous one.
        last = state.transform_inputs[mirrored_id]
        assert (last.prev_block_hash, last.new_block_hash) == (mirrored.new_head, source_head)

        # The daemon's transform is in the write log as the daemon's pull of the derivative
        # (`odfd log --who`); the first transaction, run here past the use case, is nobody's.
        writes = await writes_of(node, derivative_id)
        moves = [(w.target, w.old_head, w.new_head) for w in writes]
        assert moves == [("cities.values", str(first.new_head), str(state.head))]
        assert [(w.action, w.account, w.via) for w in writes] == [
            ("pull", DAEMON.account, DAEMON.via)
        ]
        writers = BlockWriters(writes)
        assert writers.writer(str(state.head)) == writes[0]
        assert writers.writer(str(first.new_head)) is None
        assert (last.prev_offset, last.new_offset) == (19, 29)
