"""Publishing to IPFS and pulling from it, against a real IPFS node (js-ipfs on loopback).

Push adds the dataset folder as UnixFS (CIDv1, raw leaves, ``info/`` left out, as the reference
publishes it) and points a per-dataset IPNS key at it; ``ipns://`` and ``ipfs://`` pulls read it
through the gateway, verifying everything.
"""

from __future__ import annotations

import socket

import pytest

from odfd.sync.errors import UnsupportedUrlError
from odfd.sync.pull import pull
from odfd.sync.push import push
from odfd.sync.transport.ipns_push import IPNS_KEY_PREFIX
from odfd.sync.transport.settings import TransportSettings
from storage.ipfs_client import IpfsClient, IpfsUnavailableError, IpnsName
from storage.ipfs_settings import IpfsSettings
from storage.layout import dataset_dir_name
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import LocalIpfsNode
from tests.replication.datagen import create_root, odfd_verify_integrity, verify_integrity

pytestmark = pytest.mark.ipfs


@pytest.fixture
def use_ipfs(ipfs_node: LocalIpfsNode) -> IpfsClient:
    return IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)


@pytest.fixture
def via(ipfs_node: LocalIpfsNode) -> TransportSettings:
    """Pulls and pushes through the test's IPFS node."""
    return TransportSettings(ipfs=ipfs_node.settings())


async def test_push_to_ipns_then_pull_by_ipns_and_ipfs(
    node_a: Workspace, node_b: Workspace, tmp_path, use_ipfs: IpfsClient, via: TransportSettings
) -> None:
    writer = await create_root(node_a, "cities", slices=3)
    record = await node_a.resolve("cities")
    pushed = await push(node_a, "cities", "ipns://", settings=via)
    assert pushed.num_blocks == 5 and pushed.remote.startswith("ipns://k51")
    key_name = f"{IPNS_KEY_PREFIX}{dataset_dir_name(record.id)}"
    key = {k.name: k for k in await use_ipfs.key_list()}[key_name]
    assert pushed.remote == f"ipns://{key.id}"
    cid = await use_ipfs.name_resolve(key.id)
    dataset_dir = node_a.layout.dataset(record.id).root
    assert cid == await use_ipfs.add_directory(dataset_dir, exclude=("info",), only_hash=True)
    assert {link.name for link in await use_ipfs.ls(cid)} == {
        "blocks",
        "checkpoints",
        "data",
        "refs",
    }

    by_name = await pull(node_b, pushed.remote, alias="cities", settings=via)
    assert (
        by_name.protocol == "simple"
        and by_name.new_head == record.head
        and by_name.num_objects == 6
    )
    await verify_integrity(await node_b.get_dataset("cities"))
    await odfd_verify_integrity(node_b, "cities")

    async with await Workspace.init(tmp_path / "node-c") as node_c:
        by_cid = await pull(node_c, f"ipfs://{cid}", alias="snapshot", settings=via)
        assert by_cid.new_head == record.head
        await verify_integrity(await node_c.get_dataset("snapshot"))
        await odfd_verify_integrity(node_c, "snapshot")

    head = await writer.append(slices=1)
    again = await push(node_a, "cities", pushed.remote, settings=via)
    assert again.num_blocks == 1 and again.old_remote_head == record.head
    incremental = await pull(node_b, pushed.remote, alias="cities", settings=via)
    assert (incremental.num_blocks, incremental.num_objects, incremental.new_head) == (1, 2, head)
    assert IpnsName.parse(pushed.remote.removeprefix("ipns://")) == key.id


async def test_ipfs_url_cannot_be_pushed_to(node_a: Workspace, via: TransportSettings) -> None:
    await create_root(node_a, "cities", slices=0)
    with pytest.raises(UnsupportedUrlError, match="ipns://"):
        await push(
            node_a,
            "cities",
            "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
            settings=via,
        )


async def test_unreachable_ipfs_node_fails_clearly(node_a: Workspace, node_b: Workspace) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = IpfsSettings(api=f"/ip4/127.0.0.1/tcp/{port}/http", gateway=f"http://127.0.0.1:{port}")
    via = TransportSettings(ipfs=dead)
    await create_root(node_a, "cities", slices=1)
    head = (await node_a.resolve("cities")).head
    with pytest.raises(IpfsUnavailableError, match=str(port)):
        await push(node_a, "cities", "ipns://", settings=via)
    with pytest.raises(IpfsUnavailableError, match=str(port)):
        await pull(
            node_b,
            "ipns://k51qzi5uqu5dlosmrhdr8tu8pt9tase6gwavao8buoxh8fawjdbpzh0dgnyheq",
            alias="x",
            settings=via,
        )
    assert (await node_a.resolve("cities")).head == head
    assert await node_b.list_datasets() == []
    assert await node_a.catalog.remote_aliases((await node_a.resolve("cities")).id, "push") == []
