"""A data check reads a small file whole in one call, a larger one whole around the page cache
when it can, or through the cache in pieces (a file above the read limit, a file system without
``O_DIRECT``): every way reads the same facts, and every way refuses a file that is not
Parquet."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.sync import data_checks
from odfd.sync.data_checks import SliceFileError, check_threads, read_slice_facts
from protocol.hashing import available_cores, logical_hash_parquet
from storage import direct_io

WAYS = ["small", "whole", "above the limit", "no O_DIRECT"]


def _around_cache(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if way == "small":
        return  # the test's files are below DIRECT_MIN
    monkeypatch.setattr(direct_io, "DIRECT_MIN", 1)  # the test's files are small
    if way == "above the limit":
        monkeypatch.setattr(direct_io, "READ_LIMIT", 0)
    elif way == "no O_DIRECT":
        monkeypatch.setattr(direct_io, "_O_DIRECT", 0)


@pytest.mark.parametrize("way", WAYS)
def test_every_way_reads_the_same_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    path = tmp_path / "slice.parquet"
    table = pa.table(
        {
            "offset": pa.array(range(10, 5010), pa.int64()),
            "name": [f"n{i % 97}" for i in range(5000)],
        }
    )
    pq.write_table(table, path, row_group_size=1500)
    _around_cache(way, monkeypatch)
    facts = read_slice_facts(path, "offset")
    assert (facts.records, facts.first_offset, facts.last_offset) == (5000, 10, 5009)
    assert facts.has_offset_column
    assert facts.logical_hash == logical_hash_parquet(path)


@pytest.mark.parametrize("way", WAYS)
def test_every_way_refuses_a_file_that_is_not_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    path = tmp_path / "slice.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 9000)
    _around_cache(way, monkeypatch)
    with pytest.raises(SliceFileError, match="is not a readable Parquet file"):
        read_slice_facts(path, "offset")


def test_a_check_reads_its_file_before_it_waits_for_a_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While every core's slot is held (other files being decoded and hashed), a check already
    reads its file whole, and finishes once a slot is free: device reads overlap the hashing."""
    path = tmp_path / "slice.parquet"
    pq.write_table(pa.table({"offset": pa.array(range(3000), pa.int64())}), path)
    _around_cache("whole", monkeypatch)
    monkeypatch.setattr(direct_io, "_read_pool", [])
    monkeypatch.setattr(direct_io, "_read_buffers", 0)
    slots = data_checks._compute_slots
    cores = available_cores()
    for _ in range(cores):
        assert slots.acquire(timeout=5)
    with ThreadPoolExecutor(1) as pool:
        try:
            check = pool.submit(read_slice_facts, path, "offset")
            deadline = time.monotonic() + 5
            while direct_io._read_buffers == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert direct_io._read_buffers == 1, "the file was not read while the cores were busy"
            assert not check.done()
        finally:
            for _ in range(cores):
                slots.release()
        facts = check.result(timeout=30)
    assert (facts.records, facts.first_offset, facts.last_offset) == (3000, 0, 2999)


def test_every_check_thread_can_read_ahead_into_a_buffer() -> None:
    assert check_threads() == 2 * available_cores()
    assert direct_io.READ_BUFFERS_PER_CORE * available_cores() >= check_threads()


def test_files_of_one_schema_each_get_their_own_hash(tmp_path: Path) -> None:
    """Checks copy one started digest per schema: what one file fed never reaches the next."""
    paths = []
    for number in range(3):
        path = tmp_path / f"slice-{number}.parquet"
        table = pa.table(
            {"offset": pa.array(range(number, number + 50), pa.int64()), "name": ["x"] * 50}
        )
        pq.write_table(table, path)
        paths.append(path)
    hashes = [read_slice_facts(path, "offset").logical_hash for path in paths * 2]
    assert hashes == [logical_hash_parquet(path) for path in paths * 2]
    assert len(set(hashes)) == 3
