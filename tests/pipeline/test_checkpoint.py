"""The Spark engine's checkpoint file: deterministic bytes, read back exactly, foreign files refused."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from protocol.identity import DatasetId
from protocol.model import Timestamp
from verifier.engine.errors import CheckpointError
from verifier.engine.spark.checkpoint import read_checkpoint, write_checkpoint

A = DatasetId.new_seeded(b"a")
B = DatasetId.new_seeded(b"b")


def test_round_trip_and_deterministic_bytes(tmp_path: Path) -> None:
    watermarks = {A: Timestamp.of(2024, 1, 2, 3, 4, 5, 6_000_000), B: Timestamp.of(2023, 12, 31)}
    first = write_checkpoint(watermarks, tmp_path / "one.tar")
    second = write_checkpoint(dict(reversed(watermarks.items())), tmp_path / "two.tar")
    assert first.physical_hash == second.physical_hash
    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    assert read_checkpoint(first.path) == watermarks
    with tarfile.open(first.path) as tar:
        names = tar.getnames()
        assert names == sorted(str(d).removeprefix("did:odf:") + ".watermark" for d in (A, B))
        assert tar.extractfile(names[0]).read().decode().endswith("Z\n")


def test_foreign_files_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a tar")
    with pytest.raises(CheckpointError, match="is not a Spark engine checkpoint"):
        read_checkpoint(garbage)
    foreign = tmp_path / "foreign.tar"
    with tarfile.open(foreign, "w") as tar:
        info = tarfile.TarInfo("../escape.watermark")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    with pytest.raises(CheckpointError, match="unexpected entry"):
        read_checkpoint(foreign)
