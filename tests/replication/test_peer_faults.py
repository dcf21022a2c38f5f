"""Peers and IPFS nodes that die: a serving node killed with SIGKILL in the middle of a pull, and
the IPFS node going away and coming back. Each time the puller reports a clear, typed error,
commits nothing, keeps what it verified, and completes once the peer is back."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfd.sync.progress import Progress
from odfd.sync.pull import PullOptions, pull
from odfd.sync.push import push
from odfd.sync.transport.settings import TransportSettings
from storage.ipfs_client import IpfsUnavailableError
from storage.stores.remote import RemoteUnavailableError
from storage.workspace import Workspace
from tests.daemon.processes import ServeProcess
from tests.fixtures.ipfs_node import start_node, stop_node
from tests.replication.datagen import create_root, verify_integrity


class _KillAfter(Progress):
    """Kills the serving peer once ``n`` objects have arrived."""

    def __init__(self, server: ServeProcess, n: int) -> None:
        super().__init__("pull", enabled=False)
        self.server, self.n = server, n

    def object_done(self, *args: object) -> None:
        super().object_done(*args)
        if self.objects == self.n:
            self.server.kill()


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_peer_killed_mid_transfer_then_back(
    node_a: Workspace, node_b: Workspace, protocol: str
) -> None:
    await create_root(node_a, "cities", slices=8, rows=2000)  # 16 objects
    server = ServeProcess(node_a.root).start()
    url = f"{server.url}cities"
    options = PullOptions(protocol=protocol, parallel=1)
    try:
        with pytest.raises(RemoteUnavailableError):
            await pull(node_b, url, options=options, progress=_KillAfter(server, 5))
        assert await node_b.list_datasets() == []  # nothing committed
        server.start()
        result = await pull(node_b, url, options=options)
        assert result.resumed_objects >= 4 and result.num_objects <= 12
        assert result.trust == "signed"
        await verify_integrity(await node_b.get_dataset("cities"))
        assert (await node_b.resolve("cities")).head == (await node_a.resolve("cities")).head
    finally:
        server.kill()


@pytest.mark.ipfs
async def test_ipfs_node_dies_and_returns(
    node_a: Workspace, node_b: Workspace, tmp_path: Path
) -> None:
    node = start_node(tmp_path / "ipfs", die_with_parent=True)
    try:
        via = TransportSettings(ipfs=node.settings())
        writer = await create_root(node_a, "cities", slices=2)
        pushed = await push(node_a, "cities", "ipns://", settings=via)
        stop_node(node)

        with pytest.raises(IpfsUnavailableError, match="127.0.0.1"):
            await pull(node_b, pushed.remote, alias="cities", settings=via)
        assert await node_b.list_datasets() == []
        await writer.append(slices=1)
        with pytest.raises(IpfsUnavailableError):
            await push(node_a, "cities", "ipns://", settings=via)

        node = start_node(tmp_path / "ipfs", die_with_parent=True)  # same repo: same keys
        via = TransportSettings(ipfs=node.settings())
        again = await push(node_a, "cities", "ipns://", settings=via)
        assert again.remote == pushed.remote  # the dataset's IPNS name survived the restart
        result = await pull(node_b, pushed.remote, alias="cities", settings=via)
        assert result.trust == "signed"
        assert (await node_b.resolve("cities")).head == (await node_a.resolve("cities")).head
        await verify_integrity(await node_b.get_dataset("cities"))
    finally:
        stop_node(node)
