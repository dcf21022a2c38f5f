"""Untrusted bytes never crash or hang the block decoder: only ``DecodeError`` comes out."""

from __future__ import annotations

import random
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codec.flatbuffers import decode_block, encode_block
from protocol.errors import DecodeError
from tests.protocol.codec.odf_golden import stability_events, wrap

VALID = [encode_block(wrap(event)) for event, _ in stability_events()]
TIME_LIMIT = 0.5
"""CPU seconds one input may take; far above the microseconds a real block needs. CPU time of
this thread, not wall time, so a loaded machine does not make a fast decode look like a hang."""


def decode_or_reject(data: bytes) -> None:
    start = time.thread_time()
    try:
        decode_block(data)
    except DecodeError:
        pass
    assert time.thread_time() - start < TIME_LIMIT


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    decode_or_reject(data)


@pytest.mark.parametrize("index", range(len(VALID)))
def test_every_truncation(index: int) -> None:
    data = VALID[index]
    for length in range(len(data)):
        decode_or_reject(data[:length])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
)
def test_bit_flips(data: bytes, flips: list[tuple[int, int]]) -> None:
    mutated = bytearray(data)
    for position, bit in flips:
        mutated[position % len(mutated)] ^= 1 << bit
    decode_or_reject(bytes(mutated))


def test_hostile_lengths_and_offsets() -> None:
    rng = random.Random(1)
    for data in VALID:
        for position in range(0, len(data) - 3):
            for value in (0xFFFFFFFF, 0x7FFFFFFF, len(data), len(data) - position, 0x80000000, 4):
                mutated = bytearray(data)
                mutated[position : position + 4] = struct.pack("<I", value)
                decode_or_reject(bytes(mutated))
        for _ in range(50):
            mutated = bytearray(data)
            position = rng.randrange(len(data) - 1)
            mutated[position : position + 2] = struct.pack(
                "<H", rng.choice((0, 1, 3, 0xFFFF, 0x8000))
            )
            decode_or_reject(bytes(mutated))


def test_shared_subtrees_do_not_explode() -> None:
    """Offsets may point many times at one table: 25 nested struct types of 8 identical fields each
    would be 8**25 fields if followed naively; the decoder's work budget rejects it quickly."""
    from protocol.codec.fb_builder import Builder, packer
    from protocol.codec.flatbuffers import METADATA_BLOCK_VERSION
    from protocol.model import Timestamp

    struct_tag, set_data_schema_tag = (
        21,
        10,
    )  # positions (from 1) in the fbs unions DataType, MetadataEvent
    b = Builder()
    name = b.string("x")
    b.start_table()  # DataTypeInt32
    int32 = b.end_table()
    b.start_table()  # DataField {name, type: Int32}
    b.add_offset(0, name)
    b.add_union(2, (11, int32))
    field = b.end_table()
    for _ in range(25):
        fields = b.offset_vector([field] * 8)
        b.start_table()  # DataTypeStruct {fields}
        b.add_offset(0, fields)
        struct_type = b.end_table()
        b.start_table()  # DataField {name, type: Struct}
        b.add_offset(0, name)
        b.add_union(2, (struct_tag, struct_type))
        field = b.end_table()
    fields = b.offset_vector([field])
    b.start_table()  # DataSchema
    b.add_offset(0, fields)
    schema = b.end_table()
    b.start_table()  # SetDataSchema {schema (slot 1)}
    b.add_offset(1, schema)
    event = b.end_table()
    b.start_table()  # MetadataBlock
    b.add_timestamp(0, Timestamp(0))
    b.add_scalar_default(2, packer("Q"), 8, 1)
    b.add_union(4, (set_data_schema_tag, event))
    content = b.finish(b.end_table())
    outer = Builder()
    vector = outer.byte_vector(content)
    outer.start_table()
    outer.add_scalar_default(0, packer("q"), 8, 0x400000)
    outer.add_scalar_default(1, packer("i"), 4, METADATA_BLOCK_VERSION)
    outer.add_offset(2, vector)
    data = outer.finish(outer.end_table())
    with pytest.raises(DecodeError, match="more objects than it can hold"):
        decode_block(data)
    decode_or_reject(data)
