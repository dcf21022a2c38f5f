"""The codec's fast paths give exactly what the general machinery gives.

``Builder.table`` must lay tables out byte for byte as ``start_table``/``add_*``/``end_table`` do;
the precomputed manifest must equal the one the builder writes; the hash and dataset id readers
must agree with the identity parsers; the vtable cache must never let a buffer skip a check; and
``peek_prev_block_hash`` and ``peek_transfer_facts`` must agree with ``decode_block`` and fail only
with ``DecodeError``.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.codec import flatbuffers
from protocol.codec.fb_builder import OFFSET, TIMESTAMP, Builder, TableLayout, packer
from protocol.codec.fb_reader import Invalid, Reader
from protocol.codec.fb_values import (
    DATASET_ID_PREFIX,
    MULTIHASH_HEADERS,
    _dataset_id_at,
    _multihash_at,
)
from protocol.codec.flatbuffers import (
    TransferFacts,
    build_manifest,
    decode_block,
    encode_block,
    peek_prev_block_hash,
    peek_transfer_facts,
)
from protocol.errors import DecodeError, EncodeError
from protocol.identity import DatasetId, Multicodec, Multihash
from protocol.identity.multihash import DIGEST_SIZES
from protocol.model import AddData, ExecuteTransform, MetadataBlock, Timestamp
from tests.protocol.codec.odf_golden import stability_events, wrap
from tests.protocol.codec.odf_strategies import metadata_blocks

_SCALAR_RANGES = {
    "B": (0, 2**8 - 1),
    "h": (-(2**15), 2**15 - 1),
    "H": (0, 2**16 - 1),
    "i": (-(2**31), 2**31 - 1),
    "I": (0, 2**32 - 1),
    "q": (-(2**63), 2**63 - 1),
    "Q": (0, 2**64 - 1),
}
_KINDS = [OFFSET, TIMESTAMP, "?", *_SCALAR_RANGES]


def _value(kind: str) -> st.SearchStrategy:
    if kind == OFFSET:
        return st.integers(0, 3)  # index of an object written before the table
    if kind == TIMESTAMP:
        return st.integers(-(10**18), 10**18).map(Timestamp)
    if kind == "?":
        return st.booleans()
    low, high = _SCALAR_RANGES[kind]
    return st.integers(low, high)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[tuple[int, str]], list[bool], list[int | Timestamp]]:
    kinds = draw(st.lists(st.sampled_from(_KINDS), max_size=8))
    slots, slot = [], 0
    for _ in kinds:
        slot += draw(st.integers(0, 2))
        slots.append(slot)
        slot += 1
    present = [draw(st.booleans()) for _ in kinds]
    values = [draw(_value(kind)) for kind in kinds]
    return list(zip(slots, kinds, strict=True)), present, values


def _objects(builder: Builder, prefix: bytes) -> list[int]:
    builder.byte_vector(prefix)
    return [builder.string(text) for text in ("a", "bb", "ccc", "dddd")]


@settings(max_examples=400, deadline=None)
@given(table=tables(), prefix=st.binary(max_size=11), copies=st.integers(1, 3))
def test_table_writes_what_the_field_methods_write(
    table: tuple[list[tuple[int, str]], list[bool], list[int | Timestamp]],
    prefix: bytes,
    copies: int,
) -> None:
    fields, present, values = table
    by_hand, fast = Builder(), Builder()
    hand_objects, fast_objects = _objects(by_hand, prefix), _objects(fast, prefix)
    layout = TableLayout("Test", tuple(fields))
    mask = sum(1 << i for i, p in enumerate(present) if p)
    for _ in range(copies):  # later copies reuse the first one's vtable
        by_hand.start_table()
        for (slot, kind), is_present, value in zip(fields, present, values, strict=True):
            if not is_present:
                continue
            if kind == OFFSET:
                assert isinstance(value, int)
                by_hand.add_offset(slot, hand_objects[value])
            elif kind == TIMESTAMP:
                assert isinstance(value, Timestamp)
                by_hand.add_timestamp(slot, value)
            else:
                by_hand.add_scalar(slot, packer(kind), struct.calcsize("<" + kind), value)
        hand_root = by_hand.end_table()
        groups: list[tuple[object, ...]] = []  # per field, in field order
        for (_, kind), value in zip(fields, values, strict=True):
            if kind == OFFSET:
                assert isinstance(value, int)
                groups.append((fast_objects[value],))
            elif kind == TIMESTAMP:
                assert isinstance(value, Timestamp)
                groups.append(value.to_fb_parts())
            else:
                groups.append((value,))
        args = tuple(part for group in reversed(groups) for part in group)  # last field first
        fast_root = fast.table(layout, mask, args)
        assert fast_root == hand_root
    assert fast.finish(fast_root) == by_hand.finish(hand_root)


def test_table_rejects_a_value_its_type_cannot_hold() -> None:
    with pytest.raises(EncodeError, match="Narrow"):
        Builder().table(TableLayout("Narrow", ((0, "B"),)), 1, (256,))


@pytest.mark.parametrize("length", range(40))
def test_precomputed_manifest_equals_the_built_one(length: int) -> None:
    content = bytes(range(length))
    head = flatbuffers._MANIFEST_HEADS[length & 7]
    assert head + struct.pack("<I", length) + content + bytes(-length & 3) == build_manifest(
        content
    )


def _vector_buffer(payload: bytes) -> tuple[Reader, int]:
    """A buffer whose root uoffset (at 0) references a ``[ubyte]`` vector of ``payload``."""
    builder = Builder()
    vector = builder.byte_vector(payload)
    data = builder.finish(vector)
    return Reader(data), 0


@pytest.mark.parametrize("code", list(DIGEST_SIZES), ids=str)
def test_hash_fast_path_equals_the_multihash_parser(code: Multicodec) -> None:
    expected = Multihash(code, bytes(range(DIGEST_SIZES[code])))
    reader, pos = _vector_buffer(expected.to_bytes())
    value = _multihash_at(reader, pos)
    assert value == expected and type(value) is Multihash and value.code is code
    assert hash(value) == hash(expected)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        MULTIHASH_HEADERS[Multicodec.SHA3_256] + bytes(31),
        MULTIHASH_HEADERS[Multicodec.SHA3_256] + bytes(33),
        b"\x13\x20" + bytes(32),
        MULTIHASH_HEADERS[Multicodec.ARROW0_SHA3_256][:-1] + b"\x21" + bytes(33),
    ],
)
def test_hash_fast_path_rejects_what_the_parser_rejects(payload: bytes) -> None:
    with pytest.raises(DecodeError) as parser_error:
        Multihash.from_bytes(payload)
    reader, pos = _vector_buffer(payload)
    with pytest.raises(Invalid) as fast_error:
        _multihash_at(reader, pos)
    assert fast_error.value.reason == str(parser_error.value)


def test_dataset_id_fast_path_equals_the_parser() -> None:
    expected = DatasetId.new_seeded(b"fast")
    reader, pos = _vector_buffer(expected.to_bytes())
    value = _dataset_id_at(reader, pos)
    assert value == expected and type(value) is DatasetId and hash(value) == hash(expected)
    for payload in (DATASET_ID_PREFIX + bytes(31), b"\xed\x02" + bytes(32), b""):
        reader, pos = _vector_buffer(payload)
        with pytest.raises(Invalid):
            _dataset_id_at(reader, pos)


def _one_table(vtable: tuple[int, ...], inline: bytes) -> bytes:
    """Bytes ``[root uoffset][vtable][soffset][inline]`` with the vtable right before the table."""
    vtable_bytes = struct.pack(f"<{len(vtable)}H", *vtable)
    table = 4 + len(vtable_bytes)
    return struct.pack("<I", table) + vtable_bytes + struct.pack("<i", len(vtable_bytes)) + inline


def test_cached_vtable_does_not_excuse_a_table_past_the_end() -> None:
    good = _one_table((8, 12, 4, 8), bytes(8))
    reader = Reader(good)
    assert reader.table_fields(0, 2)[1] == (4, 8)
    assert Reader(good).table_fields(0, 2)[1] == (4, 8)  # now from the cache
    with pytest.raises(Invalid, match="extends past the end"):
        Reader(good[:-1]).table_fields(0, 2)


def test_vtable_longer_than_the_fields_read_is_checked_every_time() -> None:
    # [root uoffset][soffset -> vtable after the table][4 inline bytes][vtable of six fields]
    valid = struct.pack("<Ii4x8H", 4, -8, 16, 8, 4, 4, 4, 4, 4, 4)
    assert Reader(valid).table_fields(0, 2)[1] == (4, 4)
    assert Reader(valid).table_fields(0, 2)[1] == (4, 4)
    # The same first eight vtable bytes, the rest cut off: reading two fields must still fail.
    with pytest.raises(Invalid, match="malformed vtable"):
        Reader(valid[:20]).table_fields(0, 2)


VALID = [encode_block(wrap(event)) for event, _ in stability_events()]


@pytest.mark.parametrize("index", range(len(VALID)))
def test_peek_agrees_with_decode(index: int) -> None:
    block = decode_block(VALID[index])
    assert peek_prev_block_hash(VALID[index]) == block.prev_block_hash
    first = MetadataBlock(
        system_time=block.system_time, prev_block_hash=None, sequence_number=0, event=block.event
    )
    assert peek_prev_block_hash(encode_block(first)) is None


def _facts_of(block: MetadataBlock) -> TransferFacts:
    """``TransferFacts`` from the decoded block, the way a transfer plan counted them before."""
    objects = object_bytes = records = 0
    event = block.event
    if isinstance(event, (AddData, ExecuteTransform)):
        if event.new_data is not None:
            objects += 1
            object_bytes += event.new_data.size
            interval = event.new_data.offset_interval
            records += interval.end - interval.start + 1
        if event.new_checkpoint is not None:
            objects += 1
            object_bytes += event.new_checkpoint.size
    return TransferFacts(
        block.prev_block_hash, block.sequence_number, objects, object_bytes, records
    )


@pytest.mark.parametrize("index", range(len(VALID)))
def test_transfer_facts_agree_with_decode(index: int) -> None:
    assert peek_transfer_facts(VALID[index]) == _facts_of(decode_block(VALID[index]))


def test_the_golden_events_carry_objects_for_the_facts_to_count() -> None:
    facts = [peek_transfer_facts(data) for data in VALID]
    assert any(f.objects and f.records and f.object_bytes for f in facts)


@settings(max_examples=300, deadline=None)
@given(metadata_blocks)
def test_transfer_facts_agree_with_decode_on_any_block(block: MetadataBlock) -> None:
    data = encode_block(block)
    assert peek_transfer_facts(data) == _facts_of(decode_block(data))


@pytest.mark.parametrize("index", range(len(VALID)))
def test_peek_rejects_every_truncation_with_decode_error(index: int) -> None:
    data = VALID[index]
    for length in range(len(data)):
        for peek in (peek_prev_block_hash, peek_transfer_facts):
            try:
                peek(data[:length])
            except DecodeError:
                pass


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=4),
)
def test_peek_survives_bit_flips(data: bytes, flips: list[tuple[int, int]]) -> None:
    mutated = bytearray(data)
    for position, bit in flips:
        mutated[position % len(mutated)] ^= 1 << bit
    for peek in (peek_prev_block_hash, peek_transfer_facts):
        try:
            peek(bytes(mutated))
        except DecodeError:
            pass
