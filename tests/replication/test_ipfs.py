"""Publishing to IPFS and pulling from it, against a real IPFS node (js-ipfs on loopback).

Push adds the dataset folder as UnixFS (CIDv1, raw leaves, ``info/`` left out, as the reference
publishes it) and points a per-dataset IPNS key at it; ``ipns://`` and ``ipfs://`` pulls read it
through the gateway, verifying everything.
"""

from __future__ import annotations

import shutil
import socket

import pytest

import storage.stores.ipfs as ipfs_stores
from odfd.sync.errors import CorruptSourceError, UnsupportedUrlError
from odfd.sync.pull import pull
from odfd.sync.push import push
from odfd.sync.transport.ipns_push import IPNS_KEY_PREFIX
from odfd.sync.transport.settings import TransportSettings
from protocol.identity import Multihash
from protocol.transfer.simple import ObjectKind
from storage.ipfs_client import IpfsClient, IpfsGateway, IpfsUnavailableError, IpnsName
from storage.ipfs_settings import IpfsSettings
from storage.layout import dataset_dir_name
from storage.stores.ipfs import LIST_AFTER, IpfsObjectStore
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


async def _published_copy(node: Workspace, alias: str, tmp_path, ipfs: IpfsClient, spoil: str):
    """The dataset's folder copied, one ``spoil`` (``"blocks"``/``"data"``) file's bytes changed
    (its name kept), added to IPFS: a publisher serving bytes its names do not match."""
    record = await node.resolve(alias)
    folder = tmp_path / "published"
    shutil.copytree(node.layout.dataset(record.id).root, folder)
    if spoil:
        victim = max((folder / spoil).iterdir())
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0x01
        victim.write_bytes(bytes(data))
    return record, await ipfs.add_directory(folder, exclude=("info",))


