"""A data check reads a file whole around the page cache when it can, or through the cache in
pieces (a file above the read limit, a file system without ``O_DIRECT``): both read the same
facts, and both refuse a file that is not Parquet."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.sync.data_checks import SliceFileError, read_slice_facts
from protocol.hashing import logical_hash_parquet
from storage import direct_io

WAYS = ["whole", "above the limit", "no O_DIRECT"]


def _around_cache(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
