"""One contract, every store (as dulwich runs one object-store suite per backend).

Read contract, for every store: a dataset folder (blocks, data, refs/head) is seeded, then read
through the store under test: in memory, on the local disk, over HTTP from a real aiohttp server
on loopback, from a real IPFS node's gateway and from a real S3 server (SeaweedFS). Write contract,
for the writable stores (memory, local disk, S3): hashes are checked before anything is visible,
deletes and compare-and-swap.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from protocol.identity import Multihash
from protocol.transfer.simple import ObjectKind
from storage.errors import HashMismatchError, ObjectNotFoundError, RefCasError
from storage.ipfs_client import IpfsClient, IpfsGateway
from storage.s3_client import S3Bucket
from storage.s3_settings import parse_s3_url
from storage.stores.base import NamedStore, ObjectStore, RefStore
from storage.stores.http import HttpClient, HttpObjectStore, HttpRefStore
from storage.stores.ipfs import IpfsObjectStore, IpfsRefStore
from storage.stores.localfs import LocalFsNamedStore, LocalFsObjectStore, LocalFsRefStore
from storage.stores.memory import MemoryNamedStore, MemoryObjectStore, MemoryRefStore
from storage.stores.s3 import SINGLE_PUT_LIMIT, S3NamedStore, S3ObjectStore, S3RefStore
from tests.fixtures.ipfs_node import LocalIpfsNode
from tests.fixtures.seaweedfs import SeaweedServer

BLOCKS = [b"block one", b"block two", os.urandom(300)]
DATA = [os.urandom(3 * 1024 * 1024 + 5), b""]
HEAD = Multihash.from_digest_sha3_256(BLOCKS[-1])
ABSENT = Multihash.from_digest_sha3_256(b"never stored")


@dataclass
class Seeded:
    """A store view of the seeded dataset: one object store per kind and its refs."""

    objects: Callable[[ObjectKind], ObjectStore]
    refs: RefStore


def _write_folder(root: Path) -> None:
    for kind, items in ((ObjectKind.BLOCK, BLOCKS), (ObjectKind.DATA, DATA)):
        folder = root / kind.value
        folder.mkdir(parents=True)
        for item in items:
            (folder / Multihash.from_digest_sha3_256(item).to_multibase()).write_bytes(item)
    (root / "checkpoints").mkdir()
    (root / "refs").mkdir()
    (root / "refs" / "head").write_text(HEAD.to_multibase())


@pytest.fixture(
    params=["memory", "localfs", "http", pytest.param("ipfs", marks=pytest.mark.ipfs), "s3"]
)
async def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Seeded]:
    root = tmp_path / "dataset"
    _write_folder(root)
    if request.param == "memory":
        stores = {kind: MemoryObjectStore(kind.value) for kind in ObjectKind}
        for kind, items in ((ObjectKind.BLOCK, BLOCKS), (ObjectKind.DATA, DATA)):
            await stores[kind].put_many(items)
        refs = MemoryRefStore()
        await refs.set("head", HEAD, expected=None)
        yield Seeded(stores.__getitem__, refs)
    elif request.param == "localfs":
        yield Seeded(
            lambda kind: LocalFsObjectStore(root / kind.value), LocalFsRefStore(root / "refs")
        )
    elif request.param == "http":
        app = web.Application()
        app.router.add_static("/ds/", root)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            client = HttpClient(session, f"http://127.0.0.1:{port}/ds")
            yield Seeded(lambda kind: HttpObjectStore(client, kind), HttpRefStore(client))
        await runner.cleanup()
    elif request.param == "s3":
        server: SeaweedServer = request.getfixturevalue("s3_server")
        location = parse_s3_url(server.url(server.make_bucket(), "repo/ds"))
        bucket = S3Bucket(location, server.settings())
        for path in root.rglob("*"):
            if path.is_file():
                await bucket.put(location.key(str(path.relative_to(root))), path.read_bytes())
        yield Seeded(
            lambda kind: S3ObjectStore(bucket, location, kind.value), S3RefStore(bucket, location)
        )
    else:
        node: LocalIpfsNode = request.getfixturevalue("ipfs_node")
        cid = await IpfsClient(node.api_multiaddr).add_directory(root)
        async with IpfsGateway(node.gateway_url, timeout=20.0) as gateway:
            yield Seeded(
                lambda kind: IpfsObjectStore(gateway, cid, kind), IpfsRefStore(gateway, cid)
            )


async def test_every_seeded_object_reads_back_whole_and_in_chunks(seeded: Seeded) -> None:
    for kind, items in ((ObjectKind.BLOCK, BLOCKS), (ObjectKind.DATA, DATA)):
        store = seeded.objects(kind)
        for item in items:
            hash = Multihash.from_digest_sha3_256(item)
            assert await store.contains(hash), (store, hash)
            assert await store.size(hash) == len(item)
            assert await store.get_bytes(hash) == item
            chunks = [chunk async for chunk in store.iter_chunks(hash, 1 << 20)]
            assert b"".join(chunks) == item
            assert all(len(chunk) <= 1 << 20 for chunk in chunks)


async def test_an_absent_object_is_not_found_by_every_read(seeded: Seeded) -> None:
    store = seeded.objects(ObjectKind.BLOCK)
    assert not await store.contains(ABSENT)
    with pytest.raises(ObjectNotFoundError):
        await store.size(ABSENT)
    with pytest.raises(ObjectNotFoundError):
        await store.get_bytes(ABSENT)
    with pytest.raises(ObjectNotFoundError):
        _ = [chunk async for chunk in store.iter_chunks(ABSENT)]


async def test_kinds_are_separate_namespaces(seeded: Seeded) -> None:
    block = Multihash.from_digest_sha3_256(BLOCKS[0])
    assert not await seeded.objects(ObjectKind.DATA).contains(block)
    assert not await seeded.objects(ObjectKind.CHECKPOINT).contains(block)


async def test_refs_read_their_value_and_none_when_unset(seeded: Seeded) -> None:
    assert await seeded.refs.get("head") == HEAD
    assert await seeded.refs.get("no-such-ref") is None


# --- writable stores ----------------------------------------------------------------------------


@dataclass
class Writable:
    objects: ObjectStore
    refs: RefStore
    named: NamedStore


@pytest.fixture(params=["memory", "localfs", "s3"])
def writable(request: pytest.FixtureRequest, tmp_path: Path) -> Writable:
    if request.param == "memory":
        return Writable(MemoryObjectStore(), MemoryRefStore(), MemoryNamedStore())
    if request.param == "s3":
        server: SeaweedServer = request.getfixturevalue("s3_server")
        location = parse_s3_url(server.url(server.make_bucket(), "ds"))
        bucket = S3Bucket(location, server.settings())
        return Writable(
            S3ObjectStore(bucket, location, "data"),
            S3RefStore(bucket, location),
            S3NamedStore(bucket, location),
        )
    return Writable(
        LocalFsObjectStore(tmp_path / "objects"),
        LocalFsRefStore(tmp_path / "refs"),
        LocalFsNamedStore(tmp_path / "info"),
    )


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 1000):
        yield data[start : start + 1000]


async def test_every_put_names_the_object_by_its_hash(writable: Writable, tmp_path: Path) -> None:
    store = writable.objects
    payload = os.urandom(5000)
    hash = Multihash.from_digest_sha3_256(payload)
    assert await store.put_bytes(payload) == hash
    assert await store.put_stream(_chunks(payload), expected=hash) == hash
    source = tmp_path / "source.bin"
    source.write_bytes(payload)
    assert await store.put_file(source, expected=hash, move=True) == hash
    assert not source.exists()
    large = tmp_path / "large.bin"  # a multipart upload on S3, read from the file in parts
    large.write_bytes(os.urandom(SINGLE_PUT_LIMIT + (3 << 20)))
    large_hash = Multihash.from_digest_sha3_256(large.read_bytes())
    assert await store.put_file(large, expected=large_hash) == large_hash
    assert await store.put_file(large) == large_hash
    assert await store.get_bytes(large_hash) == large.read_bytes()
    chunks = [chunk async for chunk in store.iter_chunks(large_hash, 1 << 20)]
    assert b"".join(chunks) == large.read_bytes()  # on S3: a first range, then ranged reads
    assert all(len(chunk) <= 1 << 20 for chunk in chunks)
    await store.delete(large_hash)
    others = [b"a", b"b", b""]
    assert await store.put_many(others) == [Multihash.from_digest_sha3_256(o) for o in others]
    listed = [h async for h in store.iter_hashes()]
    assert sorted(listed) == sorted([hash, *(Multihash.from_digest_sha3_256(o) for o in others)])


async def test_streamed_views_are_stored_as_their_bytes(writable: Writable) -> None:
    """Chunks may be views of another buffer, uncopied (the S3 store streams its ranged reads
    so): every store takes them, and an object streamed from one store into another arrives."""
    store = writable.objects
    payload = os.urandom(5000)
    hash = Multihash.from_digest_sha3_256(payload)

    async def views() -> AsyncIterator[memoryview]:
        buffer = memoryview(payload)
        for start in range(0, len(buffer), 1000):
            yield buffer[start : start + 1000]

    assert await store.put_stream(views(), expected=hash) == hash
    assert await store.get_bytes(hash) == payload
    chunks = [chunk async for chunk in store.iter_chunks(hash, 1000)]
    if isinstance(store, S3ObjectStore):
        assert all(isinstance(chunk, memoryview) for chunk in chunks)  # not copied to bytes
    copy = MemoryObjectStore()
    assert await copy.put_stream(store.iter_chunks(hash, 1000), expected=hash) == hash
    assert await copy.get_bytes(hash) == payload


async def test_a_wrong_expected_hash_stores_nothing(writable: Writable, tmp_path: Path) -> None:
    store = writable.objects
    wrong = Multihash.from_digest_sha3_256(b"something else")
    with pytest.raises(HashMismatchError):
        await store.put_bytes(b"payload", expected=wrong)
    with pytest.raises(HashMismatchError):
        await store.put_stream(_chunks(b"payload"), expected=wrong)
    source = tmp_path / "source.bin"
    source.write_bytes(b"payload")
    with pytest.raises(HashMismatchError):
        await store.put_file(source, expected=wrong, move=True)
    assert source.exists()
    # Large enough for a multipart upload on S3: it is aborted, never completed.
    large = tmp_path / "large.bin"
    large.write_bytes(os.urandom(SINGLE_PUT_LIMIT + (3 << 20)))
    with pytest.raises(HashMismatchError):
        await store.put_file(large, expected=wrong)
    assert [h async for h in store.iter_hashes()] == []
    assert not await store.contains(Multihash.from_digest_sha3_256(b"payload"))


@pytest.mark.parametrize("count", [3, 100])  # inline, and (local files) in one thread
async def test_missing_names_the_absent_objects_in_order(writable: Writable, count: int) -> None:
    store = writable.objects
    items = [b"object %d" % i for i in range(count)]
    stored = await store.put_many(items[::2])
    absent = [Multihash.from_digest_sha3_256(item) for item in items[1::2]]
    wanted = [h for pair in zip(stored, absent, strict=False) for h in pair]
    assert await store.missing(wanted) == absent
    assert await store.missing(stored) == []


async def test_delete_removes_and_ignores_absent(writable: Writable) -> None:
    store = writable.objects
    hash = await store.put_bytes(b"to delete")
    await store.delete(hash)
    await store.delete(hash)
    assert not await store.contains(hash)


async def test_refs_move_only_by_compare_and_swap(writable: Writable) -> None:
    refs = writable.refs
    one, two = (Multihash.from_digest_sha3_256(x) for x in (b"1", b"2"))
    await refs.set("head", one, expected=None)
    with pytest.raises(RefCasError):
        await refs.set("head", two, expected=None)
    with pytest.raises(RefCasError):
        await refs.delete("head", expected=two)
    assert await refs.get("head") == one
    await refs.set("head", two, expected=one)
    assert await refs.names() == ["head"]
    await refs.delete("head", expected=two)
    assert await refs.get("head") is None and await refs.names() == []


async def test_named_files_replace_and_delete(writable: Writable) -> None:
    named = writable.named
    assert await named.get("alias") is None
    await named.set("alias", b"first")
    await named.set("alias", b"second")
    assert await named.get("alias") == b"second"
    await named.delete("alias")
    await named.delete("alias")
    assert await named.get("alias") is None
