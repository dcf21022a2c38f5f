"""Incremental audits remember the newest verified block of each chain: later audits read only
the blocks after it, and fall back to the whole chain when its history was rewritten, an old
block file changed, or the memory was edited without the key."""

from __future__ import annotations

import dataclasses
import os
import time

from protocol.model import AddData, Timestamp
from storage.catalog.audit_chains import AuditChainTable
from storage.catalog.audit_files import KEY_FILE, load_or_create_key
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.verifier.builders import (
    T0,
    blocks_oldest_first,
    flip_byte,
    rewrite_chain,
    root_with_slices,
    slice_table,
    write_slice,
)
from verifier.audit import AuditStateMode, VerifyOptions, verify
from verifier.chain_memory import VerifiedChain
from verifier.report import DatasetReport, Status

OLD_NS = (time.time_ns() - 3600 * 10**9) // 10**9 * 10**9
"""An mtime well before any audit (files written moments before an audit are never stamped)."""


async def audit(workspace: Workspace, mode: AuditStateMode) -> DatasetReport:
    report = await verify(
        workspace, ["readings"], VerifyOptions(jobs=1, audit_state=mode), engines=TEST_ENGINES
    )
    [entry] = report.datasets
    return entry


def age(dataset: Dataset) -> None:
    """Every file of the dataset as if written an hour ago."""
    for folder in (dataset.layout.blocks_dir, dataset.layout.data_dir):
        for path in folder.iterdir():
            os.utime(path, ns=(OLD_NS, OLD_NS))


async def append_slice(workspace: Workspace, dataset: Dataset, values: list[int]) -> None:
    state = await dataset.chain.state()
    assert state.last_offset is not None
    at = Timestamp(T0.epoch_nanos + (state.sequence_number + 1) * 60_000_000_000)
    path = workspace.root / "staging" / f"extra-{state.sequence_number}.parquet"
    data_slice = write_slice(slice_table(state.last_offset + 1, values, system_time=at), path)
    event = AddData(
        prev_checkpoint=state.last_checkpoint,
        prev_offset=state.last_offset,
        new_data=data_slice,
        new_watermark=Timestamp(T0.epoch_nanos + max(values) * 1_000_000_000),
    )
    await dataset.commit_data(event, data_file=path, expected_head=state.head, system_time=at)


async def remembered(workspace: Workspace) -> tuple[Dataset, int]:
    """Three slices written an hour ago, audited in full; returns the dataset and its blocks."""
    dataset = await root_with_slices(workspace, "readings", [[1, 2, 3], [4, 5], [6]])
    age(dataset)
    entry = await audit(workspace, "full")
    assert entry.metadata.status is Status.OK and "unchanged" not in entry.metadata.checked
    return dataset, entry.metadata.checked["blocks"]


async def test_only_blocks_after_the_remembered_head_are_read(workspace: Workspace) -> None:
    dataset, blocks = await remembered(workspace)
    entry = await audit(workspace, "incremental")
    assert entry.metadata.status is Status.OK
    assert entry.metadata.checked == {"unchanged": blocks}
    await append_slice(workspace, dataset, [7, 8])
    entry = await audit(workspace, "incremental")
    assert entry.metadata.status is entry.data.status is Status.OK
    assert entry.metadata.checked == {"blocks": 1, "unchanged": blocks}
    # The survey still covers the whole chain: every slice, the range from the Seed.
    assert entry.block_range is not None and entry.block_range.first.sequence_number == 0
    assert entry.data.checked["slices"] == 4 and entry.data.checked["records"] == 8
    # The new block was too fresh to stamp: it is read again until it is not.
    assert (await audit(workspace, "incremental")).metadata.checked["blocks"] == 1
    head = await dataset.chain.head()
    assert head is not None
    os.utime(object_path(dataset.blocks, head), ns=(OLD_NS, OLD_NS))
    assert (await audit(workspace, "incremental")).metadata.checked["blocks"] == 1
    assert (await audit(workspace, "incremental")).metadata.checked == {"unchanged": blocks + 1}


async def test_a_rewritten_history_is_checked_in_full(workspace: Workspace) -> None:
    dataset, blocks = await remembered(workspace)
    chain = await blocks_oldest_first(dataset)
    _, last = chain[-1]
    later = Timestamp(last.system_time.epoch_nanos + 1_000)
    await rewrite_chain(
        dataset, {last.sequence_number: dataclasses.replace(last, system_time=later)}
    )
    entry = await audit(workspace, "incremental")
    assert entry.metadata.status is Status.OK  # still a valid chain, just another one
    assert entry.metadata.checked == {"blocks": blocks}


async def test_a_changed_old_block_file_is_caught_by_an_incremental_audit(
    workspace: Workspace,
) -> None:
    dataset, _ = await remembered(workspace)
    (old_hash, _), *_ = await blocks_oldest_first(dataset)
    path = object_path(dataset.blocks, old_hash)
    flip_byte(path, path.stat().st_size - 3)
    os.utime(path, ns=(OLD_NS, OLD_NS))  # size and mtime as before: only ctime tells
    entry = await audit(workspace, "incremental")
    assert entry.metadata.status is Status.FAILED
    assert "unchanged" not in entry.metadata.checked


async def test_memory_edited_without_the_key_is_ignored(workspace: Workspace) -> None:
    _, blocks = await remembered(workspace)
    await workspace.catalog.sql.execute("UPDATE audit_chains SET seal = x'00'")
    entry = await audit(workspace, "incremental")
    assert entry.metadata.checked == {"blocks": blocks}
    assert (await audit(workspace, "incremental")).metadata.checked == {"unchanged": blocks}


async def test_a_remembered_state_that_does_not_fit_means_a_full_check(
    workspace: Workspace,
) -> None:
    """Sealed with the real key (a bug, not an attacker): the rules restart from the Seed."""
    dataset, blocks = await remembered(workspace)
    assert dataset.id is not None
    key = load_or_create_key(workspace.layout.keys_dir / KEY_FILE)
    table = AuditChainTable(workspace.catalog, key)
    row = await table.load(dataset.id)
    assert row is not None
    known = VerifiedChain.from_bytes(row[1])
    assert known is not None
    await table.save(dataset.id, row[0], dataclasses.replace(known, state=b"{}").to_bytes())
    entry = await audit(workspace, "incremental")
    assert entry.metadata.status is Status.OK and entry.metadata.checked == {"blocks": blocks}
    assert (await audit(workspace, "incremental")).metadata.checked == {"unchanged": blocks}
