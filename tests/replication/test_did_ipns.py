"""Finding a dataset by its DID alone, over IPNS, between two real IPFS nodes on loopback that
know only each other: the owner publishes under the name derived from the dataset's own key, a
node knowing just the DID pulls and verifies, a mirror keeps the owner's record alive once the
owner's node is gone, and what a resolver serves is checked by odfd (another key's record, an
expired one, one pointing at a folder whose head is not the owner's signed head: refused)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from nacl.signing import SigningKey

from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node
from odfd.app.status import build_status
from odfd.cli.main import main
from odfd.cli.status_text import render_status
from odfd.config import IpfsConfig, NodeConfig
from odfd.sync.did_names import (
    IpnsRecordRefusedError,
    IpnsState,
    is_due,
    read_state,
    republish,
    resolve_did,
)
from odfd.sync.errors import SyncError
from odfd.sync.pull import pull
from odfd.sync.push import push
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.trust import UntrustedHeadError
from protocol.identity import DatasetId
from storage.catalog.mirrors import MirrorTable
from storage.ipfs_client import IpfsClient
from storage.ipfs_settings import IpfsSettings
from storage.ipns_name import ipns_name_of
from storage.ipns_record import IpnsRecordError, encode_record, verify_record
from storage.workspace import Workspace
from tests.fixtures.ipfs import IpfsNodeFactory
from tests.fixtures.ipfs_node import LocalIpfsNode, stop_node
from tests.replication.datagen import create_root, verify_integrity

pytestmark = pytest.mark.ipfs


@pytest.fixture(scope="module")
def dht_nodes(ipfs_node_factory: IpfsNodeFactory) -> Iterator[tuple[LocalIpfsNode, LocalIpfsNode]]:
    """Two DHT-server nodes; the test connects them (and may stop the first)."""
    first = ipfs_node_factory(dht_server=True)
    second = ipfs_node_factory(dht_server=True)
    yield first, second
    stop_node(first)
    stop_node(second)


async def _until_resolvable(ipfs: IpfsSettings, dataset_id: DatasetId) -> None:
    """A freshly connected node adds its peer to its DHT routing table within a moment."""
    for _ in range(50):
        try:
            await resolve_did(ipfs, dataset_id)
            return
        except SyncError:
            await asyncio.sleep(0.2)
    await resolve_did(ipfs, dataset_id)


async def test_pull_by_did_and_a_mirror_keeps_it_reachable(
    dht_nodes: tuple[LocalIpfsNode, LocalIpfsNode],
    node_a: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node_1, node_2 = dht_nodes
    via_1 = TransportSettings(ipfs=node_1.settings())
    via_2 = TransportSettings(ipfs=node_2.settings())
    await IpfsClient(node_2.api_multiaddr).swarm_connect(node_1.swarm_multiaddr)

    await create_root(node_a, "cities", slices=2)
    owner = await node_a.resolve("cities")
    did = str(owner.id)
    pushed = await push(node_a, "cities", "ipns://", settings=via_1)
    name = ipns_name_of(owner.id)
    assert pushed.remote == f"ipns://{name}"
    keys = await IpfsClient(node_1.api_multiaddr).key_list()
    assert name in {key.id for key in keys}  # the dataset's own key, imported into the node

    # Node 2's workspace knows only the DID: `odfd pull did:odf:…`.
    await _until_resolvable(via_2.ipfs, owner.id)
    async with await Workspace.init(tmp_path / "b"):
        pass
    monkeypatch.setenv("ODFD_IPFS_API", node_2.api_multiaddr)
    monkeypatch.setenv("ODFD_IPFS_GATEWAY", node_2.gateway_url)
    assert await asyncio.to_thread(main, ["pull", did, "--root", str(tmp_path / "b")]) == 0
    async with await Workspace.open(tmp_path / "b") as node_b:
        pulled = await node_b.resolve(owner.id.to_multibase())
        assert pulled.id == owner.id and pulled.head == owner.head
        await verify_integrity(await node_b.get_dataset(pulled.alias))
        assert await node_b.signed_heads.get(owner.id) is not None  # the owner's, verified

    # C mirrors the DID through node 2; its daemon's sync republishes the owner's record.
    config = NodeConfig(
        ipfs=IpfsConfig(api=node_2.api_multiaddr, gateway=node_2.gateway_url, pin=True)
    )
    async with (
        await Workspace.init(tmp_path / "c") as node_c,
        aiohttp.ClientSession() as session,
    ):
        mirror = await MirrorTable(node_c.catalog).add("cities", did, [], 60.0)
        report = await MirrorSyncer(Node(node_c, config), session).sync(mirror)
        assert report.attempt.outcome == "updated", report.attempt.error
        status = await build_status(node_c)
        ipns = status["datasets"][0]["ipns"]
        assert ipns["name"] == str(name) and ipns["lastRepublished"] is not None
        assert f"ipns {name}, republished {ipns['lastRepublished']}" in render_status(status)

    # The owner's node goes away; a fourth workspace still finds the dataset by its DID.
    stop_node(node_1)
    async with await Workspace.init(tmp_path / "d") as node_d:
        result = await pull(node_d, did, alias="cities", settings=via_2)
        assert result.new_head == owner.head and result.trust == "signed"
        await verify_integrity(await node_d.get_dataset("cities"))


# --- what a resolver serves is checked by odfd -------------------------------------------


@pytest.fixture
async def lying_node() -> AsyncIterator[tuple[IpfsSettings, dict[str, bytes]]]:
    """An IPFS RPC API that answers ``routing/get`` with whatever record the test puts in."""
    served: dict[str, bytes] = {}

    async def routing_get(request: web.Request) -> web.Response:
        import base64

        event = {"Type": 5, "Extra": base64.b64encode(served["record"]).decode()}
        return web.Response(text=json.dumps(event) + "\n", content_type="application/json")

    app = web.Application()
    app.router.add_post("/api/v0/routing/get", routing_get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield (
        IpfsSettings(api=f"/ip4/127.0.0.1/tcp/{port}/http", gateway=f"http://127.0.0.1:{port}"),
        served,
    )
    await runner.cleanup()


def _owner() -> tuple[SigningKey, DatasetId]:
    key = SigningKey.generate()
    return key, DatasetId(bytes(key.verify_key))


CID = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"


async def test_record_signed_by_another_key_is_refused(
    lying_node: tuple[IpfsSettings, dict[str, bytes]],
) -> None:
    ipfs, served = lying_node
    _, owner = _owner()
    impostor, _ = _owner()
    later = datetime.now(UTC) + timedelta(days=1)
    served["record"] = encode_record(bytes(impostor), f"/ipfs/{CID}", later, 1, 0)
    with pytest.raises(IpnsRecordRefusedError) as refused:
        await resolve_did(ipfs, owner)
    assert str(refused.value) == (
        f"{owner}: refused: IPNS record for {ipns_name_of(owner)} is not signed by {owner} "
        "(signed by another key)"
    )


async def test_expired_record_is_refused(lying_node: tuple[IpfsSettings, dict[str, bytes]]) -> None:
    ipfs, served = lying_node
    key, owner = _owner()
    expired = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    served["record"] = encode_record(bytes(key), f"/ipfs/{CID}", expired, 7, 0)
    with pytest.raises(IpnsRecordRefusedError) as refused:
        await resolve_did(ipfs, owner)
    assert str(refused.value) == (
        f"{owner}: refused: IPNS record for {ipns_name_of(owner)} expired at "
        "2025-01-02T03:04:05+00:00"
    )


async def test_valid_record_is_read_from_its_signed_data() -> None:
    key, owner = _owner()
    later = datetime.now(UTC) + timedelta(hours=5)
    record = verify_record(encode_record(bytes(key), f"/ipfs/{CID}", later, 9, 42), owner)
    assert (record.value, record.sequence, record.ttl_ns) == (f"/ipfs/{CID}", 9, 42)
    assert abs((record.validity - later).total_seconds()) < 1e-3
    tampered = bytearray(encode_record(bytes(key), f"/ipfs/{CID}", later, 9, 42))
    tampered[-3] ^= 1  # inside the signed data
    with pytest.raises(IpnsRecordError, match="not signed by"):
        verify_record(bytes(tampered), owner)
    with pytest.raises(IpnsRecordError, match="no V2 signature"):
        verify_record(b"\x0a\x02ab", owner)


@pytest.mark.parametrize("folder_holds", ["unsigned copy", "another dataset"])
async def test_record_pointing_at_a_folder_without_the_owners_signed_head_is_refused(
    ipfs_node: LocalIpfsNode,
    node_a: Workspace,
    node_b: Workspace,
    tmp_path: Path,
    lying_node: tuple[IpfsSettings, dict[str, bytes]],
    folder_holds: str,
) -> None:
    """The owner's key signs the record (leaked, or a tool published a stale copy), but the
    folder it names does not carry the owner's signed head: the pull stops there."""
    ipfs, served = lying_node
    await create_root(node_a, "cities", slices=1)
    await create_root(node_a, "other", slices=1, seed=2)
    owner = await node_a.resolve("cities")
    shown = owner if folder_holds == "unsigned copy" else await node_a.resolve("other")
    folder = tmp_path / "copy"
    shutil.copytree(node_a.layout.dataset(shown.id).root, folder)
    if folder_holds == "unsigned copy":
        (folder / "refs/head.sig").unlink()
    cid = await IpfsClient(ipfs_node.api_multiaddr).add_directory(folder, exclude=("info",))
    key = node_a.keys.load(owner.id)
    assert key is not None
    later = datetime.now(UTC) + timedelta(days=1)
    served["record"] = encode_record(bytes(key), f"/ipfs/{cid}", later, 3, 0)
    via = TransportSettings(ipfs=IpfsSettings(api=ipfs.api, gateway=ipfs_node.gateway_url))
    with pytest.raises(UntrustedHeadError) as refused:
        await pull(node_b, str(owner.id), alias="cities", settings=via)
    message = str(refused.value)
    assert "\n" not in message
    if folder_holds == "unsigned copy":
        assert "serves no signed head, but a dataset found by its DID" in message
    else:
        assert f"signed by {shown.id}, not by the dataset's own key {owner.id}" in message
    assert await node_b.list_datasets() == []


