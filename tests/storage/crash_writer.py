"""A writer process for the crash test: grows one dataset forever until it is killed.

Each round commits a run of ``BATCH`` blocks with one head move, then a 256 KiB data slice with
its ``AddData`` block. Run as ``python -m tests.storage.crash_writer DATASET_DIR``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from protocol.identity import DatasetId
from protocol.model import AddData, DatasetKind, DataSlice, OffsetInterval, Seed, SetInfo
from storage.dataset import Dataset
from storage.stores.localfs import hash_file
from tests.storage.chain_builder import fake_hash, schema

BATCH = 20
"""Blocks per ``append_many``; heads after a crash must sit on a round boundary."""


async def main(root: Path) -> None:
    dataset = Dataset.open_local(root)
    if await dataset.chain.head() is None:
        _, dataset_id = DatasetId.new_generated()
        dataset.layout.create()
        await dataset.commit_events(
            [Seed(dataset_id=dataset_id, dataset_kind=DatasetKind.ROOT), schema("a")],
            expected_head=None,
        )
    print("ready", flush=True)
    round_number = 0
    while True:
        state = await dataset.chain.state()
        head = state.head
        result = await dataset.commit_events(
            [SetInfo(description=f"round {round_number} item {i}") for i in range(BATCH)],
            expected_head=head,
        )
        slice_file = root.parent / f"slice-{os.getpid()}-{round_number}.bin"
        slice_file.write_bytes(os.urandom(256 * 1024))
        physical, size = hash_file(slice_file)
        start = 0 if state.last_offset is None else state.last_offset + 1
        event = AddData(
            prev_offset=state.last_offset,
            new_data=DataSlice(
                logical_hash=fake_hash(f"l{physical}"),
                physical_hash=physical,
                offset_interval=OffsetInterval(start=start, end=start + 9),
                size=size,
            ),
        )
        await dataset.commit_data(event, data_file=slice_file, expected_head=result.new_head)
        round_number += 1


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
