#!/usr/bin/env python3
"""Block codec throughput: encode+hash and decode, in blocks/s, beside a raw SHA3-256 baseline.

The mix is what a chain mostly holds: AddData and ExecuteTransform blocks (with data slices,
checkpoints, watermarks, source state, query inputs), plus occasional schema/source/info events.
Prints ratios measured in this one run; the target is >= 20,000 blocks/s each way.
"""

from __future__ import annotations

import hashlib
import random
import time

from protocol.codec.flatbuffers import decode_block, encode_block
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    Checkpoint,
    DataField,
    DataSchema,
    DataSlice,
    DataTypeInt64,
    DataTypeString,
    DataTypeTimestamp,
    ExecuteTransform,
    ExecuteTransformInput,
    MetadataBlock,
    OffsetInterval,
    SetDataSchema,
    SetInfo,
    SourceState,
    Timestamp,
    TimeUnit,
)

N_BLOCKS = 2_000
ROUNDS = 5


def mix(count: int) -> list[MetadataBlock]:
    rng = random.Random(7)
    inputs = [DatasetId.new_seeded(f"input{i}".encode()) for i in range(3)]

    def mh() -> Multihash:
        return Multihash.from_digest_sha3_256(rng.randbytes(8))

    blocks = []
    prev = mh()
    offset = 0
    for seq in range(count):
        now = Timestamp(1_700_000_000_000_000_000 + seq * 1_000_000_007)
        roll = rng.random()
        rows = rng.randint(1, 100_000)
        new_data = DataSlice(
            logical_hash=mh(), physical_hash=mh(),
            offset_interval=OffsetInterval(start=offset, end=offset + rows - 1), size=rows * 40,
        )
        if roll < 0.55:
            event = AddData(
                prev_checkpoint=mh(), prev_offset=offset - 1 if offset else None, new_data=new_data,
                new_checkpoint=Checkpoint(physical_hash=mh(), size=4096), new_watermark=now,
                new_source_state=SourceState(source_name="default", kind="odf/etag", value=rng.randbytes(8).hex()),
            )
        elif roll < 0.95:
            event = ExecuteTransform(
                query_inputs=tuple(
                    ExecuteTransformInput(dataset_id=d, prev_block_hash=mh(), new_block_hash=mh(),
                                          prev_offset=offset, new_offset=offset + 10)
                    for d in inputs[: rng.randint(1, 3)]
                ),
                prev_checkpoint=mh(), prev_offset=offset - 1 if offset else None, new_data=new_data,
                new_checkpoint=Checkpoint(physical_hash=mh(), size=1024), new_watermark=now,
            )
        elif roll < 0.98:
            event = SetDataSchema(schema=DataSchema(fields=(
                DataField(name="offset", type=DataTypeInt64()),
                DataField(name="event_time", type=DataTypeTimestamp(unit=TimeUnit.MILLISECOND, timezone="UTC")),
                DataField(name="city", type=DataTypeString()),
            )))
        else:
            event = SetInfo(description="Population by city", keywords=("census", "cities"))
        offset += rows
        blocks.append(MetadataBlock(system_time=now, prev_block_hash=prev, sequence_number=seq, event=event))
        prev = mh()
    return blocks


def best_rate(work, count: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return count / best


def main() -> None:
    blocks = mix(N_BLOCKS)
    encoded = [encode_block(b) for b in blocks]
    assert [decode_block(d) for d in encoded] == blocks
    mean_size = sum(map(len, encoded)) / len(encoded)

    def encode_and_hash() -> None:
        for block in blocks:
            hashlib.sha3_256(encode_block(block)).digest()

    def decode() -> None:
        for data in encoded:
            decode_block(data)

    def sha3_only() -> None:
        for data in encoded:
            hashlib.sha3_256(data).digest()

    baseline = best_rate(sha3_only, N_BLOCKS)
    encode_rate = best_rate(encode_and_hash, N_BLOCKS)
    decode_rate = best_rate(decode, N_BLOCKS)
    print(f"blocks: {N_BLOCKS} (mean {mean_size:.0f} bytes), best of {ROUNDS} rounds")
    print(f"sha3-256 only    : {baseline:12,.0f} blocks/s")
    print(f"encode + hash    : {encode_rate:12,.0f} blocks/s  ({encode_rate / baseline:.3f} of sha3 baseline)")
    print(f"decode           : {decode_rate:12,.0f} blocks/s  ({decode_rate / baseline:.3f} of sha3 baseline)")
    target = 20_000
    print(f"target {target:,} blocks/s each way: encode {'met' if encode_rate >= target else 'NOT met'}, "
          f"decode {'met' if decode_rate >= target else 'NOT met'}")


if __name__ == "__main__":
    main()
