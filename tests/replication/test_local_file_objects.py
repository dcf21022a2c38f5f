"""Objects that are local files (a push from this node, a pull from ``file://``) go to their
destination by path (``put_file``): their size is checked against the block before anything is
stored, their hash on the bytes stored, and a lying file stores nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfd.sync.errors import CorruptSourceError
from odfd.sync.objects import ObjectFetcher, ObjectRef, store_source
from protocol.identity import Multihash
from protocol.transfer.simple import ObjectKind
from storage.dataset import Dataset
from storage.layout import DatasetLayout
from storage.stores.localfs import LocalFsObjectStore


def _dataset(root: Path) -> Dataset:
    return Dataset.open_local(DatasetLayout(root).create().root)


async def test_local_files_are_stored_by_path_and_checked(tmp_path: Path) -> None:
    source, dest = _dataset(tmp_path / "source"), _dataset(tmp_path / "dest")
    payload = b"parquet bytes" * 1000
    hash = await source.data.put_bytes(payload)
    moved: list[int] = []
    fetcher = ObjectFetcher(dest, where="test", on_bytes=moved.append)
    await fetcher.fetch_all([ObjectRef(ObjectKind.DATA, hash, len(payload))], store_source(source))
    assert await dest.data.get_bytes(hash) == payload
    assert moved == [len(payload)]

    assert isinstance(source.data, LocalFsObjectStore)
    path = source.data.path_of(hash)
    other = _dataset(tmp_path / "other")
    # The block records another size: refused before anything is read or stored.
    with pytest.raises(CorruptSourceError, match="has 13000 bytes, its block records 12999"):
        await ObjectFetcher(other, where="test").fetch_all(
            [ObjectRef(ObjectKind.DATA, hash, len(payload) - 1)], store_source(source)
        )
    # Same size, other bytes: the hash of what was stored gives it away.
    path.chmod(0o644)
    path.write_bytes(b"X" + payload[1:])
    with pytest.raises(CorruptSourceError, match="arrived with bytes that hash to"):
        await ObjectFetcher(other, where="test").fetch_all(
            [ObjectRef(ObjectKind.DATA, hash, len(payload))], store_source(source)
        )
    # A file the block names but the source lacks.
    missing = Multihash.from_digest_sha3_256(b"absent")
    with pytest.raises(CorruptSourceError, match="does not serve"):
        await ObjectFetcher(other, where="test").fetch_all(
            [ObjectRef(ObjectKind.DATA, missing, 6)], store_source(source)
        )
    assert [h async for h in other.data.iter_hashes()] == []
