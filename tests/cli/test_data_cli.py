"""``odfd data hash`` as a user runs it: a real process over real Parquet files."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# Logical hash computed by the reference arrow-digest crate for this table (see
# tests/protocol/hashing/test_logical_hash_golden.py).
TABLE = pa.table({"a": pa.array([1, 2, 3], pa.int32()), "b": ["a", "b", "c"]})
LOGICAL = "f9680c001205684f7bfdcaf4ff7d1f9bf0fd766c98d8ded335e933fb4eec245054f3206b61a"


def odfd_data(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfd.cli.main", "data", *args], capture_output=True, text=True
    )


def test_hash_prints_logical_and_physical_hashes(tmp_path: Path) -> None:
    path = tmp_path / "slice.parquet"
    pq.write_table(TABLE, path)
    result = odfd_data("hash", str(path))
    assert result.returncode == 0, result.stderr
    physical = "f1620" + hashlib.sha3_256(path.read_bytes()).hexdigest()
    assert result.stdout.splitlines() == [f"logicalHash: {LOGICAL}", f"physicalHash: {physical}"]
    assert result.stderr == ""


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    result = odfd_data("hash", str(tmp_path / "missing.parquet"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and "missing.parquet" in result.stderr


def test_non_parquet_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("just text\n")
    result = odfd_data("hash", str(path))
    assert result.returncode == 1
    assert "notes.txt" in result.stderr and "not a Parquet file" in result.stderr


def test_unsupported_type_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "durations.parquet"
    pq.write_table(pa.table({"d": pa.array([1, 2], pa.duration("s"))}), path)
    result = odfd_data("hash", str(path))
    assert result.returncode == 1
    assert "column 'd'" in result.stderr and "durations.parquet" in result.stderr
