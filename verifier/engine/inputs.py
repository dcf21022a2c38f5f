"""What an input dataset contributes to a transform transaction, read from its metadata chain.

An ``ExecuteTransformInput`` names a half-open block interval ``(prevBlockHash, newBlockHash]``
and offset interval ``(prevOffset, newOffset]`` (RFC-014). The records are in the data slices of
the blocks in that interval, and the watermarks those blocks declare are handed to the engine as
explicit watermarks. The coordinator uses this to plan a new transaction, the verifier to rebuild
a recorded one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from protocol.identity import Multihash
from protocol.model import (
    AddData,
    ExecuteTransform,
    ExecuteTransformInput,
    SetDataSchema,
    Watermark,
)
from storage.dataset import Dataset
from storage.dataset_storage import local_files
from storage.errors import ObjectNotFoundError, StorageError
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformInputSlice
from verifier.errors import VerifierError


class InputError(VerifierError):
    """An input dataset does not hold what a transaction says it used."""


@dataclass(frozen=True, slots=True)
class IntervalContents:
    slices: tuple[Multihash, ...]
    """Physical hashes of the data slices in the interval, oldest first."""
    watermarks: tuple[Watermark, ...]
    """Watermarks declared by blocks in the interval, oldest first."""


async def interval_contents(
    dataset: Dataset, new_block: Multihash | None, prev_block: Multihash | None
) -> IntervalContents:
    """Data slices and watermarks of the blocks in ``(prev_block, new_block]``."""
    if new_block is None:
        return IntervalContents((), ())
    slices: list[Multihash] = []
    watermarks: list[Watermark] = []
    async for _, block in dataset.chain.iter_blocks(new_block, stop_at=prev_block):
        event = block.event
        if isinstance(event, (AddData, ExecuteTransform)):
            if event.new_data is not None:
                slices.append(event.new_data.physical_hash)
            if event.new_watermark is not None:
                watermarks.append(
                    Watermark(system_time=block.system_time, event_time=event.new_watermark)
                )
    slices.reverse()
    watermarks.reverse()
    return IntervalContents(tuple(slices), tuple(watermarks))


async def all_slices(dataset: Dataset, head: Multihash | None = None) -> list[Multihash]:
    """Every data slice of the dataset up to ``head`` (default: the current head), oldest first."""
    return list((await interval_contents(dataset, head or await dataset.chain.head(), None)).slices)


async def slice_paths(
    dataset: Dataset, hashes: tuple[Multihash, ...] | list[Multihash]
) -> tuple[Path, ...]:
    """Local files of data slices (the engine reads them by path; a bucket's come through the
    workspace's cache)."""
    try:
        paths = tuple(await local_files(dataset.data, list(hashes)))
    except ObjectNotFoundError as err:
        raise InputError(
            f"{dataset}: data slice {err.hash} is missing; pull the dataset again"
        ) from None
    except StorageError as err:
        raise InputError(f"{dataset}: {err}") from None
    missing = [
        str(h) for h, p in zip(hashes, paths, strict=True) if not await asyncio.to_thread(p.is_file)
    ]
    if missing:
        raise InputError(
            f"{dataset}: data slice(s) {', '.join(missing)} are missing; pull the dataset again"
        )
    return paths


async def input_slice(
    dataset: Dataset, query_input: ExecuteTransformInput, alias: str
) -> TransformInputSlice:
    """The engine's view of one ``ExecuteTransformInput``."""
    at = query_input.new_block_hash or query_input.prev_block_hash
    state = await dataset.chain.state(at) if at is not None else None
    contents = await interval_contents(
        dataset, query_input.new_block_hash, query_input.prev_block_hash
    )
    interval = None
    if query_input.new_offset is not None:
        start = 0 if query_input.prev_offset is None else query_input.prev_offset + 1
        interval = (start, query_input.new_offset)
    return TransformInputSlice(
        dataset_id=query_input.dataset_id,
        alias=alias,
        vocab=Vocab.of(state.vocab if state else None),
        schema=arrow_schema_of(state.schema) if state and state.schema else None,
        data_paths=await slice_paths(dataset, contents.slices) if interval else (),
        offset_interval=interval,
        explicit_watermarks=contents.watermarks,
    )


def arrow_schema_of(event: SetDataSchema) -> pa.Schema:
    """The Arrow schema a ``SetDataSchema`` declares (its ODF schema, or the legacy raw one)."""
    from protocol import arrow_schema
    from protocol.codec.arrow_schema import raw_arrow_schema_to_pyarrow

    if event.schema is not None:
        return arrow_schema.schema_to_arrow(event.schema)
    if event.raw_arrow_schema is None:
        raise InputError("SetDataSchema carries neither schema nor rawArrowSchema")
    return raw_arrow_schema_to_pyarrow(event.raw_arrow_schema)
