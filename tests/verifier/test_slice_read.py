"""One read per slice: the physical hash and the content checks agree with the streamed checks,
and batch-dependent logical hashes are still computed in the reference's batches."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.hashing import logical_hash, logical_hash_parquet, physical_hash_file
from protocol.model import DataSlice, OffsetInterval
from tests.verifier.builders import flip_byte, slice_table
from verifier import file_checks
from verifier.engine.columns import Vocab
from verifier.file_checks import FileCheck, SliceExpectation, check_slice

REPO = Path(__file__).resolve().parents[2]
ROWS = 25_000  # more than two of the reference's 10,000-row batches


def nested_slice(path: Path) -> DataSlice:
    """A slice whose struct column has nulls at two levels: its hash depends on batch cuts."""
    table = slice_table(0, list(range(ROWS)))
    rng = np.random.default_rng(3)
    inner = pa.array(rng.integers(0, 100, ROWS), mask=rng.random(ROWS) < 0.3)
    child = pa.StructArray.from_arrays([inner], ["x"], mask=pa.array(rng.random(ROWS) < 0.3))
    # Parent nulls in the first 10,000 rows only: the later batches of the reference see none,
    # which changes how the child's nulls apply to its leaf (records_digest's combining rule).
    parent_null = (rng.random(ROWS) < 0.3) & (np.arange(ROWS) < 10_000)
    parent = pa.StructArray.from_arrays([child], ["child"], mask=pa.array(parent_null))
    table = table.append_column("nested", parent)
    pq.write_table(table, path)
    # What the reference records: the file read back in its batches (here, unlike one batch).
    one_batch = pq.read_table(path).combine_chunks().to_batches()
    assert len(one_batch) == 1 and logical_hash_parquet(path) != logical_hash(one_batch[0])
    return DataSlice(
        logical_hash=logical_hash_parquet(path),
        physical_hash=physical_hash_file(path),
        offset_interval=OffsetInterval(start=0, end=ROWS - 1),
        size=path.stat().st_size,
    )


def run(path: Path, recorded: DataSlice) -> FileCheck:
    expectation = SliceExpectation(recorded, Vocab(), None)
    with ThreadPoolExecutor(2) as hashing:
        return check_slice(
            path, recorded.physical_hash, recorded.size, expectation, lambda n: None, hashing
        )


def read_as(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``inline``: read once, hashed on the reading thread; ``threads``: read once, hashed on
    the hashing threads; ``streamed``: read twice at once."""
    if mode != "inline":
        monkeypatch.setattr(file_checks, "INLINE_BYTES", 0)
    if mode == "streamed":
        monkeypatch.setattr(file_checks, "IN_MEMORY_BYTES", 0)


@pytest.mark.parametrize("mode", ["inline", "threads", "streamed"])
def test_a_batch_dependent_slice_verifies_read_once_or_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    recorded = nested_slice(tmp_path / "s.parquet")
    read_as(mode, monkeypatch)
    result = run(tmp_path / "s.parquet", recorded)
    assert result.problems == () and result.records == ROWS


@pytest.mark.parametrize("mode", ["inline", "threads", "streamed"])
def test_a_flipped_byte_and_a_wrong_size_are_reported_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    read_as(mode, monkeypatch)
    path = tmp_path / "s.parquet"
    recorded = nested_slice(path)
    flip_byte(path, 4)  # inside the first page header or data: the bytes change, the size not
    rules = {p.rule for p in run(path, recorded).problems}
    assert "physical-hash" in rules
    path.write_bytes(path.read_bytes()[:-1])
    rules = {p.rule for p in run(path, recorded).problems}
    assert "size" in rules and "physical-hash" not in rules
    path.unlink()
    assert [p.rule for p in run(path, recorded).problems] == ["missing-file"]


def test_a_thread_reuses_its_read_buffer_without_mixing_files(tmp_path: Path) -> None:
    """A shorter slice read after a longer one is exactly its own bytes, and a file that grew
    since its size was taken is still read whole."""
    buffer = file_checks._ReadBuffer()
    long, short = tmp_path / "long", tmp_path / "short"
    long.write_bytes(b"L" * 5000)
    short.write_bytes(b"s" * 100)
    assert bytes(buffer.read(long, 5000)) == b"L" * 5000
    assert bytes(buffer.read(short, 100)) == b"s" * 100
    assert bytes(file_checks._ReadBuffer().read(long, 10)) == b"L" * 5000


def test_a_slice_a_little_larger_than_the_last_reuses_the_read_buffer(tmp_path: Path) -> None:
    """Slices of one dataset differ by a few bytes: the next, slightly larger one fits the buffer
    (a new buffer costs the zeroing of all its pages), and is still read exactly."""
    buffer = file_checks._ReadBuffer()
    first, larger = tmp_path / "first", tmp_path / "larger"
    first.write_bytes(b"f" * 8000)
    larger.write_bytes(b"g" * 8500)
    assert bytes(buffer.read(first, 8000)) == b"f" * 8000
    kept = buffer.data
    assert bytes(buffer.read(larger, 8500)) == b"g" * 8500
    assert buffer.data is kept


def test_offsets_are_read_in_place_at_the_slice_of_the_batch() -> None:
    """Offsets are viewed straight from the column's buffer, at the array's own start."""
    for data_type in (pa.int64(), pa.uint64()):
        column = pa.array(range(10, 20), data_type).slice(3, 4)
        values = file_checks._offset_values(column)
        assert values.tolist() == [13, 14, 15, 16] and values.dtype == data_type.to_pandas_dtype()


_NO_PANDAS_PROBE = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from protocol.identity import Multihash
from protocol.model import DataSlice, OffsetInterval
from verifier.engine.columns import Vocab
from verifier.file_checks import SliceExpectation, check_slice
path, logical, physical, rows = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
recorded = DataSlice(
    logical_hash=Multihash.from_multibase(logical),
    physical_hash=Multihash.from_multibase(physical),
    offset_interval=OffsetInterval(start=0, end=rows - 1),
    size=path.stat().st_size,
)
before = "pandas" in sys.modules
with ThreadPoolExecutor(2) as hashing:
    found = check_slice(path, recorded.physical_hash, recorded.size,
                        SliceExpectation(recorded, Vocab(), None), lambda n: None, hashing)
print(before, found.problems == (), "pandas" in sys.modules)
"""


def test_a_slice_check_loads_no_pandas(tmp_path: Path) -> None:
    """The column checks use Arrow and NumPy alone: ``Array.to_numpy`` would import pandas in
    an audit's first check (0.3 s of CPU holding the GIL while the other jobs wait)."""
    path = tmp_path / "slice.parquet"
    table = slice_table(0, list(range(ROWS)))
    pq.write_table(table, path)
    argv = [str(path), str(logical_hash(table)), str(physical_hash_file(path)), str(ROWS)]
    done = subprocess.run(
        [sys.executable, "-c", _NO_PANDAS_PROBE, *argv], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "False"]
