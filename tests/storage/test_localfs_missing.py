"""``LocalFsObjectStore.missing`` on many hashes: it lists the folder when that is small
(an empty or absent folder answers at once) and stats each hash when the folder is larger;
both ways give the same answer."""

from __future__ import annotations

from pathlib import Path

from protocol.identity import Multihash
from storage.layout import object_name
from storage.stores.localfs import LocalFsObjectStore

WANTED = [Multihash.from_digest_sha3_256(b"object %d" % i) for i in range(100)]


async def test_an_absent_or_empty_folder_misses_everything(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path / "blocks")
    assert await store.missing(WANTED) == WANTED
    (tmp_path / "blocks").mkdir()
    assert await store.missing(WANTED) == WANTED


async def test_listed_and_statted_folders_agree(tmp_path: Path) -> None:
    """Every third object is stored; one name is a folder, not an object. With a few
    unrelated files the folder is listed; with more than twice as many entries as hashes
    asked for, each hash is looked up by stat."""
    root = tmp_path / "blocks"
    store = LocalFsObjectStore(root)
    stored = await store.put_many([b"object %d" % i for i in range(0, 100, 3)])
    (root / object_name(WANTED[1])).mkdir()
    expected = [h for h in WANTED if h not in set(stored)]
    assert WANTED[1] in expected
    assert await store.missing(WANTED) == expected
    for number in range(200):
        (root / f"other-{number}").write_bytes(b"")
    assert await store.missing(WANTED) == expected
