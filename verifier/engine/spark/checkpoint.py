"""The Spark engine's checkpoint: the last watermark it saw for each input dataset.

A checkpoint is one opaque file (spec "Checkpoint"); like the reference Spark engine, ours is a tar
archive holding one ``<dataset id multibase>.watermark`` file per input with an RFC 3339 instant.
The archive is written deterministically (sorted entries, zero timestamps and owners), so the same
watermarks always give the same bytes and therefore the same physical hash.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path

from protocol.errors import ParseError
from protocol.hashing import physical_hash_file
from protocol.identity import DatasetId
from protocol.model import Timestamp
from verifier.engine.contract import WrittenCheckpoint
from verifier.engine.errors import CheckpointError

_SUFFIX = ".watermark"
_MAX_MEMBER_BYTES = 1024


def _member_name(dataset_id: DatasetId) -> str:
    return str(dataset_id).removeprefix("did:odf:") + _SUFFIX


def write_checkpoint(watermarks: Mapping[DatasetId, Timestamp], path: Path) -> WrittenCheckpoint:
    """Writes the input watermarks as a checkpoint file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = sorted((_member_name(did), wm.to_rfc3339() + "\n") for did, wm in watermarks.items())
    with (
        open(path, "wb") as out,
        tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for name, text in entries:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return WrittenCheckpoint(path, physical_hash_file(path), os.path.getsize(path))


def read_checkpoint(path: Path) -> dict[DatasetId, Timestamp]:
    """Reads the input watermarks back from a checkpoint file."""
    watermarks: dict[DatasetId, Timestamp] = {}
    try:
        with tarfile.open(path, mode="r:") as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith(_SUFFIX) or "/" in member.name:
                    raise CheckpointError(f"checkpoint {path}: unexpected entry '{member.name}'")
                if member.size > _MAX_MEMBER_BYTES:
                    raise CheckpointError(f"checkpoint {path}: entry '{member.name}' is too large")
                stream = tar.extractfile(member)
                text = stream.read().decode() if stream else ""
                dataset_id = DatasetId.parse("did:odf:" + member.name.removesuffix(_SUFFIX))
                watermarks[dataset_id] = Timestamp.parse_rfc3339(text.strip())
    except (tarfile.TarError, UnicodeDecodeError, ParseError) as err:
        raise CheckpointError(f"checkpoint {path} is not a Spark engine checkpoint: {err}") from err
    return watermarks