def test_republishing_is_due_after_the_interval() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    name = "k51qzi5uqu5dlosmrhdr8tu8pt9tase6gwavao8buoxh8fawjdbpzh0dgnyheq"
    assert is_due(IpnsState(name, None), 3600.0, now)
    assert not is_due(IpnsState(name, now - timedelta(minutes=59)), 3600.0, now)
    assert is_due(IpnsState(name, now - timedelta(minutes=60)), 3600.0, now)


def test_a_dataset_ipns_name_is_its_did_key_as_a_peer_id() -> None:
    key = SigningKey(bytes(range(32)))
    dataset_id = DatasetId(bytes(key.verify_key))
    name = ipns_name_of(dataset_id)
    # identity multihash of the libp2p PublicKey protobuf {Type: Ed25519, Data: key}
    assert name.key_multihash == b"\x00\x24\x08\x01\x12\x20" + dataset_id.public_key
    assert name.peer_id.startswith("12D3KooW") and str(name).startswith("k51")


async def test_a_mirror_republishes_the_record_it_kept_and_never_an_expired_one(
    ipfs_node: LocalIpfsNode, node_a: Workspace
) -> None:
    """The IPFS node's routing has no record under the name (its peers forgot it, or it has
    none): the owner's record the mirror kept is what it puts back; an expired one it refuses."""
    await create_root(node_a, "cities", slices=1)
    owner = await node_a.resolve("cities")
    key = node_a.keys.load(owner.id)
    assert key is not None
    dataset = node_a.open_dataset(owner.id)
    folder = node_a.layout.dataset(owner.id).root
    cid = await IpfsClient(ipfs_node.api_multiaddr).add_directory(folder, exclude=("info",))
    expired = datetime.now(UTC) - timedelta(seconds=1)
    await dataset.info.set("ipns-record", encode_record(bytes(key), f"/ipfs/{cid}", expired, 3, 0))
    with pytest.raises(IpnsRecordRefusedError, match="no valid IPNS record of its owner"):
        await republish(ipfs_node.settings(), owner.id, dataset)
    assert (await read_state(dataset, owner.id)).republished is None

    later = datetime.now(UTC) + timedelta(days=1)
    await dataset.info.set("ipns-record", encode_record(bytes(key), f"/ipfs/{cid}", later, 4, 0))
    record = await republish(ipfs_node.settings(), owner.id, dataset)
    assert (record.value, record.sequence) == (f"/ipfs/{cid}", 4)
    assert (await read_state(dataset, owner.id)).republished is not None
