"""Files written and read around the page cache hold exactly the bytes given, whatever their
size against the aligned buffer, and fall back to plain files where ``O_DIRECT`` is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import direct_io
from storage.direct_io import ALIGN, WRITE_BUFFER, open_new, read_direct

SIZES = [0, 1, ALIGN - 1, ALIGN, ALIGN + 1, WRITE_BUFFER - 1, WRITE_BUFFER, 3 * WRITE_BUFFER + 77]


@pytest.mark.parametrize("size", SIZES)
def test_written_in_odd_pieces_reads_back_the_same(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "file"
    with open_new(path) as out:
        for start in range(0, size, 1_000_003):
            assert out.write(memoryview(data)[start : start + 1_000_003]) == len(
                data[start : start + 1_000_003]
            )
    assert path.read_bytes() == data
    with read_direct(path) as whole:
        if size < direct_io.DIRECT_MIN:
            assert whole is None  # a small file is read through the page cache
        else:
            assert whole is not None and bytes(whole) == data


def test_an_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"kept")
    with pytest.raises(FileExistsError):
        open_new(path)
    assert path.read_bytes() == b"kept"


def test_a_file_above_the_read_limit_is_left_to_plain_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(direct_io, "READ_LIMIT", ALIGN)
    path = tmp_path / "file"
    path.write_bytes(b"x" * (ALIGN + 1))
    with read_direct(path) as whole:
        assert whole is None
    with pytest.raises(FileNotFoundError), read_direct(tmp_path / "missing"):
        pass


def test_reads_hold_at_most_two_buffers_per_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond that, a file is left to plain reads; a buffer given back serves the next read."""
    assert direct_io.READ_BUFFERS_PER_CORE == 2
    monkeypatch.setattr(direct_io, "_cores", lambda: 1)
    monkeypatch.setattr(direct_io, "DIRECT_MIN", 1)
    monkeypatch.setattr(direct_io, "_read_pool", [])
    monkeypatch.setattr(direct_io, "_read_buffers", 0)
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    first.write_bytes(b"1" * 5000)
    second.write_bytes(b"2" * 7000)
    third.write_bytes(b"3" * 9000)
    with read_direct(first) as one, read_direct(second) as two, read_direct(third) as other:
        assert one is not None and bytes(one) == b"1" * 5000
        assert two is not None and bytes(two) == b"2" * 7000
        assert other is None
    with read_direct(third) as other:
        assert other is not None and bytes(other) == b"3" * 9000
    assert direct_io._read_buffers == 2


def test_without_o_direct_files_are_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct_io, "_O_DIRECT", 0)
    path = tmp_path / "file"
    with open_new(path) as out:
        out.write(b"abc" * 5000)
    assert path.read_bytes() == b"abc" * 5000
    with read_direct(path) as whole:
        assert whole is None