async def test_long_chain_is_pulled_by_listing_and_one_export(
    node_a: Workspace,
    node_b: Workspace,
    tmp_path,
    use_ipfs: IpfsClient,
    via: TransportSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More blocks and files than ``LIST_AFTER``, pulled into an empty dataset: the blocks and
    data files come from one ``dag/export`` of each folder started at once (none is read
    through the gateway), the checkpoints from one export after the first reads by path; the
    root is listed once for all of them, no folder is listed, all verified. A later pull of a
    few new blocks reads them by path and exports nothing; one of more than ``LIST_AFTER``
    reads the head by path, then the blocks from one export."""
    writer = await create_root(node_a, "long", slices=LIST_AFTER + 4, empty_blocks=1)
    record, cid = await _published_copy(node_a, "long", tmp_path, use_ipfs, spoil="")
    exports: list[str] = []
    listed: list[str] = []
    read: list[str] = []
    real_export, real_ls = IpfsClient.export_raw_blocks, IpfsClient.ls_names
    real_read = IpfsGateway.iter_chunks

    async def counted(self: IpfsClient, folder, **options) -> dict[bytes, bytes]:
        exports.append(str(folder))
        return await real_export(self, folder, **options)

    async def counted_ls(self: IpfsClient, path) -> dict[str, str]:
        listed.append(str(path))
        return await real_ls(self, path)

    def counted_read(self: IpfsGateway, path: str, **options):
        read.append(path.split("/")[3])  # /ipfs/<cid>/<kind>/...
        return real_read(self, path, **options)

    monkeypatch.setattr(IpfsClient, "export_raw_blocks", counted)
    monkeypatch.setattr(IpfsClient, "ls_names", counted_ls)
    monkeypatch.setattr(IpfsGateway, "iter_chunks", counted_read)
    pulled = await pull(node_b, f"ipfs://{cid}", alias="long", settings=via)
    assert pulled.new_head == record.head and pulled.num_blocks == 2 * (LIST_AFTER + 4) + 2
    folders = await real_ls(use_ipfs, cid)
    assert sorted(exports) == sorted(folders[kind] for kind in ("blocks", "data", "checkpoints"))
    assert listed == [f"/ipfs/{cid}"]  # one listing of the root for every store
    assert sorted(set(read)) == ["checkpoints", "refs"]  # head, its signature, 16 checkpoints
    await verify_integrity(await node_b.get_dataset("long"))

    head = await writer.append(slices=1)
    _, cid = await _published_copy(node_a, "long", tmp_path / "2", use_ipfs, spoil="")
    exports.clear()
    read.clear()
    again = await pull(node_b, f"ipfs://{cid}", alias="long", settings=via)
    assert (again.num_blocks, again.num_objects, again.new_head) == (1, 2, head)
    assert exports == [] and sorted(set(read)) == ["blocks", "checkpoints", "data", "refs"]
    await verify_integrity(await node_b.get_dataset("long"))

    head = await writer.append(slices=1, empty_blocks=LIST_AFTER + 1)
    _, cid = await _published_copy(node_a, "long", tmp_path / "3", use_ipfs, spoil="")
    exports.clear()
    read.clear()
    longer = await pull(node_b, f"ipfs://{cid}", alias="long", settings=via)
    assert (longer.num_blocks, longer.new_head) == (LIST_AFTER + 2, head)
    folders = await real_ls(use_ipfs, cid)
    assert exports == [folders["blocks"]]  # started once the head said how far the walk goes
    assert read.count("blocks") == 1  # the head alone
    await verify_integrity(await node_b.get_dataset("long"))


async def test_data_files_of_several_chunks_are_read_by_cid(
    use_ipfs: IpfsClient, ipfs_gateway: IpfsGateway, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data folder whose files do not all fit one chunk (256 KiB): the export stops at the
    first such file, which is read by CID from one listing of the folder; every file's bytes are
    the file's, whatever the order asked."""
    folder = tmp_path / "published"
    (folder / "data").mkdir(parents=True)
    contents = [bytes([n]) * size for n, size in enumerate([10, 300_000, 20, 1_000_000, 30])]
    hashes = [Multihash.from_digest_sha3_256(data) for data in contents]
    for hash, data in zip(hashes, contents, strict=True):
        (folder / "data" / hash.to_multibase()).write_bytes(data)
    cid = await use_ipfs.add_directory(folder)
    monkeypatch.setattr(ipfs_stores, "LIST_AFTER", 0)
    listed: list[str] = []
    real_ls = IpfsClient.ls_names

    async def counted_ls(self: IpfsClient, path) -> dict[str, str]:
        listed.append(str(path))
        return await real_ls(self, path)

    monkeypatch.setattr(IpfsClient, "ls_names", counted_ls)
    store = IpfsObjectStore(ipfs_gateway, cid, ObjectKind.DATA, rpc=use_ipfs)
    try:
        for hash, data in reversed(list(zip(hashes, contents, strict=True))):
            assert b"".join([chunk async for chunk in store.iter_chunks(hash)]) == data
        missing = Multihash.from_digest_sha3_256(b"not published")
        assert not await store.contains(missing)
    finally:
        await store.aclose()
    assert len(listed) == 2  # the root, then the data folder once


async def test_exported_blocks_need_no_gateway(
    node_a: Workspace, use_ipfs: IpfsClient, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once listed, every block is served from the export alone (the gateway here is dead)."""
    await create_root(node_a, "long", slices=3)
    record, cid = await _published_copy(node_a, "long", tmp_path, use_ipfs, spoil="")
    monkeypatch.setattr(ipfs_stores, "LIST_AFTER", 0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    async with IpfsGateway(dead) as gateway:
        blocks = IpfsObjectStore(gateway, cid, ObjectKind.BLOCK, rpc=use_ipfs)
        names = sorted((tmp_path / "published/blocks").iterdir())
        for path in names:
            hash = Multihash.from_multibase(path.name)
            assert await blocks.get_bytes(hash) == path.read_bytes()
        await blocks.aclose()


@pytest.mark.parametrize("spoil", ["blocks", "data"])
async def test_corrupt_object_from_ipfs_is_refused_and_nothing_committed(
    node_a: Workspace,
    node_b: Workspace,
    tmp_path,
    use_ipfs: IpfsClient,
    via: TransportSettings,
    spoil: str,
) -> None:
    """A published folder with one block's or data file's bytes changed (long enough to be read
    by listing and export): the pull fails naming the remote and leaves node B without it."""
    await create_root(node_a, "long", slices=LIST_AFTER + 4)
    _, cid = await _published_copy(node_a, "long", tmp_path, use_ipfs, spoil=spoil)
    with pytest.raises(CorruptSourceError, match=str(cid)):
        await pull(node_b, f"ipfs://{cid}", alias="long", settings=via)
    assert await node_b.list_datasets() == []
    assert not any(node_b.layout.datasets_dir.iterdir())


async def test_data_file_exported_but_named_by_no_block_is_not_kept(
    node_a: Workspace, node_b: Workspace, tmp_path, use_ipfs: IpfsClient, via: TransportSettings
) -> None:
    """The ``data/`` export brings every file of the folder, staged while the blocks export:
    one that no block names (here a file named by its own hash, so it passes the hash check)
    is dropped before naming, and nothing is left in staging."""
    await create_root(node_a, "cities", slices=3)
    record, _ = await _published_copy(node_a, "cities", tmp_path, use_ipfs, spoil="")
    folder = tmp_path / "published"
    stray = b"a file of the folder that no block names" * 100
    stray_hash = Multihash.from_digest_sha3_256(stray)
    (folder / "data" / stray_hash.to_multibase()).write_bytes(stray)
    cid = await use_ipfs.add_directory(folder, exclude=("info",))
    pulled = await pull(node_b, f"ipfs://{cid}", alias="cities", settings=via)
    assert pulled.new_head == record.head and pulled.num_objects == 6  # 3 data, 3 checkpoints
    data = node_b.layout.dataset(record.id).root / "data"
    assert sorted(p.name for p in data.iterdir()) == sorted(
        p.name for p in (folder / "data").iterdir() if p.name != stray_hash.to_multibase()
    )
    assert not [p for p in node_b.layout.root.joinpath("staging").rglob("*") if p.is_file()]
    await verify_integrity(await node_b.get_dataset("cities"))


async def test_corrupt_data_file_from_the_export_is_refused_by_name(
    node_a: Workspace, node_b: Workspace, tmp_path, use_ipfs: IpfsClient, via: TransportSettings
) -> None:
    """A data file whose bytes do not match its name: the export brings it under the hash of
    its bytes, so the block's file is read by name and refused, the error naming it."""
    await create_root(node_a, "cities", slices=3)
    _, cid = await _published_copy(node_a, "cities", tmp_path, use_ipfs, spoil="data")
    victim = max((tmp_path / "published" / "data").iterdir()).name
    with pytest.raises(CorruptSourceError, match=f"data/{victim} arrived with bytes that hash"):
        await pull(node_b, f"ipfs://{cid}", alias="cities", settings=via)
    assert await node_b.list_datasets() == []
    assert not any(node_b.layout.datasets_dir.iterdir())
