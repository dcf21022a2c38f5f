"""The workspace: creating datasets from manifests, rename, delete, import, repair, the catalog."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from protocol.codec import yaml as odf_yaml
from protocol.identity import DatasetId, DatasetRef
from protocol.model import (
    AddData,
    DatasetKind,
    DataSlice,
    OffsetInterval,
    SetPollingSource,
    SetTransform,
    SqlQueryStep,
)
from storage.catalog import Catalog
from storage.catalog.migrations import load_migrations
from storage.dataset import Dataset
from storage.errors import (
    ChainRuleError,
    DatasetExistsError,
    DatasetNotFoundError,
    HashMismatchError,
    InvalidSnapshotError,
    StorageError,
    WorkspaceError,
)
from storage.layout import WorkspaceLayout
from storage.stores.localfs import hash_file
from storage.workspace import Workspace, reset_catalog
from tests.storage.chain_builder import fake_hash, schema

MANIFESTS = Path(__file__).parent / "manifests"


def snapshots(*names: str):
    found = []
    for name in names:
        found.extend(odf_yaml.load_snapshots((MANIFESTS / name).read_bytes(), source=name))
    return found


async def add_all(workspace: Workspace) -> None:
    from storage.snapshots import dependency_order

    all_snapshots = snapshots(*sorted(p.name for p in MANIFESTS.glob("*.yaml")))
    for snapshot in dependency_order(all_snapshots):
        await workspace.create_from_snapshot(snapshot)


async def test_init_creates_layout_and_refuses_twice(tmp_path: Path) -> None:
    ws = await Workspace.init(tmp_path / "ws")
    await ws.close()
    root = tmp_path / "ws"
    assert (root / "config.toml").is_file() and (root / "catalog.sqlite").is_file()
    assert (root / "datasets").is_dir()
    assert stat.S_IMODE((root / "keys").stat().st_mode) == 0o700
    with pytest.raises(WorkspaceError, match="already"):
        await Workspace.init(root)
    with pytest.raises(WorkspaceError, match="odfd init"):
        await Workspace.open(tmp_path / "elsewhere")


async def test_env_var_picks_the_default_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_HOME", str(tmp_path / "home"))
    assert WorkspaceLayout.default_root() == tmp_path / "home"
    monkeypatch.delenv("ODFD_HOME")
    monkeypatch.chdir(tmp_path)
    assert WorkspaceLayout.default_root() == tmp_path / ".odfd"


async def test_every_test_manifest_is_added_and_normalized(workspace: Workspace) -> None:
    await add_all(workspace)
    records = {r.alias: r for r in await workspace.list_datasets()}
    assert len(records) == 11
    summary = await workspace.get_dataset("test.deriv.summary")
    events = [b.event async for _, b in summary.chain.iter_blocks_forward()]
    transform = events[1]
    assert isinstance(transform, SetTransform)
    root_id = records["test.root.url-csv"].id
    assert transform.inputs[0].dataset_ref == DatasetRef(root_id)
    assert transform.inputs[0].alias == "test.root.url-csv"
    assert transform.transform.query is None
    assert transform.transform.queries == (
        SqlQueryStep(
            query="SELECT region, count(*) AS total FROM `test.root.url-csv` GROUP BY region\n"
        ),
    )
    root = await workspace.get_dataset(str(root_id))
    root_events = [b async for _, b in root.chain.iter_blocks_forward()]
    assert [type(b.event).__name__ for b in root_events] == [
        "Seed",
        "SetPollingSource",
        "SetVocab",
        "SetInfo",
        "SetLicense",
        "SetAttachments",
    ]
    assert len({b.system_time for b in root_events}) == 1
    polling = root_events[1].event
    assert isinstance(polling, SetPollingSource)
    assert polling.preprocess is not None and polling.preprocess.queries is not None
    assert polling.preprocess.queries[0].query.startswith("SELECT reported")
    for record in records.values():
        dataset = workspace.open_dataset(record.id)
        assert await dataset.alias() == record.alias
        folder = workspace.layout.datasets_dir / str(record.id).removeprefix("did:odf:")
        assert dataset.layout.root == folder
        assert (folder / "info" / "alias").read_text() == record.alias
        assert (folder / "refs" / "head").read_text() == str(record.head)
        key = workspace.keys.path_of(record.id)
        assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
        assert workspace.layout.datasets_dir not in key.parents
        signing_key = workspace.keys.load(record.id)
        assert DatasetId.from_public_key(bytes(signing_key.verify_key)) == record.id


async def test_inputs_resolve_by_id_too(workspace: Workspace, tmp_path: Path) -> None:
    for snapshot in snapshots("root-url-csv.yaml"):
        root = await workspace.create_from_snapshot(snapshot)
    text = f"""kind: DatasetSnapshot
