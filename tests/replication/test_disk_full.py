"""Disk full during a pull: the workspace lives on a 3 MB tmpfs and the dataset pulled is bigger.
The pull fails with a clear error, nothing half-written becomes visible (no dataset, no staging
folder, no stray objects), the space is freed, and once there is room the same pull succeeds."""

from __future__ import annotations

import shutil

import pytest

from odfd.sync.pull import PullOptions, pull
from storage.errors import StorageError
from storage.workspace import Workspace
from tests.fixtures.small_fs import SmallFs, grow
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root, verify_integrity


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_pull_into_a_full_disk(
    node_a: Workspace, serve: ServeFactory, small_fs: SmallFs, protocol: str
) -> None:
    await create_root(node_a, "big", slices=5, rows=20_000)  # ~1.1 MB per slice
    server = await serve(node_a)
    mount = small_fs("3m")
    async with await Workspace.init(mount / "b") as node_b:
        used_before = shutil.disk_usage(mount).used
        with pytest.raises(StorageError, match="no space left on device"):
            await pull(node_b, server.url + "big", options=PullOptions(protocol=protocol))
        assert await node_b.list_datasets() == []
        assert sorted(p.name for p in node_b.layout.datasets_dir.iterdir()) == []
        assert shutil.disk_usage(mount).used <= used_before + 256 * 1024  # space freed

        grow(mount, "32m")
        result = await pull(node_b, server.url + "big", options=PullOptions(protocol=protocol))
        assert result.num_objects == 10
        await verify_integrity(await node_b.get_dataset("big"))
