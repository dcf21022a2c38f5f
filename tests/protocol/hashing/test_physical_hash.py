"""Physical hashes: SHA3-256 multihashes of exact bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from protocol.hashing import DataFileError, physical_hash_bytes, physical_hash_file
from protocol.hashing.physical import read_whole
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


@pytest.mark.parametrize("limit", [1 << 30, 100], ids=["in-memory", "streamed"])
def test_a_whole_read_hashes_as_the_file_does(tmp_path, limit: int) -> None:
    data = np.random.default_rng(3).integers(0, 256, (1 << 20) + 5, dtype=np.uint8).tobytes()
    path = tmp_path / "blob"
    path.write_bytes(data)
    with ThreadPoolExecutor(1) as pool:  # one thread: the hash's task waits for the read's
        reading = read_whole(path, pool, limit)
        assert reading.physical.result() == physical_hash_bytes(data)
        content = reading.data.result()
        assert (None if content is None else bytes(content)) == (
            data if limit > len(data) else None
        )


def test_a_whole_read_of_a_pipe_reads_what_comes_through_it(tmp_path) -> None:
    """A pipe has no size to map: its bytes are read as they come (``odfd data hash /dev/stdin``)."""
    data = b"some bytes" * 1000
    path = tmp_path / "pipe"
    os.mkfifo(path)
    with ThreadPoolExecutor(2) as pool:
        writing = pool.submit(path.write_bytes, data)
        with ThreadPoolExecutor(1) as reader:
            reading = read_whole(path, reader)
            content = reading.data.result()
            assert content is not None and bytes(content) == data
            assert reading.physical.result() == physical_hash_bytes(data)
        writing.result()


def test_a_whole_read_of_a_missing_file_names_it(tmp_path) -> None:
    with ThreadPoolExecutor(2) as pool:
        reading = read_whole(tmp_path / "nope.bin", pool)
        for future in (reading.data, reading.physical):
            with pytest.raises(DataFileError, match="nope.bin"):
                future.result()


def test_the_physical_hash_loads_no_arrow_nor_numpy() -> None:
    """``odfd data hash`` starts reading and hashing a file before Arrow and NumPy load (a third
    of a second of CPU): that overlap needs the physical hash to import neither."""
    code = (
        "import sys, protocol.hashing.physical, protocol.hashing.lanes; "
        "print(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
