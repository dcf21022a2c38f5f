"""IpfsClient and IpfsGateway against the real node of the test session.

Expected CIDs are computed here from the dag-pb and UnixFS specifications (raw leaves, 256 KiB
chunks, balanced file layout), independently of any IPFS implementation.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from multiformats import CID, multihash, varint

from storage.ipfs_client import (
    IpfsClient,
    IpfsGateway,
    IpfsNotFoundError,
    IpfsTimeoutError,
    IpfsUnavailableError,
)
from tests.fixtures.ipfs_node import LocalIpfsNode

pytestmark = pytest.mark.ipfs

CHUNK = 256 * 1024
BIG_FILE_SIZE = 2 * CHUNK + 12345  # three chunks: a file node linking three raw leaves


# --- an independent UnixFS/dag-pb encoder ------------------------------------------------------


def _field(number: int, payload: bytes) -> bytes:
    return varint.encode(number << 3 | 2) + varint.encode(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return varint.encode(number << 3) + varint.encode(value)


def _pb_node(links: list[tuple[str, CID, int]], data: bytes) -> bytes:
    """dag-pb PBNode: links (field 2: Hash 1, Name 2, Tsize 3), then Data (field 1)."""
    encoded = b"".join(
        _field(2, _field(1, bytes(cid)) + _field(2, name.encode()) + _varint_field(3, tsize))
        for name, cid, tsize in links
    )
    return encoded + _field(1, data)


def _dag_pb_cid(block: bytes) -> CID:
    return CID("base32", 1, "dag-pb", multihash.digest(block, "sha2-256"))


def _raw_cid(data: bytes) -> CID:
    return CID("base32", 1, "raw", multihash.digest(data, "sha2-256"))


def _expected_file(data: bytes) -> tuple[CID, int]:
    """(CID, cumulative DAG size) of a file: one raw leaf, or a UnixFS File node over the chunks."""
    if len(data) <= CHUNK:
        return _raw_cid(data), len(data)
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    unixfs = _varint_field(1, 2) + _varint_field(3, len(data))  # Type=File, filesize
    unixfs += b"".join(_varint_field(4, len(chunk)) for chunk in chunks)  # blocksizes
    node = _pb_node([("", _raw_cid(chunk), len(chunk)) for chunk in chunks], unixfs)
    return _dag_pb_cid(node), len(node) + len(data)


def _expected_dir(path: Path, skip: set[str]) -> tuple[CID, int]:
    """(CID, cumulative DAG size) of a UnixFS Directory; links sorted by name bytes."""
    links = []
    for entry in sorted(path.iterdir(), key=lambda p: p.name.encode()):
        if entry.name.startswith(".") or entry.name in skip:
            continue
        cid, tsize = (
            _expected_dir(entry, set()) if entry.is_dir() else _expected_file(entry.read_bytes())
        )
        links.append((entry.name, cid, tsize))
    node = _pb_node(links, _varint_field(1, 1))  # Type=Directory
    return _dag_pb_cid(node), len(node) + sum(tsize for _, _, tsize in links)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset-like folder: nested files, an empty folder, a big file, a dot-file, an `info/`."""
    root = tmp_path_factory.mktemp("tree") / "dataset"
    (root / "blocks").mkdir(parents=True)
    (root / "data/part").mkdir(parents=True)
    (root / "checkpoints").mkdir()
    (root / "info").mkdir()
    (root / "refs").mkdir()
    (root / "refs/head").write_bytes(b"f1620" + b"ab" * 32)
    (root / "blocks/f1620aa").write_bytes(b"block one")
    (root / "blocks/f1620bb").write_bytes(b"block two, a little longer")
    (root / "data/part/big.bin").write_bytes(os.urandom(BIG_FILE_SIZE))
    (root / "info/alias").write_bytes(b"acme/trades")
    (root / "blocks/.pending-1234").write_bytes(b"half-written")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def added_root(tree: Path, ipfs_node: LocalIpfsNode) -> CID:
    return await IpfsClient(ipfs_node.api_multiaddr).add_directory(tree, exclude=["info"])


# --- tests -------------------------------------------------------------------------------------


