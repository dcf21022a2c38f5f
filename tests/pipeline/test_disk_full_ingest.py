"""Disk full during an ingest (real Spark): the workspace lives on a 1 MB tmpfs and the slice does
not fit. The ingest fails with a clear error, the head does not move, nothing half-written stays
(no staged slice, no stray object), and once there is room the same ingest succeeds."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push
from protocol.errors import OdfError
from storage.stores.localfs import LocalFsObjectStore
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.small_fs import SmallFs, grow
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, rows

pytestmark = pytest.mark.spark

READ = """
kind: NdJson
schema:
  fields:
    - {name: id, type: int64}
    - {name: payload, type: string}
"""


async def test_ingest_into_a_full_disk(small_fs: SmallFs, tmp_path: Path) -> None:
    rng = random.Random(5)
    source = tmp_path / "input.ndjson"
    source.write_text(
        "".join(f'{{"id": {i}, "payload": "{rng.randbytes(40).hex()}"}}\n' for i in range(40_000))
    )
    mount = small_fs("1m")
    async with await Workspace.init(mount / "ws") as workspace:
        dataset = await create(workspace, root_snapshot("big", READ))
        head = await dataset.chain.head()
        used_before = shutil.disk_usage(mount).used
        with pytest.raises(OdfError, match="(?i)no space left on device"):
            await ingest_push(workspace, dataset, source, engines=TEST_ENGINES)
        assert await dataset.chain.head() == head
        assert (await workspace.resolve("big")).head == head
        assert isinstance(dataset.data, LocalFsObjectStore)
        assert [p for p in dataset.data.root.iterdir()] == []
        assert list((workspace.root / "run").glob("*")) == []
        assert shutil.disk_usage(mount).used <= used_before + 64 * 1024  # space freed

        grow(mount, "64m")
        await ingest_push(workspace, dataset, source, engines=TEST_ENGINES)
        assert len(await rows(dataset, "id")) == 40_000
