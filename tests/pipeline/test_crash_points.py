"""SIGKILL of ``odfd ingest`` and of a transform (``odfd pull DERIVATIVE``), real processes on
real Spark, at the narrow windows of a transaction (``storage.crashpoints``): right after the
ingest's head moved (catalog and signature not yet told), and after the transform's data and
checkpoint were stored (no block yet). After each kill the datasets are at valid heads; the
start-up recovery the daemon runs brings the catalog and the signed head in line with the refs;
the interrupted transform then runs to completion and everything verifies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from odfd.app.owner_heartbeat import resign_owned
from odfd.app.recovery import recover_workspace
from odfd.coordinator.transform import update_derivative
from storage.chain import validate_chain
from storage.crashpoints import ENV
from storage.workspace import Workspace
from tests.daemon.processes import REPO
from tests.fixtures.manifests import derivative_snapshot, root_snapshot
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
from tests.pipeline.conftest import create, rows
from verifier.audit import VerifyOptions, verify

pytestmark = [pytest.mark.spark, pytest.mark.slow]

READ = """
kind: NdJson
schema:
  fields:
    - {name: id, type: int64}
"""


def _odfd_killed_at(point: str, root: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "odfd", *args, "--root", str(root)],
        cwd=REPO,
        env={**os.environ, ENV: point},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == -9, f"not killed at {point}: {done.returncode}\n{done.stderr}"


async def _signed_head_matches(workspace: Workspace, alias: str) -> bool:
    """Whether the newest signed head is the dataset's head (``refs/head``)."""
    dataset = await workspace.get_dataset(alias)
    assert dataset.id is not None
    seen = await workspace.signed_heads.get(dataset.id)
    return seen is not None and seen.signed.head == await dataset.chain.head()


async def test_ingest_and_transform_killed_at_crash_points(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    files = []
    for n in range(2):
        path = tmp_path / f"part-{n}.ndjson"
        path.write_text("".join(f'{{"id": {i}}}\n' for i in range(n * 100, n * 100 + 100)))
        files.append(str(path))
    async with await Workspace.init(root) as workspace:
        (root / "config.toml").write_text((root / "config.toml").read_text() + TEST_SPARK_CONFIG)
        nums = await create(workspace, root_snapshot("nums", READ))
        await create(
            workspace,
            derivative_snapshot("doubled", "nums", "SELECT event_time, id * 2 AS id2 FROM nums"),
        )
        seed_head = await nums.chain.head()

    # 1. The second of two ingests dies right after its head move.
    _odfd_killed_at("chain.head-moved:2", root, "ingest", "nums", *files)
    async with await Workspace.open(root) as workspace:
        nums = await workspace.get_dataset("nums")
        head = await nums.chain.head()
        state = await validate_chain(nums.chain, head, data=nums.data, checkpoints=nums.checkpoints)
        assert state.last_offset == 199  # both transactions are in
        assert (await workspace.resolve("nums")).head != head  # the catalog was not told
        assert not await _signed_head_matches(workspace, "nums")  # nor was the signature
        fixes = await recover_workspace(workspace)  # what the daemon runs at start-up
        await resign_owned(workspace)
        assert any("nums" in fix for fix in fixes)
        assert (await workspace.resolve("nums")).head == head
        assert await _signed_head_matches(workspace, "nums")
        assert head != seed_head

    # 2. The transform dies after storing its data and checkpoint, before its block.
    _odfd_killed_at("transaction.objects-stored", root, "pull", "doubled")
    async with await Workspace.open(root) as workspace:
        doubled = await workspace.get_dataset("doubled")
        before = await doubled.chain.head()
        assert (await workspace.resolve("doubled")).head == before  # nothing visible moved
        assert await rows(doubled, "id2") == []
        outcome = await update_derivative(workspace, doubled, engines=TEST_ENGINES)
        assert not outcome.up_to_date, outcome.reason
        assert sorted(v for (v,) in await rows(doubled, "id2")) == [2 * i for i in range(200)]
        assert await _signed_head_matches(workspace, "doubled")
        report = await verify(
            workspace, ["nums", "doubled"], VerifyOptions(integrity_only=True), engines=TEST_ENGINES
        )
        assert report.exit_code == 0, report.dumps(None)