async def test_added_folder_has_the_cid_the_unixfs_spec_gives(tree: Path, added_root: CID) -> None:
    expected, _ = _expected_dir(tree, skip={"info"})
    assert added_root == expected
    assert str(added_root) == str(expected)  # normalised to base32 though js-ipfs answers base58


async def test_only_hash_gives_the_same_cid(
    ipfs_client: IpfsClient, tree: Path, added_root: CID
) -> None:
    assert await ipfs_client.add_directory(tree, exclude=["info"], only_hash=True) == added_root


async def test_excluded_and_hidden_paths_are_left_out(
    ipfs_client: IpfsClient, tree: Path, added_root: CID
) -> None:
    top = {link.name: link for link in await ipfs_client.ls(added_root)}
    assert sorted(top) == ["blocks", "checkpoints", "data", "refs"]
    assert all(link.is_directory for link in top.values())
    blocks = await ipfs_client.ls(f"{added_root}/blocks")
    assert [(b.name, b.size, b.is_directory) for b in blocks] == [
        ("f1620aa", 9, False),
        ("f1620bb", 26, False),
    ]
    with_hidden = await ipfs_client.add_directory(tree, include_hidden=True, only_hash=True)
    assert with_hidden != await ipfs_client.add_directory(tree, only_hash=True)


async def test_cat_reads_whole_files_and_ranges(
    ipfs_client: IpfsClient, tree: Path, added_root: CID
) -> None:
    big = (tree / "data/part/big.bin").read_bytes()
    assert await ipfs_client.cat(f"{added_root}/blocks/f1620bb") == b"block two, a little longer"
    assert await ipfs_client.cat(f"{added_root}/data/part/big.bin") == big
    assert await ipfs_client.cat(f"/ipfs/{added_root}/blocks/f1620bb", offset=6, length=3) == b"two"
    span = await ipfs_client.cat(
        f"{added_root}/data/part/big.bin", offset=CHUNK - 10, length=CHUNK + 20
    )
    assert span == big[CHUNK - 10 : 2 * CHUNK + 10]


async def test_concurrent_calls_each_get_their_own_answer(
    ipfs_client: IpfsClient, added_root: CID
) -> None:
    paths = [
        f"{added_root}/blocks/f1620aa",
        f"{added_root}/blocks/f1620bb",
        f"{added_root}/refs/head",
    ] * 4
    answers = await asyncio.gather(*(ipfs_client.cat(path) for path in paths))
    assert answers == [b"block one", b"block two, a little longer", b"f1620" + b"ab" * 32] * 4


async def test_cat_of_missing_path_is_not_found(ipfs_client: IpfsClient, added_root: CID) -> None:
    with pytest.raises(IpfsNotFoundError, match="blocks/nope"):
        await ipfs_client.cat(f"{added_root}/blocks/nope")


async def test_cat_of_content_no_peer_has_times_out_on_the_node(ipfs_node: LocalIpfsNode) -> None:
    client = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=1.5)
    nowhere = _raw_cid(uuid.uuid4().bytes)
    with pytest.raises(IpfsTimeoutError, match=str(nowhere)):
        await client.cat(nowhere)


async def test_add_bytes_gives_the_raw_leaf_cid(ipfs_client: IpfsClient) -> None:
    data = b"odfd " + uuid.uuid4().bytes
    cid = await ipfs_client.add_bytes(data)
    assert cid == _raw_cid(data)
    assert cid.digest == multihash.wrap(hashlib.sha256(data).digest(), "sha2-256")
    assert await ipfs_client.cat(cid) == data


async def test_gateway_reads_files_and_ranges(
    ipfs_gateway: IpfsGateway, tree: Path, added_root: CID
) -> None:
    big = (tree / "data/part/big.bin").read_bytes()
    assert await ipfs_gateway.get_ipfs(added_root, "refs/head") == (tree / "refs/head").read_bytes()
    assert await ipfs_gateway.get(f"/ipfs/{added_root}/blocks/f1620aa", offset=6) == b"one"
    assert (
        await ipfs_gateway.get_ipfs(added_root, "data/part/big.bin", offset=CHUNK + 1, length=5)
        == (big[CHUNK + 1 : CHUNK + 6])
    )
    chunks = [
        c
        async for c in ipfs_gateway.iter_chunks(
            f"/ipfs/{added_root}/data/part/big.bin", chunk_size=65536
        )
    ]
    assert len(chunks) > 1
    assert b"".join(chunks) == big


