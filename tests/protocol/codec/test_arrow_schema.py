"""Legacy raw Arrow schema bytes (as arrow-rs wrote them in old blocks) read as pyarrow schemas."""

from __future__ import annotations

import pyarrow as pa
import pytest

from protocol.codec.arrow_schema import raw_arrow_schema_to_pyarrow
from protocol.errors import DecodeError
from tests.protocol.codec.odf_golden import LEGACY_ARROW_SCHEMA


def test_reference_bytes_read_as_the_reference_schema() -> None:
    expected = pa.schema(
        [pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.bool_(), nullable=False)]
    )
    assert raw_arrow_schema_to_pyarrow(LEGACY_ARROW_SCHEMA) == expected


@pytest.mark.parametrize("data", [b"", b"\x00" * 4, b"\xff" * 64, LEGACY_ARROW_SCHEMA[:40]])
def test_garbage_is_rejected(data: bytes) -> None:
    with pytest.raises(DecodeError):
        raw_arrow_schema_to_pyarrow(data)
