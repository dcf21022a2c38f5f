"""Committing one transaction: its files, then its blocks, then ``head`` — all or nothing.

A transaction may need two blocks (a ``SetDataSchema`` before the first slice, or when columns
are added, followed by the ``AddData``/``ExecuteTransform``). The slice and checkpoint files are
stored first (checked against the sizes and hashes the event records), then both blocks are
appended with a single compare-and-swap of ``head``, so a crash or a concurrent writer leaves the
dataset at its old head or its new one.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from protocol.identity import Multihash
from protocol.model import AddData, ExecuteTransform, MetadataEvent, Timestamp
from storage.crashpoints import crash_point
from storage.dataset import CommitResult, Dataset
from storage.errors import SizeMismatchError, disk_full
from storage.stores.base import ObjectStore

RUN_DIR = "run"


@dataclass(frozen=True, slots=True)
class StagedFiles:
    data_file: Path | None = None
    checkpoint_file: Path | None = None


async def commit_transaction(
    dataset: Dataset,
    events: Sequence[MetadataEvent],
    files: StagedFiles,
    *,
    expected_head: Multihash | None,
    system_time: Timestamp,
) -> CommitResult:
    """Stores the files the last event references, then appends ``events`` with one head move."""
    last = events[-1]
    if isinstance(last, (AddData, ExecuteTransform)):
        if files.data_file is not None and last.new_data is not None:
            await _store(
                dataset.data,
                files.data_file,
                last.new_data.physical_hash,
                last.new_data.size,
                "data file",
            )
        if files.checkpoint_file is not None and last.new_checkpoint is not None:
            await _store(
                dataset.checkpoints,
                files.checkpoint_file,
                last.new_checkpoint.physical_hash,
                last.new_checkpoint.size,
                "checkpoint file",
            )
    crash_point("transaction.objects-stored")
    return await dataset.commit_events(
        list(events), expected_head=expected_head, system_time=system_time
    )


async def _store(store: ObjectStore, path: Path, hash: Multihash, size: int, what: str) -> None:
    actual = (await asyncio.to_thread(path.stat)).st_size
    if actual != size:
        raise SizeMismatchError(f"{what} {path}", size, actual)
    await store.put_file(path, expected=hash, move=True)


@asynccontextmanager
async def transaction_dir(workspace_root: Path) -> AsyncIterator[Path]:
    """A scratch folder on the workspace's file system (so committing a file is a rename),
    created and removed off the event loop (a slice's folder may hold large files); a full disk
    while the transaction writes becomes a ``DiskFullError`` once the folder is gone."""
    path = workspace_root / RUN_DIR / uuid.uuid4().hex
    await asyncio.to_thread(path.mkdir, parents=True)
    try:
        yield path
    except OSError as err:
        if (full := disk_full(err, f"a transaction in {workspace_root}")) is not None:
            raise full from None
        raise
    finally:
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, path, ignore_errors=True))
