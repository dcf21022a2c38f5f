"""The reference's FlatBuffers golden vectors (test_serde_flatbuffers.rs): hashes and round trips."""

from __future__ import annotations

import hashlib

import pytest

from protocol.codec.fb_builder import Builder, packer
from protocol.codec.fb_reader import Reader
from protocol.codec.flatbuffers import block_hash, decode_block, encode_block
from protocol.errors import DecodeError
from protocol.model import MetadataEvent, SetDataSchema
from tests.protocol.codec.odf_golden import (
    LEGACY_SET_DATA_SCHEMA,
    SET_DATA_SCHEMA_HASH,
    SET_DATA_SCHEMA_LEGACY_HASH,
    extended_schema,
    stability_events,
    wrap,
)

CASES = [
    *stability_events(),
    (SetDataSchema(schema=extended_schema()), SET_DATA_SCHEMA_HASH),
    (LEGACY_SET_DATA_SCHEMA, SET_DATA_SCHEMA_LEGACY_HASH),
]


@pytest.mark.parametrize(
    ("event", "expected"), CASES, ids=[f"{type(e).__name__}-{h[:8]}" for e, h in CASES]
)
def test_block_hash_matches_reference(event: MetadataEvent, expected: str) -> None:
    data = encode_block(wrap(event))
    assert hashlib.sha3_256(data).hexdigest() == expected
    assert block_hash(data).digest.hex() == expected


@pytest.mark.parametrize(
    ("event", "expected"), CASES, ids=[f"{type(e).__name__}-{h[:8]}" for e, h in CASES]
)
def test_block_round_trips(event: MetadataEvent, expected: str) -> None:
    block = wrap(event)
    decoded = decode_block(encode_block(block))
    assert decoded == block
    assert encode_block(decoded) == encode_block(block)


def test_extended_schema_survives_round_trip() -> None:
    decoded = decode_block(encode_block(wrap(SetDataSchema(schema=extended_schema()))))
    assert isinstance(decoded.event, SetDataSchema)
    assert decoded.event.schema == extended_schema()
    extra = decoded.event.schema.fields[0].extra
    assert extra is not None
    assert extra["arrow.apache.org/bufferEncoding"] == {
        "kind": "View",
        "offsetBitWidth": 32,
    }


def manifest(kind: int, version: int, content: bytes) -> bytes:
    builder = Builder()
    offset = builder.byte_vector(content)
    builder.start_table()
    builder.add_scalar_default(0, packer("q"), 8, kind)
    builder.add_scalar_default(1, packer("i"), 4, version)
    builder.add_offset(2, offset)
    return builder.finish(builder.end_table())


def block_content(data: bytes) -> bytes:
    """The inner block table bytes of a manifest-wrapped block."""
    reader = Reader(data)
    table = reader.table(0)
    return reader.bytes(table + reader.fields(table, 3)[2])


def test_manifest_rebuilt_from_its_parts_is_identical() -> None:
    data = encode_block(wrap(stability_events()[3][0]))
    assert manifest(0x400000, 3, block_content(data)) == data


@pytest.mark.parametrize(
    ("kind", "version", "message"),
    [
        (0x400000, 2, "version 2 is not supported"),
        (0x400000, 1, "version 1 is not supported"),
        (0x16, 3, "not a metadata block"),
    ],
)
def test_manifest_header_is_checked(kind: int, version: int, message: str) -> None:
    content = block_content(encode_block(wrap(stability_events()[0][0])))
    with pytest.raises(DecodeError, match=message):
        decode_block(manifest(kind, version, content))
