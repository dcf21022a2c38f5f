"""The synchronous catalog reader (``odfd list`` without an event loop): the same records as
``Catalog``, and ``None`` — so the caller opens the workspace fully — for any catalog it must not
read itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite

from protocol.identity import DatasetId
from protocol.model import DatasetKind
from storage.catalog import Catalog
from storage.catalog.migrations import load_migrations, migrate
from storage.catalog.sync_reader import open_sync_reader
from tests.storage.chain_builder import fake_hash


async def _catalog_with_datasets(path: Path) -> Catalog:
    catalog = await Catalog.open(path)
    for alias, kind, sequence in (
        ("b.derived", DatasetKind.DERIVATIVE, 3),
        ("A.root", DatasetKind.ROOT, 0),
        ("c.root", DatasetKind.ROOT, None),
    ):
        _, dataset_id = DatasetId.new_generated()
        head = None if sequence is None else fake_hash(alias)
        await catalog.add_dataset(dataset_id, alias, kind, head, sequence)
    return catalog


async def test_the_reader_lists_what_the_catalog_lists(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    async with await _catalog_with_datasets(path) as catalog:
        expected = await catalog.list_datasets()
        roots = await catalog.list_datasets(DatasetKind.ROOT)
        reader = open_sync_reader(path)  # while the catalog is open: another process's view
        assert reader is not None
        with reader:
            assert reader.list_datasets() == expected
            assert reader.list_datasets(DatasetKind.ROOT) == roots
    assert [r.alias for r in expected] == ["A.root", "b.derived", "c.root"]
    assert [r.alias for r in roots] == ["A.root", "c.root"]


async def test_the_reader_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    await (await _catalog_with_datasets(path)).close()
    reader = open_sync_reader(path)
    assert reader is not None
    with reader:
        try:
            reader._db.execute("DELETE FROM datasets")
        except sqlite3.OperationalError as err:
            assert "readonly" in str(err)
        else:
            raise AssertionError("the reader wrote")
    async with await Catalog.open(path) as catalog:
        assert len(await catalog.list_datasets()) == 3


async def test_a_catalog_the_reader_must_not_read_is_left_to_the_full_open(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "none.sqlite"
    assert open_sync_reader(missing) is None
    assert not missing.exists()  # no empty catalog created

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database, not at all" * 100)
    assert open_sync_reader(garbage) is None

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # no schema_migrations table
    assert open_sync_reader(empty) is None

    older = tmp_path / "older.sqlite"  # written by an odfd without the newest migration
    async with aiosqlite.connect(older, isolation_level=None) as db:
        await migrate(db, load_migrations()[:-1])
    assert open_sync_reader(older) is None
    async with await Catalog.open(older):  # the full open migrates it ...
        pass
    reader = open_sync_reader(older)  # ... and then the reader reads it
    assert reader is not None
    reader.close()