version: 1
content:
  name: by-id
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: {root.id}
          alias: src
      transform:
        kind: Sql
        engine: spark
        query: SELECT * FROM src
"""
    (snapshot,) = odf_yaml.load_snapshots(text)
    dataset = await workspace.create_from_snapshot(snapshot)
    state = await dataset.chain.state()
    assert state.transform_input_ids == (root.id,) and state.transform.inputs[0].alias == "src"


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            "name: d\n  kind: Derivative\n  metadata:\n    - kind: SetTransform\n      inputs:\n        - datasetRef: nowhere\n"
            "      transform: {kind: Sql, engine: spark, query: select 1}",
            "inputs not found in the workspace: nowhere",
        ),
        (
            "name: d\n  kind: Root\n  metadata:\n    - kind: SetTransform\n      inputs: []\n"
            "      transform: {kind: Sql, engine: spark, query: select 1}",
            "only allowed on derivative",
        ),
        (
            "name: d\n  kind: Derivative\n  metadata:\n    - kind: AddPushSource\n      sourceName: s\n"
            "      read: {kind: NdJson}\n      merge: {kind: Append}",
            "only allowed on root",
        ),
        (
            "name: d\n  kind: Root\n  metadata:\n    - kind: AddData\n      newWatermark: 2020-01-01T00:00:00Z",
            "cannot appear in a DatasetSnapshot",
        ),
    ],
)
async def test_invalid_snapshots_are_refused(
    workspace: Workspace, text: str, fragment: str
) -> None:
    (snapshot,) = odf_yaml.load_snapshots(
        f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  {text}\n"
    )
    with pytest.raises(InvalidSnapshotError, match=fragment):
        await workspace.create_from_snapshot(snapshot)
    assert await workspace.list_datasets() == []
    assert os.listdir(workspace.layout.datasets_dir) == []


async def test_duplicate_alias_is_refused(workspace: Workspace) -> None:
    (snapshot,) = snapshots("root-ethereum.yaml")
    await workspace.create_from_snapshot(snapshot)
    with pytest.raises(DatasetExistsError):
        await workspace.create_from_snapshot(snapshot)
    assert len(os.listdir(workspace.layout.datasets_dir)) == 1


async def test_rename_and_delete(workspace: Workspace) -> None:
    await add_all(workspace)
    record = await workspace.rename_dataset("test.root.ethereum", "eth.logs")
    assert await workspace.open_dataset(record.id).alias() == "eth.logs"
    with pytest.raises(DatasetNotFoundError):
        await workspace.resolve("test.root.ethereum")
    with pytest.raises(DatasetExistsError):
        await workspace.rename_dataset("eth.logs", "test.root.mqtt")
    with pytest.raises(StorageError, match="is an input of"):
        await workspace.delete_dataset("test.root.url-csv")
    for alias in ("test.deriv.joined", "test.deriv.summary", "test.root.url-csv", "eth.logs"):
        deleted = await workspace.delete_dataset(alias)
        assert not workspace.layout.dataset(deleted.id).root.exists()
        assert not workspace.keys.path_of(deleted.id).exists()
    assert len(await workspace.list_datasets()) == 7


async def test_head_moves_are_written_to_the_catalog(workspace: Workspace) -> None:
    (snapshot,) = snapshots("root-ethereum.yaml")
    dataset = await workspace.create_from_snapshot(snapshot)
    result = await dataset.commit_event(schema("a"), expected_head=await dataset.chain.head())
    record = await workspace.resolve("test.root.ethereum")
    assert record.head == result.new_head and record.head_sequence == 2


async def _external_dataset(root: Path, alias: str) -> Dataset:
    """A dataset folder outside any workspace, with a data slice, as another node would have it."""
    ws = await Workspace.init(root / "other-ws")
    (snapshot,) = snapshots("root-ethereum.yaml")
    dataset = await ws.create_from_snapshot(snapshot)
    head = (
        await dataset.commit_event(schema("a"), expected_head=await dataset.chain.head())
    ).new_head
    data_file = root / "slice.bin"
    data_file.write_bytes(b"parquet bytes")
    data_hash, size = hash_file(data_file)
    await dataset.commit_data(
        AddData(
            new_data=DataSlice(
                logical_hash=fake_hash("l"),
                physical_hash=data_hash,
                offset_interval=OffsetInterval(start=0, end=4),
                size=size,
            )
        ),
        data_file=data_file,
        expected_head=head,
    )
    await dataset.set_alias(alias)
    await dataset.set_remote_aliases("pull", ["https://example.org/eth"])
    await ws.close()
    return dataset


async def test_import_copies_a_validated_dataset_folder(
    workspace: Workspace, tmp_path: Path
) -> None:
    source = await _external_dataset(tmp_path, "imported.eth")
    dataset = await workspace.import_dataset(source.layout.root)
    record = await workspace.resolve("imported.eth")
    assert (
        record.id == source.id
        and record.head == await source.chain.head()
        and record.head_sequence == 3
    )
    assert await workspace.catalog.remote_aliases(record.id, "pull") == ["https://example.org/eth"]
    for sub in ("blocks", "data", "refs"):
        assert sorted(os.listdir(dataset.layout.root / sub)) == sorted(
            os.listdir(source.layout.root / sub)
        )
    with pytest.raises(DatasetExistsError):
        await workspace.import_dataset(source.layout.root)


async def test_import_refuses_tampered_folders(workspace: Workspace, tmp_path: Path) -> None:
    source = await _external_dataset(tmp_path, "imported.eth")
    data_dir = source.layout.data_dir
    (data_file,) = data_dir.iterdir()
    data_file.write_bytes(b"parquet bytez")  # same size: only re-hashing can tell
    with pytest.raises(HashMismatchError):
        await workspace.import_dataset(source.layout.root)
    data_file.unlink()
    with pytest.raises(ChainRuleError, match=r"\[missing-object\]"):
        await workspace.import_dataset(source.layout.root)
    assert await workspace.list_datasets() == []
    assert os.listdir(workspace.layout.datasets_dir) == []


async def test_repair_rebuilds_the_catalog_from_folders(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    async with await Workspace.init(root) as ws:
        await add_all(ws)
        await ws.catalog.add_remote("origin", "https://example.org/repo")
        before = {
            (r.id, r.alias, r.kind, r.head, r.head_sequence) for r in await ws.list_datasets()
        }
        victim = (await ws.resolve("test.root.mqtt")).id
    (root / "datasets" / victim.to_multibase() / "refs" / "head").unlink()
    (root / "datasets" / "not-a-dataset").mkdir()
    layout = WorkspaceLayout(root)
    async with await Workspace.open(root) as ws:
        report = await ws.repair()
        after = {(r.id, r.alias, r.kind, r.head, r.head_sequence) for r in await ws.list_datasets()}
        assert await ws.catalog.get_remote("origin") == "https://example.org/repo"
    assert after == {entry for entry in before if entry[0] != victim}
    assert {Path(folder).name for folder, _ in report.skipped} == {
        victim.to_multibase(),
        "not-a-dataset",
    }

    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
        (root / name).unlink(missing_ok=True)
    (root / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
    moved = await reset_catalog(layout)
    assert moved is not None and moved.exists()
    async with await Workspace.open(root) as ws:
        await ws.repair()
        assert {
            (r.id, r.alias, r.kind, r.head, r.head_sequence) for r in await ws.list_datasets()
        } == after


async def test_catalog_migrations_wal_and_sync_tables(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with await Catalog.open(path) as catalog:
        async with catalog.connection.execute("PRAGMA journal_mode") as cursor:
            row = await cursor.fetchone()
            assert row is not None
            assert row[0] == "wal"
        _, dataset_id = DatasetId.new_generated()
        await catalog.add_dataset(dataset_id, "a", DatasetKind.ROOT, fake_hash("h"), 0)
        assert await catalog.sync_states(dataset_id) == []
        await catalog.record_synced(dataset_id, "https://r", fake_hash("first"))
        (state,) = await catalog.sync_states(dataset_id)
        assert (state.dataset_id, state.remote) == (dataset_id, "https://r")
        assert state.last_synced_local_head == fake_hash("first") == state.last_remote_head
        await catalog.record_synced(dataset_id, "https://r", fake_hash("both"))
        (state,) = await catalog.sync_states(dataset_id)
        assert state.last_synced_local_head == fake_hash("both") == state.last_remote_head
        transfer = await catalog.begin_transfer(
            dataset_id, "https://r", "pull", fake_hash("t"), None, 10
        )
        await catalog.update_transfer(transfer.id, objects_done=4, bytes_done=400)
        resumed = await catalog.begin_transfer(
            dataset_id, "https://r", "pull", fake_hash("t"), None
        )
        assert (resumed.id, resumed.objects_done, resumed.objects_total) == (transfer.id, 4, 10)
        restarted = await catalog.begin_transfer(
            dataset_id, "https://r", "pull", fake_hash("t2"), None
        )
        assert restarted.objects_done == 0 and restarted.target_head == fake_hash("t2")
        await catalog.end_transfer(restarted.id)
        assert await catalog.get_transfer(dataset_id, "https://r", "pull") is None
        await catalog.remove_dataset(dataset_id)
        assert await catalog.sync_states() == []
    with sqlite3.connect(path) as db:
        versions = [row[0] for row in db.execute("SELECT version FROM schema_migrations")]
    assert versions == [m.version for m in load_migrations()]
    async with await Catalog.open(path):
        pass
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(versions)
