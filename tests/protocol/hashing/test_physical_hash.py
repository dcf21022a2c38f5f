"""Physical hashes: SHA3-256 multihashes of exact bytes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from protocol.hashing import DataFileError, physical_hash_bytes, physical_hash_file
from protocol.identity import Multicodec

# SHA3-256 of the empty string (FIPS 202 example value).
EMPTY_SHA3_256 = "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a"


def test_empty_bytes() -> None:
    result = physical_hash_bytes(b"")
    assert result.code == Multicodec.SHA3_256
    assert str(result) == "f1620" + EMPTY_SHA3_256


def test_file_streamed_in_chunks_equals_hash_of_its_bytes(tmp_path) -> None:
    data = np.random.default_rng(7).integers(0, 256, 3 * (1 << 20) + 123, dtype=np.uint8).tobytes()
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert physical_hash_file(path).digest == hashlib.sha3_256(data).digest()
    assert physical_hash_file(path) == physical_hash_bytes(data)


def test_empty_file(tmp_path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert physical_hash_file(path).digest.hex() == EMPTY_SHA3_256


def test_missing_file_names_it(tmp_path) -> None:
    with pytest.raises(DataFileError, match="nope.bin"):
        physical_hash_file(tmp_path / "nope.bin")
