"""Legacy ``SetDataSchema.rawArrowSchema`` bytes to a ``pyarrow.Schema``.

Old blocks store the schema as arrow-rs's ``fb_serialize`` writes it: a finished FlatBuffer whose
root is a bare Arrow ``Schema`` table, not an IPC message. pyarrow only reads schemas from IPC
messages, so the bytes are embedded as the header of a ``Message`` table (MetadataVersion V5,
header type Schema, empty body) inside the IPC encapsulation (continuation marker and length).
"""

from __future__ import annotations

import struct

import pyarrow as pa

from protocol.codec.fb_builder import Builder, packer
from protocol.errors import DecodeError

_METADATA_VERSION_V5 = 4
_HEADER_SCHEMA = 1
_CONTINUATION = b"\xff\xff\xff\xff"


def raw_arrow_schema_to_pyarrow(data: bytes) -> pa.Schema:
    """Read the legacy raw schema bytes; ``DecodeError`` if they are not a valid Arrow schema."""
    root = int.from_bytes(data[:4], "little")
    if len(data) < 8 or root + 4 > len(data):
        raise DecodeError(f"raw Arrow schema of {len(data)} bytes has no root table inside it")
    builder = Builder()
    schema = builder.embedded_buffer(bytes(data))
    builder.start_table()
    builder.add_scalar(0, packer("h"), 2, _METADATA_VERSION_V5)
    builder.add_union(2, (_HEADER_SCHEMA, schema))
    message = builder.finish(builder.end_table())
    message += bytes(-len(message) % 8)
    framed = _CONTINUATION + struct.pack("<i", len(message)) + message
    try:
        return pa.ipc.read_schema(pa.py_buffer(framed))
    except (pa.ArrowException, ValueError, OSError) as error:
        raise DecodeError(f"raw Arrow schema is malformed: {error}") from None
