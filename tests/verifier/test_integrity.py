"""Layers 1 and 2 against datasets built with the storage API, honest and tampered with."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TypedDict, Unpack

import pyarrow as pa
import pytest

from protocol.codec.flatbuffers import encode_block
from protocol.model import AddData, Timestamp
from storage.dataset import Dataset
from storage.layout import object_name
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.verifier.builders import (
    blocks_oldest_first,
    data_blocks,
    flip_byte,
    rewrite_chain,
    root_with_slices,
    slice_table,
    write_slice,
)
from verifier import workers
from verifier.audit import VerifyOptions, verify
from verifier.errors import VerifyUsageError
from verifier.report import DatasetReport, Finding, LayerResult, Status
from verifier.selection import BlockSelector, RangeRequest


class _AuditOptions(TypedDict, total=False):
    jobs: int
    block_range: RangeRequest


async def audit(
    workspace: Workspace, alias: str, **options: Unpack[_AuditOptions]
) -> DatasetReport:
    options.setdefault("jobs", 1)
    report = await verify(workspace, [alias], VerifyOptions(**options), engines=TEST_ENGINES)
    [entry] = [d for d in report.datasets if d.alias == alias]
    return entry


def only(layer: LayerResult, rule: str) -> list[Finding]:
    return [f for f in layer.findings if f.rule == rule]


def data_file(dataset: Dataset, block) -> Path:
    return object_path(dataset.data, block.event.new_data.physical_hash)


async def test_an_honest_root_dataset_verifies_and_every_file_is_counted(
    workspace: Workspace,
) -> None:
    await root_with_slices(workspace, "readings", [[1, 2, 3], [4, 5], [6]], checkpoints=True)
    report = await verify(workspace, ["readings"], VerifyOptions(jobs=2), engines=TEST_ENGINES)
    [entry] = report.datasets
    assert entry.metadata.status is Status.OK and entry.metadata.checked == {"blocks": 5}
    assert entry.data.status is Status.OK
    assert entry.data.checked["slices"] == 3 and entry.data.checked["checkpoints"] == 3
    assert entry.data.checked["records"] == 6
    assert entry.reproducibility.status is Status.SKIPPED
    assert (entry.head.sequence_number, entry.block_range.first.sequence_number) == (4, 0)
    assert report.exit_code == 0 and report.status is Status.OK


async def test_a_flipped_byte_in_a_data_file_fails_data_integrity_naming_block_and_file(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workers, "INLINE_BYTES", 0)  # even these small files go to processes
    dataset = await root_with_slices(workspace, "readings", [[1, 2, 3], [4, 5, 6]])
    (_, first), (hash, second) = await data_blocks(dataset)
    path = data_file(dataset, second)
    flip_byte(path, path.stat().st_size // 2)
    entry = await audit(workspace, "readings", jobs=2)  # checked in worker processes
    assert entry.metadata.status is Status.OK
    assert entry.data.status is Status.FAILED
    [finding] = only(entry.data, "physical-hash")
    assert (finding.block.sequence_number, finding.block.hash) == (second.sequence_number, hash)
    assert finding.file == f"data/{path.name}" and finding.field == "event.newData.physicalHash"
    assert finding.expected == path.name
    assert all(f.block.hash == hash for f in entry.data.findings)  # the intact slice is not blamed


async def test_swapped_data_files_fail_both_blocks(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2, 3], [4, 5, 6]])
    (hash_a, a), (hash_b, b) = await data_blocks(dataset)
    path_a, path_b = data_file(dataset, a), data_file(dataset, b)
    bytes_a, bytes_b = path_a.read_bytes(), path_b.read_bytes()
    path_a.write_bytes(bytes_b)
    path_b.write_bytes(bytes_a)
    entry = await audit(workspace, "readings")
    assert entry.data.status is Status.FAILED
    for hash, path in ((hash_a, path_a), (hash_b, path_b)):
        rules = {
            f.rule
            for f in entry.data.findings
            if f.block.hash == hash and f.file == f"data/{path.name}"
        }
        assert rules & {"size", "physical-hash"}
        # Re-reading the content shows the records are not the block's either.
        assert {"offset-values", "logical-hash"} <= rules


async def test_a_truncated_block_fails_metadata_integrity_and_nothing_else_is_trusted(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1], [2], [3]])
    blocks = await blocks_oldest_first(dataset)
    hash, block = blocks[3]
    path = object_path(dataset.blocks, hash)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    report = await verify(workspace, ["readings"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
    [entry] = report.datasets
    [finding] = entry.metadata.findings
    assert finding.rule == "block-hash" and finding.status is Status.FAILED
    assert (finding.block.sequence_number, finding.block.hash) == (3, hash)
    assert finding.file == f"blocks/{object_name(hash)}"
    assert entry.data.status is Status.CANNOT_VERIFY
    assert report.exit_code == 1


async def test_a_block_whose_event_was_edited_in_place_no_longer_matches_its_name(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2], [3, 4]])
    hash, block = (await data_blocks(dataset))[0]
    assert isinstance(block.event, AddData)
    edited = dataclasses.replace(
        block, event=dataclasses.replace(block.event, new_watermark=Timestamp.of(2030, 1, 1))
    )
    object_path(dataset.blocks, hash).write_bytes(encode_block(edited))
    entry = await audit(workspace, "readings")
    [finding] = entry.metadata.findings
    assert finding.rule == "block-hash" and finding.block.hash == hash
    assert finding.block.sequence_number == block.sequence_number


async def test_an_edited_event_in_a_rehashed_chain_breaks_a_chain_rule(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2], [3, 4], [5]])
    _, block = (await data_blocks(dataset))[1]
    assert isinstance(block.event, AddData)
    forged = dataclasses.replace(block, event=dataclasses.replace(block.event, prev_offset=0))
    new_hashes = await rewrite_chain(dataset, {block.sequence_number: forged})
    entry = await audit(workspace, "readings")
    [finding] = entry.metadata.findings
    assert finding.rule == "prev-offset"
    assert (finding.block.sequence_number, finding.block.hash) == (
        block.sequence_number,
        new_hashes[block.sequence_number],
    )
    assert "prevOffset is 0" in finding.message


async def test_a_forged_logical_hash_in_a_rehashed_chain_fails_data_integrity(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2], [3, 4]])
    (_, first), (_, second) = await data_blocks(dataset)
    assert isinstance(second.event, AddData) and second.event.new_data is not None
    forged_slice = dataclasses.replace(
        second.event.new_data, logical_hash=first.event.new_data.logical_hash
    )
    forged = dataclasses.replace(
        second, event=dataclasses.replace(second.event, new_data=forged_slice)
    )
    new_hashes = await rewrite_chain(dataset, {second.sequence_number: forged})
    entry = await audit(workspace, "readings")
    assert entry.metadata.status is Status.OK
    [finding] = entry.data.findings
    assert finding.rule == "logical-hash" and finding.field == "event.newData.logicalHash"
    assert finding.block.hash == new_hashes[second.sequence_number]
    assert finding.expected == str(first.event.new_data.logical_hash)
    assert finding.actual == str(
        second.event.new_data.logical_hash
    )  # what the records really hash to


async def test_a_missing_block_is_reported_against_the_block_linking_to_it(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1], [2], [3]])
    blocks = await blocks_oldest_first(dataset)
    os.remove(object_path(dataset.blocks, blocks[2][0]))
    entry = await audit(workspace, "readings")
    [finding] = entry.metadata.findings
    assert finding.rule == "missing-block" and finding.field == "prevBlockHash"
    assert finding.block.hash == blocks[2][0] and finding.block.sequence_number == 2
    assert f"#3 {blocks[3][0]}" in finding.message


async def test_missing_and_corrupt_files_and_checkpoints(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1], [2], [3]], checkpoints=True)
    (h0, b0), (h1, b1), (h2, b2) = await data_blocks(dataset)
    os.remove(data_file(dataset, b0))
    os.remove(object_path(dataset.checkpoints, b1.event.new_checkpoint.physical_hash))
    flip_byte(object_path(dataset.checkpoints, b2.event.new_checkpoint.physical_hash), 3)
    entry = await audit(workspace, "readings")
    found = {(f.block.hash, f.rule, f.file.split("/")[0], f.field) for f in entry.data.findings}
    assert found == {
        (h0, "missing-file", "data", "event.newData.physicalHash"),
        (h1, "missing-file", "checkpoints", "event.newCheckpoint.physicalHash"),
        (h2, "physical-hash", "checkpoints", "event.newCheckpoint.physicalHash"),
    }


async def _commit_forged_slice(workspace: Workspace, dataset: Dataset, table: pa.Table) -> None:
    """Commits ``table`` as the next slice with hashes computed over it: only re-reading can tell."""
    state = await dataset.chain.state()
    path = workspace.root / "staging" / "forged.parquet"
    data_slice = write_slice(table, path)
    start = 0 if state.last_offset is None else state.last_offset + 1
    data_slice = dataclasses.replace(
        data_slice,
        offset_interval=dataclasses.replace(
            data_slice.offset_interval, start=start, end=start + table.num_rows - 1
        ),
    )
    event = AddData(
        prev_offset=state.last_offset, new_data=data_slice, new_watermark=state.last_watermark
    )
    await dataset.commit_data(
        event, data_file=path, expected_head=state.head, system_time=Timestamp.of(2024, 2, 1)
    )


async def test_records_that_contradict_their_block_fail_even_with_matching_hashes(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2]])
    table = slice_table(2, [3, 4, 5], ops=[0, 7, 1])
    table = table.set_column(0, "offset", pa.array([2, 3, 3], pa.int64()))
    await _commit_forged_slice(workspace, dataset, table)
    entry = await audit(workspace, "readings")
    rules = {f.rule: f for f in entry.data.findings}
    assert set(rules) == {"offset-values", "op-values"}
    assert rules["offset-values"].message.startswith("row 2 has offset 3, expected 4")
    assert "holds 7" in rules["op-values"].message


async def test_system_columns_must_be_present_and_well_typed(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2]])
    table = slice_table(2, [3, 4])
    table = table.set_column(2, "system_time", table.column("system_time").cast(pa.timestamp("ms")))
    table = table.set_column(1, "op", table.column("op").cast(pa.string()))
    table = table.append_column("extra", pa.array(["a", "b"]))
    await _commit_forged_slice(workspace, dataset, table)
    entry = await audit(workspace, "readings")
    messages = sorted(f.message for f in entry.data.findings if f.rule == "system-column")
    assert messages == [
        "system column 'op' is string, expected int32 or uint8",
        "system column 'system_time' is timestamp[ms], expected timestamp in UTC",
    ]
    [declared] = [f for f in entry.data.findings if f.rule == "declared-schema"]
    assert declared.message.endswith("declared in block #1")
    assert declared.actual == "offset, op, system_time, event_time, value, extra"


async def test_the_range_limits_data_checks_but_metadata_is_always_whole(
    workspace: Workspace,
) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1], [2], [3], [4]])
    blocks = await data_blocks(dataset)  # sequence numbers 2..5
    flip_byte(data_file(dataset, blocks[1][1]), 10)  # block #3
    assert (await audit(workspace, "readings", block_range=_range(4, None))).status is Status.OK
    assert (await audit(workspace, "readings", block_range=_range(None, 2))).status is Status.OK
    by_hash = await audit(workspace, "readings", block_range=_range(blocks[1][0], blocks[1][0]))
    assert by_hash.data.status is Status.FAILED and by_hash.data.checked["slices"] == 1
    assert (
        by_hash.block_range.first.sequence_number,
        by_hash.block_range.last.sequence_number,
    ) == (3, 3)
    limited = await audit(workspace, "readings", block_range=_range(4, 5))
    assert limited.metadata.checked["blocks"] == 6 and limited.data.checked["slices"] == 2


async def test_range_ends_must_be_blocks_of_the_chain_in_order(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1], [2]])
    blocks = await blocks_oldest_first(dataset)
    with pytest.raises(VerifyUsageError, match="--to 9 is not a block of readings"):
        await audit(workspace, "readings", block_range=_range(None, 9))
    with pytest.raises(VerifyUsageError, match="is after --to"):
        await audit(workspace, "readings", block_range=_range(blocks[3][0], 2))
    with pytest.raises(VerifyUsageError, match="--from 3 is after --to 1"):
        await audit(workspace, "readings", block_range=_range(3, 1))


def _range(first: BlockSelector | None, last: BlockSelector | None) -> RangeRequest:
    return RangeRequest(first, last)


async def test_a_dataset_larger_than_one_batch_and_row_group_streams_and_verifies(
    workspace: Workspace,
) -> None:
    values = list(range(25_000))
    await root_with_slices(
        workspace, "big", [values[:12_345], values[12_345:]], row_group_size=4_000
    )
    entry = await audit(workspace, "big")
    assert entry.status is Status.OK and entry.data.checked["records"] == 25_000


async def test_a_truncated_data_file_fails_on_size_and_on_re_reading(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1, 2, 3]])
    [(hash, block)] = await data_blocks(dataset)
    path = data_file(dataset, block)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size - 100])
    entry = await audit(workspace, "readings")
    findings = {f.rule: f for f in entry.data.findings}
    assert set(findings) == {"size", "unreadable"}
    assert (findings["size"].expected, findings["size"].actual) == (str(size), str(size - 100))
    assert all(f.block.hash == hash and f.file == f"data/{path.name}" for f in findings.values())


async def test_a_head_ref_that_is_not_a_hash_fails_metadata_integrity(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "readings", [[1]])
    (dataset.layout.refs_dir / "head").write_text("not a block hash")
    entry = await audit(workspace, "readings")
    [finding] = entry.metadata.findings
    assert (finding.rule, finding.file) == ("head-ref", "refs/head")
    assert entry.head is None and entry.data.status is Status.CANNOT_VERIFY
