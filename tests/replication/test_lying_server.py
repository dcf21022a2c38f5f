"""A server that lies: every lie makes the pull fail with a clear error, and the local side is
exactly as before (same head, same files, no dataset registered, no staging left behind).

The liar is a small aiohttp app serving a real dataset folder by both protocols, with hooks that
replace what it answers for chosen keys.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import io
import random
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
from aiohttp import WSMsgType, web

from odfd.sync import pull as pull_module
from odfd.sync import walk as walk_module
from odfd.sync.data_checks import DataChecks
from odfd.sync.errors import CorruptSourceError
from odfd.sync.objects import ObjectRef
from odfd.sync.pull import PullOptions, pull
from protocol.codec.flatbuffers import decode_block, hash_block
from protocol.identity import Multihash
from protocol.model import MetadataBlock, MetadataEvent, SetDataSchema, SetVocab
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.replication.datagen import DatasetWriter, create_root


@dataclasses.dataclass
class Liar:
    """Serves ``root`` (a dataset folder) at ``/ds/``; hooks override answers."""

    root: Path
    head: Multihash | None = None
    blocks: dict[Multihash, bytes] = dataclasses.field(default_factory=dict)
    objects: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] = dataclasses.field(
        default_factory=dict
    )
    tarball: Callable[[list[tuple[Multihash, bytes]]], bytes] | None = None
    before_block: Callable[[Multihash], Awaitable[None]] | None = None
    """Awaited before a block is served (Simple Transfer Protocol)."""
    sent_bytes: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/ds/refs/head", self.ref)
        app.router.add_get("/ds/blocks/{hash}", self.block)
        app.router.add_get("/ds/{folder:data|checkpoints}/{hash}", self.object)
        app.router.add_get("/ds/pull", self.smart_pull)
        return app

    def dataset(self) -> Dataset:
        return Dataset.open_local(self.root)

    async def ref(self, request: web.Request) -> web.Response:
        head = self.head or await self.dataset().chain.head()
        return web.Response(text=str(head))

    async def block(self, request: web.Request) -> web.Response:
        hash = Multihash.from_multibase(request.match_info["hash"])
        if self.before_block is not None:
            await self.before_block(hash)
        if hash in self.blocks:
            return web.Response(body=self.blocks[hash])
        path = self.root / "blocks" / str(hash)
        return web.Response(body=path.read_bytes()) if path.exists() else web.Response(status=404)

    async def object(self, request: web.Request) -> web.StreamResponse:
        key = f"{request.match_info['folder']}/{request.match_info['hash']}"
        if key in self.objects:
            return await self.objects[key](request)
        path = self.root / key
        return web.Response(body=path.read_bytes()) if path.exists() else web.Response(status=404)

    async def chain(self) -> list[tuple[Multihash, bytes]]:
        """Oldest first, following the (possibly overridden) links from the served head."""
        items: list[tuple[Multihash, bytes]] = []
        hash: Multihash | None = self.head or await self.dataset().chain.head()
        while hash is not None and len(items) < 10_000:
            path = self.root / "blocks" / str(hash)
            data = self.blocks.get(hash) or (path.read_bytes() if path.exists() else None)
            if data is None:
                break
            items.append((hash, data))
            hash = decode_block(data).prev_block_hash
        return items[::-1]

    async def smart_pull(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=1 << 28)
        await ws.prepare(request)
        await ws.receive()
        blocks = await self.chain()
        payload = self.tarball(blocks) if self.tarball else pack_blocks(blocks)[1]
        count = len(blocks)
        await ws.send_str(m.encode(m.DatasetPullResponse(m.TransferPlan(count, 0, 0, 1, 1))))
        await ws.receive()
        await ws.send_str(
            m.encode(m.DatasetMetadataPullResponse(m.MetadataBlocksBatch(count, payload)))
        )
        while (frame := await ws.receive()).type == WSMsgType.TEXT:
            files = m.DatasetPullObjectsTransferRequest.from_json(
                m.decode_json(frame.data, "request")
            ).object_files
            base = f"{request.url.origin()}/ds/"
            await ws.send_str(
                m.encode(
                    m.DatasetPullObjectsTransferResponse(
                        tuple(
                            m.PullObjectTransferStrategy(
                                f,
                                m.TransferUrl(
                                    f"{base}{'data' if f.object_type == 'DataSlice' else 'checkpoints'}/{f.physical_hash}"
                                ),
                            )
                            for f in files
                        )
                    )
                )
            )
        return ws


@pytest.fixture
async def liar_server(node_a: Workspace) -> AsyncIterator[tuple[Liar, str]]:
    await create_root(node_a, "cities", slices=3)
    record = await node_a.resolve("cities")
    liar = Liar(node_a.layout.dataset(record.id).root)
    runner = web.AppRunner(liar.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield liar, f"http://127.0.0.1:{runner.addresses[0][1]}/ds"
    await runner.cleanup()


def snapshot(workspace: Workspace) -> set[tuple[str, bytes]]:
    return {
        (str(p.relative_to(workspace.root)), p.read_bytes())
        for p in workspace.layout.datasets_dir.rglob("*")
        if p.is_file()
    }


async def assert_fails_cleanly(
    workspace: Workspace, url: str, match: str, options: PullOptions | None = None
) -> None:
    before_files = snapshot(workspace)
    before = await workspace.list_datasets()
    for protocol in ("simple", "smart"):
        with pytest.raises(CorruptSourceError, match=match):
            await pull(
                workspace,
                url,
                alias="copy",
                options=dataclasses.replace(options or PullOptions(), protocol=protocol),
            )
        assert await workspace.list_datasets() == before
        assert snapshot(workspace) == before_files


class BlockChanges(TypedDict, total=False):
    """The fields of a served block that a lie may change."""

    prev_block_hash: Multihash
    sequence_number: int
    event: MetadataEvent


def serve_data_files_telling(liar: Liar) -> asyncio.Event:
    """Serve the liar's data files as they are; the event is set once one was asked for."""
    asked = asyncio.Event()

    def serving(path: Path) -> Callable[[web.Request], Awaitable[web.Response]]:
        body = path.read_bytes()

        async def serve(request: web.Request) -> web.Response:
            asked.set()
            return web.Response(body=body)

        return serve

    for path in (liar.root / "data").iterdir():
        liar.objects[f"data/{path.name}"] = serving(path)
    return asked


