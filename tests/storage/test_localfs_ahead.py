"""Objects written ahead of their batch (``storage.stores.localfs_ahead``): only what the batch
stores gets a name, whatever was written ahead; the staging folder is gone afterwards; a
folder that is not empty, or a discarded stage, leaves the batch to store its objects as usual."""

from __future__ import annotations

from pathlib import Path

from protocol.identity import Multihash
from storage.layout import object_name
from storage.stores.localfs import LocalFsObjectStore

OBJECTS = [b"block %d" % number for number in range(300)]


def _store(tmp_path: Path) -> tuple[LocalFsObjectStore, Path]:
    stage = tmp_path / "staging"
    stage.mkdir()
    return LocalFsObjectStore(tmp_path / "blocks", lambda: stage), stage


def _put_ahead(store: LocalFsObjectStore, objects: list[bytes]) -> None:
    ahead = store.stage_ahead()
    assert ahead is not None
    for data in objects:
        ahead.put(object_name(Multihash.from_digest_sha3_256(data)), data)


async def test_only_the_batch_is_named_from_what_was_written_ahead(tmp_path: Path) -> None:
    """Written ahead: most of the batch and objects the batch lacks (an export's blocks the
    walk did not verify); the batch names exactly its objects, with their bytes; those the child
    wrote it also read back (the commit need not re-read them), the others not."""
    store, stage = _store(tmp_path)
    extra = [b"not in the chain", b"junk"]
    _put_ahead(store, OBJECTS[:250] + extra)
    hashes, read_back = await store.put_many_read_back(OBJECTS)
    assert hashes == [Multihash.from_digest_sha3_256(data) for data in OBJECTS]
    assert read_back == set(hashes[:250])
    assert sorted(path.name for path in store.root.iterdir()) == sorted(map(object_name, hashes))
    for hash, data in zip(hashes, OBJECTS, strict=True):
        assert await store.get_bytes(hash) == data
    assert list(stage.iterdir()) == []


async def test_a_folder_that_is_not_empty_is_not_staged_ahead(tmp_path: Path) -> None:
    store, stage = _store(tmp_path)
    await store.put_many(OBJECTS[:1])
    assert store.stage_ahead() is None
    assert list(stage.iterdir()) == []


async def test_a_folder_filled_meanwhile_takes_the_batch_as_usual(tmp_path: Path) -> None:
    store, stage = _store(tmp_path)
    _put_ahead(store, OBJECTS)
    other = LocalFsObjectStore(store.root, lambda: stage)
    await other.put_many(OBJECTS[:1])  # another writer, between the stage and the batch
    hashes = await store.put_many(OBJECTS)
    assert await store.missing(hashes) == []
    assert len(list(store.root.iterdir())) == len(OBJECTS)
    assert list(stage.iterdir()) == []


async def test_a_discarded_stage_names_nothing(tmp_path: Path) -> None:
    store, stage = _store(tmp_path)
    _put_ahead(store, OBJECTS)
    ahead = store.stage_ahead()
    assert ahead is not None
    ahead.discard()
    assert list(stage.iterdir()) == [] and list(store.root.iterdir()) == []
    hashes = await store.put_many(OBJECTS[:5])  # stored as usual
    assert sorted(path.name for path in store.root.iterdir()) == sorted(map(object_name, hashes))
