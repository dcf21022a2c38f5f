"""Append and then fully validate a long metadata chain; print rates, ratios and memory.

Usage: python scripts/bench_chain.py [--blocks 100000] [--batch 1000] [--rounds 3] [--dir DIR]

The chain is a root dataset whose blocks are ``AddData`` events with a data slice, a checkpoint
and an advancing watermark (the heaviest common block), appended durably (every block file
fsynced) in batches with one head move each, exactly as ``Dataset.commit_events`` does. Then a
fresh process-level view validates it from scratch (``validate_chain``: re-hash every block,
decode it, apply every rule), and validation of growing prefixes is repeated under
``tracemalloc`` to show that peak memory does not grow with the chain.

The target is >= 10,000 blocks/s. The machine is shared and its speed swings with load, so the
script also reports the cost of validating a block in units of the pure-Python yardstick of
``bench_block.py``, timed right before and after each validation (median over rounds), which
barely moves with load: the target can be checked against the yardstick rate of any run. Each
round also reads every block file once through the block store and hashes it, the I/O baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench_block import yardstick

from protocol.identity import DatasetId, Multicodec, Multihash
from protocol.model import (
    AddData,
    Checkpoint,
    DataField,
    DataSchema,
    DatasetKind,
    DataSlice,
    DataTypeInt64,
    DataTypeString,
    DataTypeTimestamp,
    OffsetInterval,
    Seed,
    SetDataSchema,
    Timestamp,
)
from storage.chain import MetadataChain, reader, validate_chain
from storage.stores.localfs import LocalFsObjectStore, LocalFsRefStore

TARGET_VALIDATION_RATE = 10_000
_EPOCH_2020 = Timestamp.of(2020, 1, 1).epoch_nanos


def _hash(n: int, code: Multicodec = Multicodec.SHA3_256) -> Multihash:
    """A distinct, stable stand-in hash for object ``n`` (the chain rules never open objects
    here: the bench chain has no data store attached)."""
    return Multihash(
        code=code, digest=Multihash.from_digest_sha3_256(n.to_bytes(8, "big", signed=True)).digest
    )


def _events(count: int, first_offset: int):
    """``count`` consecutive AddData events continuing from ``first_offset``."""
    events = []
    for i in range(count):
        n = first_offset // 100 + i
        start = first_offset + i * 100
        events.append(
            AddData(
                prev_offset=None if start == 0 else start - 1,
                prev_checkpoint=None if n == 0 else _hash(-n),
                new_data=DataSlice(
                    logical_hash=_hash(n, Multicodec.ARROW0_SHA3_256),
                    physical_hash=_hash(n),
                    offset_interval=OffsetInterval(start=start, end=start + 99),
                    size=4096 + n,
                ),
                new_checkpoint=Checkpoint(physical_hash=_hash(-n - 1), size=512),
                new_watermark=Timestamp(_EPOCH_2020 + n * 10**9),
            )
        )
    return events


def _chain(root: Path) -> MetadataChain:
    return MetadataChain(LocalFsObjectStore(root / "blocks"), LocalFsRefStore(root / "refs"))


async def append(root: Path, blocks: int, batch: int) -> tuple[float, list[Multihash]]:
    """Append ``blocks`` blocks; returns the seconds taken and the head after each batch."""
    chain = _chain(root)
    _, dataset_id = DatasetId.new_generated()
    schema = SetDataSchema(
        schema=DataSchema(
            fields=(
                DataField(name="offset", type=DataTypeInt64()),
                DataField(name="system_time", type=DataTypeTimestamp()),
                DataField(name="event_time", type=DataTypeTimestamp()),
                DataField(name="value", type=DataTypeString()),
            )
        )
    )
    started = time.perf_counter()
    head, _ = await chain.append_events(
        [Seed(dataset_id=dataset_id, dataset_kind=DatasetKind.ROOT), schema],
        expected_head=None,
        system_time=Timestamp.now(),
    )
    heads = []
    written = 2
    while written < blocks:
        count = min(batch, blocks - written)
        head, _ = await chain.append_events(
            _events(count, (written - 2) * 100), expected_head=head, system_time=Timestamp.now()
        )
        written += count
        heads.append(head)
    return time.perf_counter() - started, heads


async def validate(root: Path, head: Multihash | None = None) -> tuple[float, int]:
    started = time.perf_counter()
    state = await validate_chain(_chain(root), head)
    return time.perf_counter() - started, state.sequence_number + 1


async def read_and_hash(root: Path, hashes: list[Multihash]) -> float:
    """Seconds to read every block file once through the block store and SHA3-256 it."""
    blocks = _chain(root).blocks
    started = time.perf_counter()
    for block in hashes:
        hashlib.sha3_256(await blocks.get_bytes(block)).digest()
    return time.perf_counter() - started


def yardstick_rate(count: int) -> float:
    started = time.perf_counter()
    yardstick(count)
    return count / (time.perf_counter() - started)


async def validation_rounds(root: Path, rounds: int) -> tuple[int, dict[str, list[float]]]:
    """Blocks, and per round: validation seconds, its cost in yardsticks per block (yardstick
    timed right before and right after it), the read-and-hash baseline's share of it and the
    yardstick rate."""
    hashes = [h async for h in _chain(root).blocks.iter_hashes()]
    sticks = min(len(hashes), 50_000)
    measured: dict[str, list[float]] = {"seconds": [], "cost": [], "io share": [], "yardstick": []}
    before = yardstick_rate(sticks)
    for _ in range(rounds):
        io = await read_and_hash(root, hashes)
        validate_s, count = await validate(root)
        after = yardstick_rate(sticks)
        measured["seconds"].append(validate_s)
        measured["cost"].append(validate_s * (before + after) / 2 / count)
        measured["io share"].append(io / validate_s)
        measured["yardstick"].append(after)
        before = after
    return count, measured


async def decode_share(root: Path) -> tuple[float, float]:
    """One more validation with ``decode_block`` timed: (seconds in decode, total seconds)."""
    spent = 0.0
    names = vars(reader)  # the chain reader's own binding of decode_block, swapped for a timer
    original = names["decode_block"]

    def timed(data: bytes):
        nonlocal spent
        started = time.perf_counter()
        try:
            return original(data)
        finally:
            spent += time.perf_counter() - started

    names["decode_block"] = timed
    try:
        total, _ = await validate(root)
    finally:
        names["decode_block"] = original
    return spent, total


async def peak_memory(root: Path, head: Multihash) -> tuple[int, int]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    _, count = await validate(root, head)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return count, peak


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument(
        "--rounds", type=int, default=3, help="validations, each with its baselines"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to build the chain (default: a temp dir)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-chain-", dir=args.dir))
    try:
        append_s, heads = await append(root, args.blocks, args.batch)
        print(
            f"append:   {args.blocks} blocks in {append_s:.1f} s = {args.blocks / append_s:,.0f} blocks/s "
            f"(durable, batches of {args.batch})"
        )
        count, measured = await validation_rounds(root, args.rounds)
        best = min(measured["seconds"])
        rate = count / best
        cost = statistics.median(measured["cost"])
        print(
            f"validate: {count} blocks in {best:.1f} s = {rate:,.0f} blocks/s (best of {args.rounds}); "
            f"target {TARGET_VALIDATION_RATE:,} blocks/s -> {rate / TARGET_VALIDATION_RATE:.2f}x the target"
        )
        print(
            f"          cost {cost:.2f} yardsticks per block (median of rounds): the target needs the "
            f"yardstick at >= {cost * TARGET_VALIDATION_RATE:,.0f}/s, this run ran it at up to "
            f"{max(measured['yardstick']):,.0f}/s; reading and hashing every block once takes "
            f"{statistics.median(measured['io share']):.0%} of a validation"
        )
        decode_s, total_s = await decode_share(root)
        print(
            f"          protocol.codec decode_block: {decode_s / count * 1e6:.0f} us/block, "
            f"{decode_s / total_s:.0%} of a validation; storage's own share runs at "
            f"{count / (total_s - decode_s):,.0f} blocks/s"
        )
        picks = sorted(
            {heads[max(0, len(heads) * k // 10 - 1)] for k in (1, 5, 10)}, key=heads.index
        )
        peaks = [await peak_memory(root, h) for h in picks]
        for blocks, peak in peaks:
            print(
                f"memory:   validating {blocks:>7} blocks peaks at {peak / 2**20:6.2f} MiB (tracemalloc)"
            )
        (first_n, first_peak), (last_n, last_peak) = peaks[0], peaks[-1]
        print(
            f"memory:   {last_n / first_n:.1f}x the blocks -> {last_peak / first_peak:.2f}x the peak"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