def reblock(data: bytes, **changes: Unpack[BlockChanges]) -> tuple[Multihash, bytes]:
    return hash_block(dataclasses.replace(decode_block(data), **changes))


async def test_honest_liar_server_is_pullable(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    """The fixture server itself is faithful unless told to lie."""
    liar, url = liar_server
    for protocol in ("simple", "smart"):
        result = await pull(node_b, url, alias="copy", options=PullOptions(protocol=protocol))
        assert result.num_objects == 6 and result.new_head == await liar.dataset().chain.head()
        await node_b.delete_dataset("copy")


async def test_simple_pull_fetches_objects_while_it_walks(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    """The objects of the blocks walked are requested before the walk reaches the seed: the
    server holds the seed back until a data file was asked for (a pull that walked to the end
    first would wait for it in vain)."""
    liar, url = liar_server
    seed = (await liar.chain())[0][0]
    asked = serve_data_files_telling(liar)

    async def hold_seed(hash: Multihash) -> None:
        if hash == seed:
            await asyncio.wait_for(asked.wait(), 5)

    liar.before_block = hold_seed
    result = await pull(node_b, url, alias="copy", options=PullOptions(protocol="simple"))
    assert result.num_objects == 6 and result.new_head == await liar.dataset().chain.head()


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_objects_fetched_before_an_older_block_fails_are_not_kept(
    node_b: Workspace,
    liar_server: tuple[Liar, str],
    monkeypatch: pytest.MonkeyPatch,
    protocol: str,
) -> None:
    """Both protocols fetch the objects of the newest blocks while older ones are still checked
    (the Smart protocol checks its tarball newest first, one block at a time here). The block
    after the seed says it is #7: the lie is found only once a data file was downloaded (the
    check holds after the first objects offered until one was); the pull names that block, and
    keeps nothing."""
    liar, url = liar_server
    chain = await liar.chain()
    bad, liar.blocks[bad] = reblock(chain[1][1], sequence_number=7)
    prev = bad
    for number, (_, data) in enumerate(chain[2:], start=2):
        prev, liar.blocks[prev] = reblock(data, prev_block_hash=prev, sequence_number=number)
    liar.head = prev
    served = serve_data_files_telling(liar)
    offer = pull_module._EarlyObjects._offer

    async def offering(early: pull_module._EarlyObjects, refs: list[ObjectRef]) -> None:
        await offer(early, refs)
        if refs:
            await asyncio.wait_for(served.wait(), 5)

    monkeypatch.setattr(pull_module._EarlyObjects, "_offer", offering)
    monkeypatch.setattr(walk_module, "_CHECK_RUN", 1)
    before = snapshot(node_b)
    with pytest.raises(CorruptSourceError, match=f"block {bad} has sequence number 7"):
        await pull(node_b, url, alias="copy", options=PullOptions(protocol=protocol))
    assert served.is_set()
    assert await node_b.list_datasets() == [] and snapshot(node_b) == before


async def test_file_checked_during_the_walk_is_checked_under_the_vocab_found_later(
    node_b: Workspace, liar_server: tuple[Liar, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``SetVocab`` inserted after the schema names ``op`` (0 in every record) the offset
    column, so every data block misstates its offsets. The server holds that block back until
    a data file's check began: the check read the bounds of ``offset`` (the column known then)
    and must read them again from ``op`` once the walk reaches the vocabulary."""
    liar, url = liar_server
    chain = await liar.chain()
    assert isinstance(decode_block(chain[1][1]).event, SetDataSchema)
    vocab_hash, liar.blocks[vocab_hash] = reblock(
        chain[1][1],
        prev_block_hash=chain[1][0],
        sequence_number=2,
        event=SetVocab(offset_column="op"),
    )
    prev = vocab_hash
    for number, (_, data) in enumerate(chain[2:], start=3):
        prev, liar.blocks[prev] = reblock(data, prev_block_hash=prev, sequence_number=number)
    liar.head = prev
    begun = asyncio.Event()
    start = DataChecks.start

    def starting(checks: DataChecks, hash: Multihash, paths: Sequence[Path]) -> bool:
        if started := start(checks, hash, paths):
            begun.set()
        return started

    async def hold_vocab(hash: Multihash) -> None:
        if hash == vocab_hash:
            await asyncio.wait_for(begun.wait(), 5)

    monkeypatch.setattr(DataChecks, "start", starting)
    liar.before_block = hold_vocab
    await assert_fails_cleanly(node_b, url, r"the file's op column runs from 0 to 0")
    assert begun.is_set()


async def test_wrong_bytes_for_a_data_hash(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    liar, url = liar_server
    data_hash = next(iter((liar.root / "data").iterdir())).name
    size = (liar.root / "data" / data_hash).stat().st_size

    async def forged(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * size)

    liar.objects[f"data/{data_hash}"] = forged
    await assert_fails_cleanly(node_b, url, "hash to")


async def test_wrong_bytes_for_a_block_hash(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    liar, url = liar_server
    head = await liar.dataset().chain.head()
    assert head is not None
    forged = bytearray((liar.root / "blocks" / str(head)).read_bytes())
    forged[len(forged) // 2] ^= 0xFF
    liar.blocks[head] = bytes(forged)
    with pytest.raises(CorruptSourceError, match="hash"):
        await pull(node_b, url, alias="copy", options=PullOptions(protocol="simple"))
    assert await node_b.list_datasets() == [] and snapshot(node_b) == set()


async def test_block_that_does_not_link(node_b: Workspace, liar_server: tuple[Liar, str]) -> None:
    liar, url = liar_server
    chain = await liar.chain()
    # A valid block whose prevBlockHash names a block the server does not have.
    hash, data = reblock(chain[-1][1], prev_block_hash=Multihash.from_digest_sha3_256(b"missing"))
    liar.blocks[hash] = data
    liar.head = hash
    await assert_fails_cleanly(node_b, url, "does not link|links to")


async def test_block_out_of_sequence(node_b: Workspace, liar_server: tuple[Liar, str]) -> None:
    liar, url = liar_server
    chain = await liar.chain()
    hash, data = reblock(
        chain[-1][1], sequence_number=decode_block(chain[-1][1]).sequence_number + 5
    )
    liar.blocks[hash] = data
    liar.head = hash
    await assert_fails_cleanly(node_b, url, "does not link|sequence number")


async def test_endless_chain_claims_are_bounded(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    liar, url = liar_server
    chain = await liar.chain()
    hash, data = reblock(chain[-1][1], sequence_number=10**12)
    liar.blocks[hash] = data
    liar.head = hash
    await assert_fails_cleanly(node_b, url, "over the limit")


async def test_cyclic_chain_is_refused(node_b: Workspace, liar_server: tuple[Liar, str]) -> None:
    """Blocks that loop back (each links to a block with its own sequence number) never reach a
    seed; the sequence numbers expose the loop at the first step."""
    liar, url = liar_server
    chain = await liar.chain()
    tail_hash, tail = chain[-1]
    block: MetadataBlock = decode_block(tail)
    hash_a, data_a = hash_block(dataclasses.replace(block, prev_block_hash=tail_hash))
    liar.blocks[hash_a] = data_a
    liar.head = hash_a
    await assert_fails_cleanly(node_b, url, "does not link|sequence number")


async def test_long_chain_over_the_limit(node_b: Workspace, liar_server: tuple[Liar, str]) -> None:
    liar, url = liar_server
    await assert_fails_cleanly(node_b, url, "over the limit", PullOptions(max_blocks=3))


async def test_object_far_larger_than_advertised(
    node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    liar, url = liar_server
    data_hash = next(iter((liar.root / "data").iterdir())).name
    size = (liar.root / "data" / data_hash).stat().st_size

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            for _ in range(10_000):  # 10 GB if the client kept reading
                await response.write(b"\0" * (1 << 20))
                liar.sent_bytes += 1 << 20
        except (ConnectionResetError, RuntimeError):
            pass
        return response

    liar.objects[f"data/{data_hash}"] = endless
    await assert_fails_cleanly(node_b, url, "larger than")
    assert size < 1 << 20 and liar.sent_bytes < 64 << 20


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return gzip.compress(raw.getvalue())


@pytest.mark.parametrize("lie", ["parent", "absolute", "folder", "symlink", "wrong-name"])
async def test_tarball_with_unsafe_or_wrong_members(
    node_b: Workspace, liar_server: tuple[Liar, str], lie: str
) -> None:
    liar, url = liar_server

    def hostile(blocks: list[tuple[Multihash, bytes]]) -> bytes:
        members = []
        for i, (hash, data) in enumerate(blocks):
            name = str(hash)
            if i == len(blocks) - 1:
                name = {
                    "parent": f"../{hash}",
                    "absolute": f"/tmp/{hash}",
                    "folder": f"blocks/{hash}",
                    "symlink": name,
                    "wrong-name": str(blocks[0][0]),
                }[lie]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if lie == "symlink" and i == len(blocks) - 1:
                info.type, info.linkname, info.size, data = tarfile.SYMTYPE, "/etc/passwd", 0, b""
            members.append((info, data))
        return _tar(members)

    liar.tarball = hostile
    before = snapshot(node_b)
    with pytest.raises(CorruptSourceError, match="metadata tarball"):
        await pull(node_b, url, alias="copy", options=PullOptions(protocol="smart"))
    assert await node_b.list_datasets() == [] and snapshot(node_b) == before
    assert not (node_b.root.parent / "etc").exists()


async def test_lie_during_an_incremental_pull_leaves_the_dataset_as_it_was(
    node_a: Workspace, node_b: Workspace, liar_server: tuple[Liar, str]
) -> None:
    liar, url = liar_server
    await pull(node_b, url, alias="copy")
    record_before = await node_b.resolve("copy")
    files_before = snapshot(node_b)
    source = await node_a.get_dataset("cities")
    state = await source.chain.state()
    writer = DatasetWriter(
        source,
        random.Random(7),
        next_offset=(state.last_offset or 0) + 1,
        last_checkpoint=state.last_checkpoint,
        watermark_step=1000,
    )
    await writer.append(slices=2)
    newest = sorted((liar.root / "data").iterdir(), key=lambda p: p.stat().st_mtime)[-1].name

    async def forged(request: web.Request) -> web.Response:
        return web.Response(body=b"\1" * (liar.root / "data" / newest).stat().st_size)

    liar.objects[f"data/{newest}"] = forged
    for protocol in ("simple", "smart"):
        with pytest.raises(CorruptSourceError):
            await pull(node_b, url, options=PullOptions(protocol=protocol))
        assert await node_b.resolve("copy") == record_before
        assert snapshot(node_b) == files_before
