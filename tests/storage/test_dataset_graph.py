"""The dataset graph: its answers (upstream order and cycles, readers, downstream-first order,
lineage), and its index in the catalog, kept current by every way a dataset or a head changes,
rebuilt by repair, filled on an old catalog, and read without reading a chain."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from odfd.sync.pull import pull
from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind, SetInfo, SetTransform
from storage.catalog.records import DatasetRecord
from storage.dataset import Dataset
from storage.errors import DatasetNotFoundError, StorageError
from storage.graph import DatasetGraph, DependencyCycleError
from storage.orphans import recover_folder
from storage.workspace import Workspace
from tests.storage.chain_builder import fake_hash, set_transform

NOW = datetime(2024, 1, 1, tzinfo=UTC)


# --- the graph's answers -----------------------------------------------------------------------


def record(name: str, kind: DatasetKind = DatasetKind.DERIVATIVE) -> DatasetRecord:
    _, dataset_id = DatasetId.new_generated()
    return DatasetRecord(dataset_id, name, kind, fake_hash(name), 1, NOW, NOW)


@pytest.fixture
def diamond() -> Iterator[tuple[dict[str, DatasetRecord], DatasetGraph]]:
    """``a`` (root) → ``b``, ``c`` → ``d``; ``d`` also reads ``gone``, not in the workspace."""
    a = record("a", DatasetKind.ROOT)
    b, c, d = record("b"), record("c"), record("d")
    _, gone = DatasetId.new_generated()
    inputs = {b.id: (a.id,), c.id: (a.id,), d.id: (b.id, c.id, gone)}
    yield {"a": a, "b": b, "c": c, "d": d}, DatasetGraph([a, b, c, d], inputs, "/ws")


def ids(records: list[DatasetRecord]) -> list[str]:
    return [r.alias for r in records]


def test_readers_and_downstream_orders(
    diamond: tuple[dict[str, DatasetRecord], DatasetGraph],
) -> None:
    r, graph = diamond
    assert ids(graph.readers_of(r["a"].id)) == ["b", "c"]
    assert graph.readers_of(r["d"].id) == []
    assert ids(graph.downstream_of([r["a"]])) == ["b", "c", "d"]
    assert ids(graph.downstream_of([r["b"]])) == ["d"]
    first = graph.downstream_first([r["a"], r["b"], r["c"], r["d"]])
    assert ids(first).index("d") < min(ids(first).index("b"), ids(first).index("c"))
    assert ids(first)[-1] == "a"
    assert graph.blocked_by_readers([r["a"], r["b"]]) == {"a": ["c"], "b": ["d"]}
    assert graph.blocked_by_readers([r["b"], r["d"]]) == {}


def test_upstream_order_refuses_missing_inputs_unless_skipped(
    diamond: tuple[dict[str, DatasetRecord], DatasetGraph],
) -> None:
    r, graph = diamond
    with pytest.raises(DatasetNotFoundError, match=r"is not in the workspace /ws$"):
        graph.upstream_order([r["d"].id])
    order = graph.upstream_order([r["d"].id], skip_missing=True)
    assert order[-1] == r["d"].id and order[0] == r["a"].id and len(order) == 4
    assert graph.upstream_order([r["b"].id]) == [r["a"].id, r["b"].id]


def test_cycles_are_refused() -> None:
    x, y, z = record("x"), record("y"), record("z")
    graph = DatasetGraph([x, y, z], {x.id: (z.id,), y.id: (x.id,), z.id: (y.id,)})
    with pytest.raises(DependencyCycleError, match="depends on itself through its inputs"):
        graph.upstream_order([y.id])
    selfish = record("self")
    with pytest.raises(DependencyCycleError):
        DatasetGraph([selfish], {selfish.id: (selfish.id,)}).upstream_order([selfish.id])


def test_lineage_and_visibility(diamond: tuple[dict[str, DatasetRecord], DatasetGraph]) -> None:
    r, graph = diamond
    a, b, c, d = (r[n].id for n in "abcd")
    gone = graph.inputs_of(d)[2]
    assert sorted(map(str, graph.lineage(d))) == sorted(
        map(str, [(b, d), (c, d), (gone, d), (a, b), (a, c)])
    )
    assert sorted(map(str, graph.lineage(b, downstream=True))) == sorted(map(str, [(a, b), (b, d)]))
    hidden = graph.only(lambda rec: rec.alias != "c")
    assert "c" not in ids(hidden.readers_of(a)) and hidden.inputs_of(d)[1] == c
    assert (c, d) in hidden.lineage(d) and (a, c) not in hidden.lineage(d)


# --- the index in the catalog ------------------------------------------------------------------


ROOT = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata: []
"""

DERIVATIVE = """kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{inputs}]
      transform:
        kind: Sql
        engine: datafusion
        query: SELECT * FROM src
"""


async def add(workspace: Workspace, name: str, *inputs: str) -> Dataset:
    from protocol.codec import yaml as odf_yaml

    text = (
        DERIVATIVE.format(
            name=name, inputs=", ".join(f"{{datasetRef: {i}, alias: src{i}}}" for i in inputs)
        )
        if inputs
        else ROOT.format(name=name)
    )
    (snapshot,) = odf_yaml.load_snapshots(text)
    return await workspace.create_from_snapshot(snapshot)


async def indexed(workspace: Workspace) -> dict[str, tuple[Multihash, list[str]]]:
    """The index's rows by alias, inputs by alias (or id when not here)."""
    records = {r.id: r.alias for r in await workspace.list_datasets()}
    return {
        records[dataset_id]: (head, [records.get(i, str(i)) for i in inputs])
        for dataset_id, (head, inputs) in (await workspace.dataset_inputs.load()).items()
    }


async def head_of(workspace: Workspace, name: str) -> Multihash:
    head = (await workspace.resolve(name)).head
    assert head is not None
    return head


@pytest.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[Workspace]:
    ws = await Workspace.init(tmp_path / "ws")
    yield ws
    await ws.close()


class CountingReads:
    """Counts the chains the graph reads (``Workspace._inputs_at``)."""

    def __init__(self, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = workspace._inputs_at

        async def counted(dataset_id: DatasetId, head: Multihash) -> tuple[DatasetId, ...]:
            self.count += 1
            return await original(dataset_id, head)

        monkeypatch.setattr(workspace, "_inputs_at", counted)


async def test_created_and_committed_transforms_are_indexed(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add(workspace, "a")
    await add(workspace, "b")
    deriv = await add(workspace, "d", "a")
    assert await indexed(workspace) == {"d": (await head_of(workspace, "d"), ["a"])}
    # Every head move of a derivative keeps its row at the head; a new transform changes it.
    head = await deriv.chain.head()
    head = (await deriv.commit_event(SetInfo(description="x"), expected_head=head)).new_head
    assert (await indexed(workspace))["d"] == (head, ["a"])
    b = await workspace.resolve("b")
    changed: SetTransform = set_transform(b.id)
    await deriv.commit_event(changed, expected_head=head)
    assert (await indexed(workspace))["d"] == (await head_of(workspace, "d"), ["b"])
    reads = CountingReads(workspace, monkeypatch)
    graph = await workspace.graph()
    assert (
        ids(graph.readers_of(b.id)) == ["d"]
        and graph.readers_of((await workspace.resolve("a")).id) == []
    )
    assert reads.count == 0


async def test_rename_delete_and_the_refusal_to_delete_what_is_read(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await add(workspace, "a")
    await add(workspace, "d", "a")
    reads = CountingReads(workspace, monkeypatch)
    with pytest.raises(StorageError, match="dataset a is an input of d; delete those first"):
        await workspace.delete_dataset("a")
    await workspace.rename_dataset("d", "renamed")
    assert await indexed(workspace) == {"renamed": (await head_of(workspace, "renamed"), ["a"])}
    assert a.id is not None
    assert ids((await workspace.graph()).readers_of(a.id)) == ["renamed"]
    await workspace.delete_dataset("renamed")
    assert await indexed(workspace) == {}
    await workspace.delete_dataset("a")
    assert reads.count == 0


async def test_import_and_adoption_index_the_inputs(workspace: Workspace, tmp_path: Path) -> None:
    await add(workspace, "a")
    deriv = await add(workspace, "d", "a")
    assert deriv.id is not None and deriv.layout is not None
    other = await Workspace.init(tmp_path / "other")
    try:
        await other.import_dataset(deriv.layout.root, "copy")
        a_id = str((await workspace.resolve("a")).id)
        assert await indexed(other) == {"copy": (await head_of(other, "copy"), [a_id])}
    finally:
        await other.close()
    # A folder the catalog lost is adopted with its inputs.
    await workspace.catalog.remove_dataset(deriv.id)
    assert await indexed(workspace) == {}
    action = await recover_folder(workspace, deriv.id)
    assert action.action == "adopted"
    assert await indexed(workspace) == {"d": (await head_of(workspace, "d"), ["a"])}


async def test_a_pulled_derivative_is_indexed(workspace: Workspace, tmp_path: Path) -> None:
    a = await add(workspace, "a")
    deriv = await add(workspace, "d", "a")
    assert deriv.layout is not None
    other = await Workspace.init(tmp_path / "other")
    try:
        await pull(other, f"file://{deriv.layout.root}", alias="copy")
        assert await indexed(other) == {"copy": (await head_of(other, "copy"), [str(a.id)])}
    finally:
        await other.close()


async def test_repair_rebuilds_the_index(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add(workspace, "a")
    await add(workspace, "d", "a")
    await add(workspace, "e", "d", "a")
    expected = await indexed(workspace)
    await workspace.dataset_inputs.replace([])
    report = await workspace.repair()
    assert len(report.registered) == 3
    assert await indexed(workspace) == expected
    reads = CountingReads(workspace, monkeypatch)
    graph = await workspace.graph()
    d = await workspace.resolve("d")
    assert ids(graph.readers_of(d.id)) == ["e"] and reads.count == 0


async def test_a_stale_or_missing_row_is_read_from_its_chain_once(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add(workspace, "a")
    d = await add(workspace, "d", "a")
    await add(workspace, "e", "a")
    assert d.id is not None
    expected = await indexed(workspace)
    # A head move the index missed (another process killed before writing, say).
    await workspace.dataset_inputs.record(d.id, fake_hash("old head"), ())
    reads = CountingReads(workspace, monkeypatch)
    await workspace.graph()
    assert reads.count == 1 and await indexed(workspace) == expected
    await workspace.graph()
    assert reads.count == 1


async def test_an_old_catalog_gets_the_index_filled(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    workspace = await Workspace.init(root)
    await add(workspace, "a")
    await add(workspace, "d", "a")
    await add(workspace, "e", "d")
    expected = await indexed(workspace)
    await workspace.close()
    # The catalog as the previous odfd left it: no dataset_inputs table, migration 8 not applied.
    with sqlite3.connect(root / "catalog.sqlite") as db:
        db.execute("DROP TABLE dataset_inputs")
        db.execute("DELETE FROM schema_migrations WHERE version = 8")
    db.close()
    workspace = await Workspace.open(root)
    try:
        assert await workspace.dataset_inputs.load() == {}
        graph = await workspace.graph()
        d = await workspace.resolve("d")
        assert ids(graph.readers_of(d.id)) == ["e"]
        assert await indexed(workspace) == expected
        order = graph.upstream_order([(await workspace.resolve("e")).id])
        assert [graph.records[i].alias for i in order] == ["a", "d", "e"]
    finally:
        await workspace.close()


async def test_the_graph_names_inputs_missing_here(workspace: Workspace) -> None:
    a = await add(workspace, "a")
    await add(workspace, "d", "a")
    assert a.id is not None
    await workspace.catalog.remove_dataset(a.id)
    graph = await workspace.graph()
    d = await workspace.resolve("d")
    assert graph.inputs_of(d.id) == (a.id,)
    with pytest.raises(DatasetNotFoundError, match=f"dataset {a.id} is not in the workspace"):
        graph.upstream_order([d.id])
    assert graph.upstream_order([d.id], skip_missing=True) == [d.id]
