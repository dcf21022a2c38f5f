"""Two real nodes on loopback: content added on one is fetched by the other over bitswap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.ipfs_client import IpfsClient, IpfsGateway
from tests.fixtures.ipfs import IpfsNodeFactory
from tests.fixtures.ipfs_node import LocalIpfsNode

pytestmark = pytest.mark.ipfs


@pytest.fixture(scope="module")
def second_node(ipfs_node_factory: IpfsNodeFactory) -> LocalIpfsNode:
    return ipfs_node_factory()


async def test_second_node_fetches_a_folder_added_on_the_first(
    ipfs_node: LocalIpfsNode, second_node: LocalIpfsNode, tmp_path: Path
) -> None:
    first = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=30.0)
    second = IpfsClient(second_node.api_multiaddr, fetch_timeout=30.0)
    folder = tmp_path / "dataset"
    (folder / "data").mkdir(parents=True)
    payload = os.urandom(600_000)  # several blocks
    (folder / "data/part.bin").write_bytes(payload)
    (folder / "head").write_bytes(b"f1620" + os.urandom(32).hex().encode())
    root = await first.add_directory(folder)

    await second.swarm_connect(ipfs_node.swarm_multiaddr)
    async with IpfsGateway(second_node.gateway_url, timeout=30.0) as gateway:
        assert await gateway.get_ipfs(root, "head") == (folder / "head").read_bytes()
    assert (
        await second.cat(f"{root}/data/part.bin", offset=300_000, length=10)
        == payload[300_000:300_010]
    )
    await second.pin_add(root)  # needs every block of the tree, so fetches the rest
    assert (await second.pin_ls())[root] == "recursive"
    assert await second.cat(f"{root}/data/part.bin") == payload
