"""``odfd compact``: merged slices as a new, verifiable history; readers follow it; clear refusals.

Roots are built with the storage API (no Spark) and the derivative runs in DataFusion
(in-process), so pulls and re-executing verifies here start no JVM.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.coordinator.compact import CompactionOptions, execute_compaction, plan_compaction
from protocol.model import AddData, ExecuteTransform, Timestamp
from storage.stores.localfs import local_path
from storage.workspace import Workspace
from tests.cli.helpers import fingerprint, run
from tests.verifier.builders import (
    DOUBLED_SNAPSHOT,
    T0,
    root_with_slices,
    slice_table,
    write_slice,
)

SLICES = [[1, 2], [3], [4, 5], [6]]


def _root(ws: Path, slices: list[list[int]] = SLICES) -> None:
    async def build() -> None:
        async with await Workspace.init(ws) as workspace:
            await root_with_slices(workspace, "nums", slices)

    asyncio.run(build())


def _append(ws: Path, values: list[int], n: int) -> None:
    """One more slice of ``nums`` (its ``n``-th)."""

    async def build() -> None:
        async with await Workspace.open(ws) as workspace:
            dataset = await workspace.get_dataset("nums")
            state = await dataset.chain.state()
            assert state.last_offset is not None
            start = state.last_offset + 1
            time = Timestamp(T0.epoch_nanos + (n + 1) * 60_000_000_000)
            path = ws / "staging" / f"extra-{n}.parquet"
            data = write_slice(slice_table(start, values, system_time=time), path)
            event = AddData(
                prev_checkpoint=state.last_checkpoint,
                prev_offset=state.last_offset,
                new_data=data,
                new_watermark=Timestamp(T0.epoch_nanos + max(values) * 1_000_000_000),
            )
            await dataset.commit_data(
                event, data_file=path, expected_head=state.head, system_time=time
            )

    asyncio.run(build())


def _records(ws: Path, alias: str) -> tuple[int, pa.Table]:
    """Data blocks and every record of ``alias`` (slices read in chain order)."""

    async def read() -> tuple[int, pa.Table]:
        async with await Workspace.open(ws) as workspace:
            dataset = await workspace.get_dataset(alias)
            tables = []
            async for _, block in dataset.chain.iter_blocks():
                event = block.event
                if isinstance(event, (AddData, ExecuteTransform)) and event.new_data:
                    path = local_path(dataset.data, event.new_data.physical_hash)
                    tables.append(pq.read_table(path))
            return len(tables), pa.concat_tables(tables[::-1])

    return asyncio.run(read())


def _doubled(capsys: pytest.CaptureFixture[str], ws: Path) -> list[int]:
    code, out, err = run(
        capsys, "sql", "--root", str(ws), "-o", "csv", "-c", 'SELECT doubled FROM "doubled"'
    )
    assert code == 0, err
    return sorted(int(v) for v in out.split()[1:])


def test_compaction_merges_slices_verifies_and_the_derivative_follows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    _root(ws)
    manifest = tmp_path / "doubled.yaml"
    manifest.write_text(DOUBLED_SNAPSHOT)
    assert run(capsys, "-q", "add", "--root", str(ws), str(manifest))[0] == 0
    code, _, err = run(capsys, "pull", "--root", str(ws), "doubled")
    assert code == 0, err
    _append(ws, [7], 4)
    slices_before, records_before = _records(ws, "nums")
    assert slices_before == 5

    code, _, err = run(capsys, "compact", "--root", str(ws), "nums")
    assert code == 1
    assert "This rewrites history" in err and "doubled" in err and "pass -y" in err

    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "nums")
    assert code == 0, err
    assert "Reset: doubled to its metadata (1 data block(s) dropped)" in err
    assert "Compacted: nums 7 → 3 blocks" in err  # Seed, SetDataSchema, one AddData
    slices_after, records_after = _records(ws, "nums")
    assert slices_after == 1
    assert records_after.equals(records_before)  # same records, offsets and system times

    code, out, err = run(capsys, "verify", "--root", str(ws), "nums")
    assert code == 0, out + err
    slice_files = {p.name for p in ws.glob("datasets/*/data/*")}
    code, out, err = run(capsys, "system", "gc", "--root", str(ws), "--older-than", "0s")
    assert code == 0, err
    assert len(slice_files) - len({p.name for p in ws.glob("datasets/*/data/*")}) == 6
    code, out, err = run(capsys, "verify", "--root", str(ws), "--full", "nums")
    assert code == 0, out + err
    code, _, err = run(capsys, "pull", "--root", str(ws), "doubled")
    assert code == 0, err
    assert _doubled(capsys, ws) == [2, 4, 6, 8, 10, 12, 14]
    code, out, err = run(capsys, "verify", "--root", str(ws), "doubled")
    assert code == 0, out + err


def test_a_derivative_reading_rewritten_input_history_is_told_the_fix_or_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    _root(ws)
    manifest = tmp_path / "doubled.yaml"
    manifest.write_text(DOUBLED_SNAPSHOT)
    assert run(capsys, "-q", "add", "--root", str(ws), str(manifest))[0] == 0
    assert run(capsys, "pull", "--root", str(ws), "doubled")[0] == 0

    async def compact_root_alone(options: CompactionOptions) -> int:
        """As if the readers' reset had not happened (or the input was reset by hand)."""
        async with await Workspace.open(ws) as workspace:
            dataset = await workspace.get_dataset("nums")
            plan = await plan_compaction(dataset, "nums", options)
            await execute_compaction(ws, dataset, plan)
            return plan.merged_runs

    assert asyncio.run(compact_root_alone(CompactionOptions(max_slice_records=3))) == 2
    assert _records(ws, "nums")[0] == 2  # [1, 2] + [3], [4, 5] + [6]
    assert run(capsys, "verify", "--root", str(ws), "nums")[0] == 0

    code, _, err = run(capsys, "pull", "--root", str(ws), "doubled")
    assert code == 1
    assert "no longer in that input's history (it was compacted or reset)" in err
    assert "--reset-derivatives-on-diverged-input" in err
    assert "`odfd compact --keep-metadata-only doubled`" in err
    code, _, err = run(
        capsys, "-y", "compact", "--root", str(ws), "--keep-metadata-only", "doubled"
    )
    assert code == 0, err
    assert run(capsys, "pull", "--root", str(ws), "doubled")[0] == 0
    assert _doubled(capsys, ws) == [2, 4, 6, 8, 10, 12]

    assert asyncio.run(compact_root_alone(CompactionOptions())) == 1
    code, _, err = run(
        capsys, "pull", "--root", str(ws), "--reset-derivatives-on-diverged-input", "doubled"
    )
    assert code == 0, err
    assert "Reset: doubled: an input's history was rewritten" in err
    assert _doubled(capsys, ws) == [2, 4, 6, 8, 10, 12]
    code, out, err = run(capsys, "verify", "--root", str(ws), "doubled")
    assert code == 0, out + err