async def test_gateway_missing_path_is_not_found(
    ipfs_gateway: IpfsGateway, added_root: CID
) -> None:
    with pytest.raises(IpfsNotFoundError, match="refs/tail"):
        await ipfs_gateway.get_ipfs(added_root, "refs/tail")


async def test_keys_are_ed25519_listed_once_and_removable(ipfs_client: IpfsClient) -> None:
    name = f"odfd-test-{uuid.uuid4().hex[:8]}"
    key = await ipfs_client.key_gen(name)
    assert key.name == name
    assert key.id.peer_id.startswith("12D3Koo")  # an ed25519 key (RSA ids start with Qm)
    keys = await ipfs_client.key_list()
    assert len(keys) == len({k.name for k in keys})
    assert key in keys and "self" in {k.name for k in keys}
    await ipfs_client.key_rm(name)
    assert name not in {k.name for k in await ipfs_client.key_list()}
    with pytest.raises(IpfsNotFoundError, match=name):
        await ipfs_client.key_rm(name)


async def test_ipns_publish_and_resolve_round_trip(
    ipfs_client: IpfsClient, ipfs_gateway: IpfsGateway, added_root: CID
) -> None:
    key = await ipfs_client.key_gen(f"odfd-test-{uuid.uuid4().hex[:8]}")
    name = await ipfs_client.name_publish(added_root, key=key.name)
    assert name == key.id
    assert await ipfs_client.name_resolve(name) == added_root
    assert await ipfs_client.name_resolve(str(name)) == added_root  # the k51… form
    assert await ipfs_client.name_resolve(f"/ipns/{name.peer_id}") == added_root
    assert await ipfs_gateway.get_ipns(name, "blocks/f1620aa") == b"block one"

    moved = await ipfs_client.add_bytes(b"a newer head")
    await ipfs_client.name_publish(moved, key=key.name)
    assert await ipfs_client.name_resolve(name) == moved


async def test_unpublished_name_is_not_found(ipfs_client: IpfsClient) -> None:
    key = await ipfs_client.key_gen(f"odfd-test-{uuid.uuid4().hex[:8]}")
    with pytest.raises(IpfsNotFoundError):
        await ipfs_client.name_resolve(key.id)


async def test_pin_add_ls_rm(ipfs_client: IpfsClient) -> None:
    cid = await ipfs_client.add_bytes(uuid.uuid4().bytes, pin=False)
    assert cid not in await ipfs_client.pin_ls()
    await ipfs_client.pin_add(cid)
    assert (await ipfs_client.pin_ls())[cid] == "recursive"
    await ipfs_client.pin_rm(cid)
    assert cid not in await ipfs_client.pin_ls()
    with pytest.raises(IpfsNotFoundError, match="not pinned"):
        await ipfs_client.pin_rm(cid)


async def test_id_reports_the_node(ipfs_client: IpfsClient, ipfs_node: LocalIpfsNode) -> None:
    info = await ipfs_client.id()
    assert info.peer_id == ipfs_node.peer_id
    assert ipfs_node.swarm_multiaddr in info.addresses


async def test_client_accepts_an_http_url(ipfs_node: LocalIpfsNode) -> None:
    assert (await IpfsClient(ipfs_node.api_url).id()).peer_id == ipfs_node.peer_id


async def test_unreachable_node_raises_unavailable_naming_the_address() -> None:
    port = _unused_port()
    address = f"/ip4/127.0.0.1/tcp/{port}/http"
    with pytest.raises(IpfsUnavailableError, match=address):
        await IpfsClient(address).id()
    async with IpfsGateway(f"http://127.0.0.1:{port}") as gateway:
        with pytest.raises(IpfsUnavailableError, match=f"127.0.0.1:{port}"):
            await gateway.get_ipfs(_raw_cid(b"x"))


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
