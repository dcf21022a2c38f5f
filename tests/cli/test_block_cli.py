"""``odfd block hash|encode|decode`` as a user runs it: a real process, real files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from protocol.codec import yaml as odf_yaml
from protocol.identity import Multihash
from protocol.model import AddData, DataSlice, MetadataBlock, OffsetInterval, Timestamp

# The reference's stability case 3 (test_serde_flatbuffers.rs) and its published hash.
BLOCK = MetadataBlock(
    system_time=Timestamp.of(2020, 1, 1, 12),
    prev_block_hash=Multihash.from_digest_sha3_256(b"prev"),
    sequence_number=117,
    event=AddData(
        prev_checkpoint=Multihash.from_digest_sha3_256(b"prev"),
        prev_offset=9,
        new_data=DataSlice(
            logical_hash=Multihash.from_digest_sha3_256(b"logical"),
            physical_hash=Multihash.from_digest_sha3_256(b"physical"),
            offset_interval=OffsetInterval(start=10, end=99),
            size=100,
        ),
        new_watermark=Timestamp.of(2020, 1, 1, 12),
    ),
)
HASH = "f16201fcf10cb843746c4c44e6c288e216995701aa073426fc4bebe14f1680f8ec6d1"


def odfd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odfd.cli.main", "block", *args], capture_output=True, text=True
    )


def test_hash_encode_decode(tmp_path: Path) -> None:
    source = tmp_path / "block.yaml"
    source.write_text(odf_yaml.dump_block(BLOCK))
    hashed = odfd("hash", str(source))
    assert hashed.returncode == 0, hashed.stderr
    assert hashed.stdout.splitlines()[-1] == HASH

    binary = tmp_path / "block.bin"
    encoded = odfd("encode", str(source), "-o", str(binary))
    assert encoded.returncode == 0, encoded.stderr
    assert odfd("hash", str(binary)).stdout.splitlines()[-1] == HASH

    decoded = odfd("decode", str(binary))
    assert decoded.returncode == 0, decoded.stderr
    assert decoded.stdout == source.read_text()


def test_errors_go_to_stderr_with_nonzero_exit(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bin"
    source = tmp_path / "block.yaml"
    source.write_text(odf_yaml.dump_block(BLOCK))
    odfd("encode", str(source), "-o", str(broken))
    broken.write_bytes(broken.read_bytes()[:60])
    result = odfd("decode", str(broken))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: ") and "broken.bin" in result.stderr

    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text(source.read_text().replace("prevOffset: 9", "prevOffset: nine"))
    result = odfd("hash", str(bad_yaml))
    assert result.returncode == 1
    assert "content.event.prevOffset: expected an integer" in result.stderr

    missing = odfd("hash", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr
