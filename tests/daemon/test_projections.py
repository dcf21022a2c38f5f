"""``Projection`` resources: the spec's ``latest(...)`` example shape over a real dataset,
queried by name through ``odfd.app.query`` (what ``odfd sql`` and the console's SQL box run),
recomputed when an input moves and never written into the input's chain."""

from __future__ import annotations

from pathlib import Path

from odfd.app.controllers import Reconciler
from odfd.app.node import Node
from odfd.app.projections import with_latest
from odfd.app.query import query
from odfd.app.resource_types import PROJECTION
from odfd.app.resources import RECONCILE_ERROR, apply_manifests, load_manifests
from odfd.config import NodeConfig, SyncConfig
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from tests.verifier.builders import root_with_slices

PROJECTION_YAML = """\
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Projection
headers:
  name: nums.latest
spec:
  inputs:
    - datasetRef: nums
  project:
    kind: Sql
    engine: datafusion
    query: |
      select latest(value) as value, count(*) as records from `nums`
"""


def test_latest_is_the_newest_records_value() -> None:
    assert with_latest("select latest(a), 'latest(b)', latest(f(c, d)) from t") == (
        "select last_value(a ORDER BY \"offset\"), 'latest(b)', "
        'last_value(f(c, d) ORDER BY "offset") from t'
    )


async def test_projection_queried_by_name_and_kept_current(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        path = tmp_path / "p.yaml"
        path.write_text(PROJECTION_YAML)
        await apply_manifests(workspace, load_manifests([path]))
        reconciler = Reconciler(workspace, SyncConfig())
        await reconciler.reconcile_all()
        record = await ResourceTable(workspace.catalog).find(PROJECTION.schema, "nums.latest")
        assert record is not None and record.status["phase"] == "Failed"
        assert record.status["conditions"][RECONCILE_ERROR]["code"] == "missing-input"

        dataset = await root_with_slices(workspace, "nums", [[1, 2], [7]])
        [result] = await reconciler.reconcile_all()
        assert result.phase == "Ready"
        node = Node(workspace, NodeConfig())
        sql = 'select value, records from "nums.latest"'
        assert (await query(node, sql)).to_pylist() == [{"value": 7, "records": 3}]
        blocks_before = [h async for h, _ in dataset.chain.iter_blocks()]

        await root_with_slices(workspace, "other", [[1]])  # unrelated: same result, cached
        assert (await query(node, sql)).to_pylist() == [{"value": 7, "records": 3}]
        cached = sorted((workspace.root / "cache" / "projections").iterdir())
        assert len(cached) == 1

        # joined with the dataset it projects, in one query
        joined = await query(
            node, 'select count(*) as n from nums join "nums.latest" p on nums.value = p.value'
        )
        assert joined.to_pylist() == [{"n": 1}]
        assert [h async for h, _ in dataset.chain.iter_blocks()] == blocks_before

        # the input's head moves (back, here): the projection follows it
        await dataset.chain.reset_to(blocks_before[1], expected_head=blocks_before[0])
        assert (await query(node, sql)).to_pylist() == [{"value": 2, "records": 2}]
