"""Incremental audits: only files changed since they last verified are read again, and a full
pass still catches what the fast path cannot see."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from storage.catalog.audit_files import KEY_FILE, AuditFileTable, FileStamp, load_or_create_key
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.verifier.builders import data_blocks, flip_byte, root_with_slices
from verifier.audit import AuditStateMode, VerifyOptions, verify
from verifier.report import DatasetReport, Status

OLD_NS = (time.time_ns() - 3600 * 10**9) // 10**9 * 10**9
"""An mtime well before any audit (files written moments before an audit are never stamped)."""


async def audit(workspace: Workspace, mode: AuditStateMode) -> DatasetReport:
    report = await verify(
        workspace, ["readings"], VerifyOptions(jobs=1, audit_state=mode), engines=TEST_ENGINES
    )
    [entry] = report.datasets
    return entry


async def audited_dataset(workspace: Workspace) -> tuple[Dataset, list[Path]]:
    """Three slices and checkpoints, written an hour ago, then audited in full."""
    dataset = await root_with_slices(
        workspace, "readings", [[1, 2, 3], [4, 5], [6]], checkpoints=True
    )
    files = [*dataset.layout.data_dir.iterdir(), *dataset.layout.checkpoints_dir.iterdir()]
    for path in files:
        os.utime(path, ns=(OLD_NS, OLD_NS))
    entry = await audit(workspace, "full")
    assert entry.data.status is Status.OK and entry.data.checked["unchanged"] == 0
    return dataset, files


async def first_slice(dataset: Dataset) -> Path:
    (_, block), *_ = await data_blocks(dataset)
    return object_path(dataset.data, block.event.new_data.physical_hash)


async def test_an_incremental_audit_reads_only_what_changed(workspace: Workspace) -> None:
    dataset, files = await audited_dataset(workspace)
    entry = await audit(workspace, "incremental")
    assert entry.data.status is Status.OK
    assert entry.data.checked["unchanged"] == len(files) == 6
    assert entry.data.checked["slices"] == 3 and entry.data.checked["records"] == 6
    # An audit without saved state reads everything, as before.
    assert "unchanged" not in (await audit(workspace, "off")).data.checked


@pytest.mark.parametrize("change", ["size", "mtime"])
async def test_the_fast_path_never_passes_a_file_whose_size_or_mtime_changed(
    workspace: Workspace, change: str
) -> None:
    dataset, _ = await audited_dataset(workspace)
    path = await first_slice(dataset)
    if change == "size":
        path.write_bytes(path.read_bytes() + b"appended")
        os.utime(path, ns=(OLD_NS, OLD_NS))  # even with the old mtime back
    else:
        flip_byte(path, path.stat().st_size // 2)
        os.utime(path, ns=(OLD_NS + 10**9, OLD_NS + 10**9))
    entry = await audit(workspace, "incremental")
    assert entry.data.status is Status.FAILED
    assert {f.file for f in entry.data.findings} == {f"data/{path.name}"}
    assert entry.data.checked["unchanged"] == 5
    # The changed file lost its stamp: it stays failed until it is fixed.
    assert (await audit(workspace, "incremental")).data.status is Status.FAILED


async def test_a_file_tampered_with_under_an_identical_stat_is_caught_by_the_next_full_pass(
    workspace: Workspace,
) -> None:
    dataset, _ = await audited_dataset(workspace)
    path = await first_slice(dataset)
    flip_byte(path, path.stat().st_size // 2)  # same size
    os.utime(path, ns=(OLD_NS, OLD_NS))  # same mtime
    # Silent corruption (or a clock set back) would also keep ctime; make the stamp match the
    # new stat as such a change would, sealed as the node itself would seal it.
    key = load_or_create_key(workspace.layout.keys_dir / KEY_FILE)
    table = AuditFileTable(workspace.catalog, key)
    assert dataset.id is not None
    stamps = await table.load(dataset.id)
    file = f"data/{path.name}"
    await table.save(dataset.id, [FileStamp.of(file, path.stat(), stamps[file].physical_hash)])

    assert (await audit(workspace, "incremental")).data.status is Status.OK  # the fast path
    entry = await audit(workspace, "full")
    assert entry.data.status is Status.FAILED
    assert {(f.rule, f.file) for f in entry.data.findings} >= {("physical-hash", file)}
    # The full pass dropped the stamp: the fast path now reads the file too.
    assert (await audit(workspace, "incremental")).data.status is Status.FAILED


async def test_a_stamp_forged_in_the_catalog_without_the_key_is_ignored(
    workspace: Workspace,
) -> None:
    dataset, _ = await audited_dataset(workspace)
    path = await first_slice(dataset)
    flip_byte(path, path.stat().st_size // 2)
    stat = path.stat()
    await workspace.catalog.sql.execute(
        "UPDATE audit_files SET mtime_ns = ?, ctime_ns = ?, inode = ?"
        " WHERE dataset_id = ? AND file = ?",
        (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, str(dataset.id), f"data/{path.name}"),
    )
    entry = await audit(workspace, "incremental")
    assert entry.data.status is Status.FAILED
    assert entry.data.checked["unchanged"] == 5


async def test_files_written_moments_before_an_audit_are_not_stamped(
    workspace: Workspace,
) -> None:
    await root_with_slices(workspace, "readings", [[1], [2]])
    assert (await audit(workspace, "full")).data.status is Status.OK
    entry = await audit(workspace, "incremental")
    assert entry.data.checked["unchanged"] == 0 and entry.data.checked["slices"] == 2
