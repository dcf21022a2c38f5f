"""Derivative datasets over the example pipelines: incremental = batch, reproducible, replayable."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfd.coordinator.ingest import ingest_push, pull_root
from odfd.coordinator.transform import update_derivative
from protocol.codec import yaml as odf_yaml
from protocol.model import ExecuteTransform, Timestamp
from storage.snapshots import dependency_order
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.pipeline.conftest import CREATED_AT, rows
from verifier.engine.replay import replay_request
from verifier.engine.spark.transform import execute_transform

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DAYS = ["2024-03-01", "2024-03-04", "2024-03-05"]


def clock() -> Callable[[], Timestamp]:
    """Fixed, increasing system times, so two runs of the same steps write the same blocks."""
    state = {"minute": 0}

    def tick() -> Timestamp:
        state["minute"] += 1
        return Timestamp.of(2024, 3, 10, state["minute"] // 60, state["minute"] % 60)

    return tick


async def add_examples(workspace: Workspace, folder: str) -> None:
    snapshots = []
    for path in sorted((EXAMPLES / folder).glob("*.yaml")):
        snapshots.extend(odf_yaml.load_snapshots(path.read_bytes(), source=str(path)))
    for snapshot in dependency_order(snapshots):
        await workspace.create_from_snapshot(snapshot, system_time=CREATED_AT)


async def currency_pipeline(
    folder: Path, batches: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> Workspace:
    """Runs the currency-conversion example in a fresh workspace, one transform per batch of days.

    ``folder`` plays the repository root (the rates source globs a relative path): each day's rate
    file is copied there when that day is ingested.
    """
    now = clock()
    await asyncio.to_thread(folder.mkdir)
    monkeypatch.chdir(folder)
    workspace = await Workspace.init(folder / "workspace")
    await add_examples(workspace, "currency-conversion")
    rates_dir = folder / "examples" / "currency-conversion" / "data" / "rates"
    rates_dir.mkdir(parents=True, exist_ok=True)
    source = EXAMPLES / "currency-conversion" / "data"
    rates, us, eu = [await workspace.get_dataset(a) for a in ("fx.rates", "trades.us", "trades.eu")]
    cad = await workspace.get_dataset("trades.cad")
    for days in batches:
        for day in days:
            shutil.copy(source / "rates" / f"{day}.csv", rates_dir)
        await pull_root(workspace, rates, system_time=now(), engines=TEST_ENGINES)
        for day in days:
            await ingest_push(
                workspace,
                us,
                source / "trades-us" / f"{day}.csv",
                system_time=now(),
                engines=TEST_ENGINES,
            )
            await ingest_push(
                workspace,
                eu,
                source / "trades-eu" / f"{day}.ndjson",
                system_time=now(),
                engines=TEST_ENGINES,
            )
        outcome = await update_derivative(workspace, cad, system_time=now(), engines=TEST_ENGINES)
        assert not outcome.up_to_date
    return workspace


async def transform_blocks(workspace: Workspace, alias: str) -> list[tuple]:
    dataset = await workspace.get_dataset(alias)
    return [
        (h, b)
        async for h, b in dataset.chain.iter_blocks()
        if isinstance(b.event, ExecuteTransform)
    ][::-1]


async def test_currency_conversion_incrementally_equals_one_big_run_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    incremental = await currency_pipeline(tmp_path / "a", [[d] for d in DAYS], monkeypatch)
    again = await currency_pipeline(tmp_path / "b", [[d] for d in DAYS], monkeypatch)
    batch = await currency_pipeline(tmp_path / "c", [DAYS], monkeypatch)
    try:
        columns = ("trade_id", "event_time", "symbol", "quantity", "currency", "price", "price_cad")
        incremental_rows = sorted(await rows(await incremental.get_dataset("trades.cad"), *columns))
        assert incremental_rows == sorted(
            await rows(await batch.get_dataset("trades.cad"), *columns)
        )
        by_id = {r[0]: r for r in incremental_rows}
        assert len(by_id) == 9
        assert by_id["us-1"][4:] == ("USD", 179.66, round(179.66 * 1.3512, 4))
        assert by_id["eu-3"][4:] == ("EUR", 175.02, round(175.02 * 1.4688, 4))

        # The same inputs, queries, system times and offsets give the same logical hashes.
        first = await transform_blocks(incremental, "trades.cad")
        second = await transform_blocks(again, "trades.cad")
        assert len(first) == 3
        assert [b.event.new_data.logical_hash for _, b in first] == [
            b.event.new_data.logical_hash for _, b in second
        ]
        assert [h for h, _ in first] != [h for h, _ in second]  # different datasets, same data

        # Re-running each recorded transaction reproduces its logical hash bit for bit.
        cad = await incremental.get_dataset("trades.cad")
        for n, (block_hash, block) in enumerate(first):

            async def open_input(dataset_id):
                return incremental.open_dataset(dataset_id)

            request = await replay_request(cad, block_hash, open_input, tmp_path / f"replay-{n}")
            result = execute_transform(request)
            assert result.new_data.logical_hash == block.event.new_data.logical_hash
            assert result.new_watermark == block.event.new_watermark
            recorded = pq.read_table(object_path(cad.data, block.event.new_data.physical_hash))
            assert pq.read_table(result.new_data.path).equals(recorded)
    finally:
        for workspace in (incremental, again, batch):
            await workspace.close()


async def test_leaderboard_with_watermarks_and_up_to_date_detection(workspace: Workspace) -> None:
    await add_examples(workspace, "leaderboard")
    scores = await workspace.get_dataset("match.scores")
    board = await workspace.get_dataset("match.leaderboard")
    now = clock()
    assert (
        await update_derivative(workspace, board, system_time=now(), engines=TEST_ENGINES)
    ).reason == "input scores has no data yet"
    for n in (1, 2, 3):
        await ingest_push(
            workspace,
            scores,
            EXAMPLES / "leaderboard" / "data" / f"{n}.ndjson",
            system_time=now(),
            engines=TEST_ENGINES,
        )
        assert not (
            await update_derivative(workspace, board, system_time=now(), engines=TEST_ENGINES)
        ).up_to_date
    assert (
        await update_derivative(workspace, board, system_time=now(), engines=TEST_ENGINES)
    ).up_to_date
    assert await rows(board, "offset", "match_id", "place", "player", "score") == [
        (0, 1, 1, "alice", 100),
        (1, 1, 2, "carol", 95),
        (2, 1, 3, "bob", 80),
        (3, 2, 1, "carol", 90),  # a tie is broken by the player's name
        (4, 2, 2, "erin", 90),
        (5, 2, 3, "alice", 70),
        (6, 3, 1, "carol", 110),
        (7, 3, 2, "dave", 105),
        (8, 3, 3, "bob", 60),
    ]
    events = [b.event for _, b in await transform_blocks(workspace, "match.leaderboard")]
    assert [e.new_watermark for e in events] == [Timestamp.of(2024, 5, d, 18) for d in (1, 2, 3)]
    assert [(i.prev_offset, i.new_offset) for e in events for i in e.query_inputs] == [
        (None, 3),
        (3, 6),
        (6, 10),
    ]
    assert all(e.new_checkpoint is not None for e in events)
    assert events[1].prev_checkpoint == events[0].new_checkpoint.physical_hash