def test_refusals_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = tmp_path / "ws"
    _root(ws)
    manifest = tmp_path / "doubled.yaml"
    manifest.write_text(DOUBLED_SNAPSHOT)
    assert run(capsys, "-q", "add", "--root", str(ws), str(manifest))[0] == 0
    assert run(capsys, "pull", "--root", str(ws), "doubled")[0] == 0
    before = fingerprint(ws)

    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "doubled")
    assert code == 1
    assert "doubled is a derivative dataset" in err and "--keep-metadata-only" in err

    code, _, err = run(
        capsys, "-y", "compact", "--root", str(ws), "--max-slice-records", "1", "nums"
    )
    assert code == 0
    assert "Skipped: nothing to compact: nums has no consecutive slices within" in err

    code, _, err = run(capsys, "compact", "--root", str(ws), "--max-slice-size", "0", "nums")
    assert code == 2 and "must be at least 1" in err
    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "nosuch")
    assert code == 1 and "nosuch" in err
    assert fingerprint(ws) == before

    async def pulled_from_a_remote() -> None:
        async with await Workspace.open(ws) as workspace:
            dataset = await workspace.get_dataset("nums")
            await dataset.set_remote_aliases("pull", ["http://peer.example/nums"])

    asyncio.run(pulled_from_a_remote())
    before = fingerprint(ws)
    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "nums")
    assert code == 1
    assert "nums is a copy pulled from http://peer.example/nums: rewriting its history" in err
    assert fingerprint(ws) == before


def test_a_single_slice_has_nothing_to_compact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    _root(ws, [[1, 2, 3]])
    before = fingerprint(ws)
    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "nums")
    assert code == 0 and "Skipped: nothing to compact" in err
    assert fingerprint(ws) == before


def test_checkpoints_and_watermarks_carry_over_and_a_watermark_block_splits_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A merged block starts where its first slice did and ends with the last one's checkpoint,
    watermark and source state; an ``AddData`` without data (a watermark move) stays a block."""
    ws = tmp_path / "ws"

    async def build() -> None:
        async with await Workspace.init(ws) as workspace:
            dataset = await root_with_slices(workspace, "nums", [[1], [2], [3]], checkpoints=True)
            state = await dataset.chain.state()
            assert state.head is not None
            last = (await dataset.chain.get_block(state.head)).event
            mark = AddData(
                prev_checkpoint=state.last_checkpoint,
                prev_offset=state.last_offset,
                new_checkpoint=last.new_checkpoint,
                new_watermark=Timestamp(T0.epoch_nanos + 10 * 1_000_000_000),
            )
            time = Timestamp(T0.epoch_nanos + 4 * 60_000_000_000)
            await dataset.commit_event(mark, expected_head=state.head, system_time=time)

    asyncio.run(build())
    _append(ws, [11], 5)
    _append(ws, [12], 6)

    async def blocks() -> list[AddData]:
        async with await Workspace.open(ws) as workspace:
            dataset = await workspace.get_dataset("nums")
            return [
                b.event
                async for _, b in dataset.chain.iter_blocks()
                if isinstance(b.event, AddData)
            ][::-1]

    before = asyncio.run(blocks())
    code, _, err = run(capsys, "-y", "compact", "--root", str(ws), "nums")
    assert code == 0, err
    after = asyncio.run(blocks())
    assert [b.new_data is not None for b in after] == [True, False, True]
    first, mark, last = after
    assert first.new_data.offset_interval.start == 0 and first.new_data.offset_interval.end == 2
    assert first.prev_checkpoint is None and first.new_checkpoint == before[2].new_checkpoint
    assert first.new_watermark == before[2].new_watermark
    assert mark == before[3]
    assert last.prev_offset == 2 and last.new_data.offset_interval.end == 4
    assert last.prev_checkpoint == before[4].prev_checkpoint
    assert last.new_watermark == before[5].new_watermark
    code, out, err = run(capsys, "verify", "--root", str(ws), "--full", "nums")
    assert code == 0, out + err
