"""Peers as a mirror meets them on the open internet, each a real aiohttp server on loopback:
honest servers that answer in unusual but legal ways (chunked bodies with pauses), servers that
lie about their data or redirect where they must not, slow servers. Each pull runs as
``odfd pull`` does (the CLI's entry point, in a thread), and each case asserts the exit code,
the one-line message, the local head and that no stray file is left in the workspace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypedDict, Unpack

import aiohttp
import pytest
from aiohttp import web

from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node
from odfd.cli.main import main
from odfd.config import NodeConfig, SyncConfig
from protocol.codec.flatbuffers import decode_block
from protocol.identity import Multihash
from protocol.model import AddData, OffsetInterval
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.catalog.mirrors import MirrorTable
from storage.stores.localfs_batch import LocalFsStagedObjects
from storage.workspace import Workspace
from tests.replication.datagen import create_root, verify_integrity
from tests.replication.test_lying_server import Liar, reblock

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclasses.dataclass
class Peer:
    liar: Liar
    url: str
    """The dataset's URL (``…/ds``)."""
    base: str
    """The server's origin (``http://127.0.0.1:PORT``)."""
    routes: dict[str, Handler] = dataclasses.field(default_factory=dict)
    """Path -> handler replacing the liar's answer (redirects, stalls)."""
    chunked: bool = False
    """Serve every Simple Transfer answer in two chunks with a pause between them."""
    closing: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    """Set when the test is over: handlers that stall stop then."""


@pytest.fixture
async def peer(node_a: Workspace) -> AsyncIterator[Peer]:
    await create_root(node_a, "cities", slices=3)
    record = await node_a.resolve("cities")
    liar = Liar(node_a.layout.dataset(record.id).root)
    state: dict[str, Peer] = {}

    @web.middleware
    async def behave(request: web.Request, handler: Handler) -> web.StreamResponse:
        current = state["peer"]
        if request.path in current.routes:
            return await current.routes[request.path](request)
        response = await handler(request)
        if not current.chunked or not isinstance(response, web.Response) or not response.body:
            return response
        assert isinstance(response.body, bytes)
        return await _two_chunks(request, response.body)

    app = liar.app()
    app.middlewares.append(behave)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    state["peer"] = Peer(liar, f"{base}/ds", base)
    yield state["peer"]
    state["peer"].closing.set()
    await runner.cleanup()


async def _two_chunks(request: web.Request, body: bytes) -> web.StreamResponse:
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    half = max(len(body) // 2, 1)
    await response.write(body[:half])
    await asyncio.sleep(0.2)
    await response.write(body[half:])
    await response.write_eof()
    return response


async def odfd(
    capsys: pytest.CaptureFixture[str], workspace: Workspace, *args: str
) -> tuple[int, str]:
    """``odfd ARGS --root WORKSPACE`` in a thread (its own event loop): exit code and stderr."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, [*args, "--root", str(workspace.root)])
    return code, capsys.readouterr().err


def assert_one_line_error(err: str, pattern: str) -> None:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(pattern, lines[0]), lines[0]


def stray_files(workspace: Workspace) -> list[Path]:
    """Temporary files anywhere in the workspace, and staging folders of other processes."""
    root = workspace.root
    stray = [
        p
        for p in root.rglob("*")
        if p.name.startswith((".pending-", ".pull-")) or "/staging/" in str(p)
    ]
    own = workspace.scratch._folder  # this test process's own (live) staging folder
    return [p for p in stray if own is None or not (p == own or p.is_relative_to(own))]


async def remote_head(peer: Peer) -> Multihash:
    head = await peer.liar.dataset().chain.head()
    assert head is not None
    return head


async def test_chunked_answers_with_pauses_are_read_whole(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.chunked = True
    for protocol in ("simple", "smart"):
        code, err = await odfd(
            capsys, node_b, "pull", peer.url, "--as", "copy", "--protocol", protocol
        )
        assert code == 0, err
        assert (await node_b.resolve("copy")).head == await remote_head(peer)
        await verify_integrity(await node_b.get_dataset("copy"))
        assert stray_files(node_b) == []
        await node_b.delete_dataset("copy")


class _SliceChanges(TypedDict, total=False):
    """The fields of the newest data slice that a lie may change."""

    logical_hash: Multihash
    offset_interval: OffsetInterval


async def _rewrite_newest_add_data(peer: Peer, **changes: Unpack[_SliceChanges]) -> None:
    chain = await peer.liar.chain()
    hash, data = chain[-1]
    block = decode_block(data)
    assert isinstance(block.event, AddData) and block.event.new_data is not None
    new_data = dataclasses.replace(block.event.new_data, **changes)
    event = dataclasses.replace(block.event, new_data=new_data)
    new_hash, new_bytes = reblock(data, event=event)
    peer.liar.blocks[new_hash] = new_bytes
    peer.liar.head = new_hash


async def assert_refused_cleanly(
    capsys: pytest.CaptureFixture[str],
    workspace: Workspace,
    url: str,
    pattern: str,
    *extra: str,
    protocols: tuple[str, ...] = ("simple", "smart"),
) -> None:
    before = await workspace.list_datasets()
    for protocol in protocols:
        code, err = await odfd(capsys, workspace, "pull", url, "--protocol", protocol, *extra)
        assert code == 1, err
        assert_one_line_error(err, pattern)
        assert await workspace.list_datasets() == before
        assert stray_files(workspace) == []


async def test_add_data_with_another_slices_logical_hash_is_refused(
    node_b: Workspace,
    peer: Peer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Refused before any fetched data file got its name (each is checked while staged)."""
    named: list[Multihash] = []
    name_all = LocalFsStagedObjects._name_all

    def naming(batch: LocalFsStagedObjects, staged: dict[Multihash, Path]) -> None:
        named.extend(staged)
        name_all(batch, staged)

    monkeypatch.setattr(LocalFsStagedObjects, "_name_all", naming)
    chain = await peer.liar.chain()
    first_slice = next(
        decode_block(data).event.new_data
        for _, data in chain
        if isinstance(decode_block(data).event, AddData)
        and decode_block(data).event.new_data is not None
    )
    await _rewrite_newest_add_data(peer, logical_hash=first_slice.logical_hash)
    await assert_refused_cleanly(
        capsys, node_b, peer.url, r"records logicalHash .* hash to ", "--as", "copy"
    )
    assert named == []


async def test_add_data_claiming_more_records_than_its_file_is_refused(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    chain = await peer.liar.chain()
    interval = decode_block(chain[-1][1]).event.new_data.offset_interval
    await _rewrite_newest_add_data(
        peer, offset_interval=OffsetInterval(start=interval.start, end=interval.end + 1000)
    )
    await assert_refused_cleanly(
        capsys, node_b, peer.url, r"\(1010 records\), the file .* holds 10", "--as", "copy"
    )


async def test_lie_about_data_in_an_incremental_pull_keeps_the_local_head(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    head = await remote_head(peer)
    chain = await peer.liar.chain()
    # The local copy holds all but the newest block; the peer then lies about that one.
    peer.liar.head = chain[-2][0]
    code, err = await odfd(capsys, node_b, "pull", peer.url, "--as", "copy")
    assert code == 0, err
    peer.liar.head = None
    interval = decode_block(chain[-1][1]).event.new_data.offset_interval
    await _rewrite_newest_add_data(
        peer, offset_interval=OffsetInterval(start=interval.start, end=interval.end + 1000)
    )
    # (The liar's Smart Transfer answer always starts at the seed: incremental pulls use Simple.)
    await assert_refused_cleanly(capsys, node_b, "copy", "records", protocols=("simple",))
    assert (await node_b.resolve("copy")).head == chain[-2][0] != head


def _redirect(location: str) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(location)

    return answer


async def test_redirect_loop_is_refused(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.routes["/ds/refs/head"] = _redirect("/loop/a")
    peer.routes["/loop/a"] = _redirect("/loop/b")
    peer.routes["/loop/b"] = _redirect("/ds/refs/head")
    await assert_refused_cleanly(
        capsys, node_b, peer.url, r"redirected .* more than 5 times .*; refused", "--as", "copy"
    )


async def test_redirect_to_a_file_url_is_refused(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.routes["/ds/refs/head"] = _redirect("file:///etc/passwd")
    await assert_refused_cleanly(
        capsys,
        node_b,
        peer.url,
        r"^error: peer http://127\.0\.0\.1:\d+ redirected to a non-HTTP URL "
        r"\(file:///etc/passwd\); refused$",
        "--as",
        "copy",
    )


async def test_redirects_between_http_urls_are_followed(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mirror moved behind another path: the ref redirects, the pull works."""
    peer.routes["/ds/refs/head"] = _redirect(f"{peer.base}/ds/refs/head?x=1")
    code, err = await odfd(capsys, node_b, "pull", peer.url, "--as", "copy", "--protocol", "simple")
    # The redirect target is the same path, so the route answers again: a loop, refused ...
    assert code == 1 and "more than 5 times" in err
    # ... while a redirect to a different path is followed.
    peer.routes["/ds/refs/head"] = _redirect("/elsewhere/refs/head")

    async def elsewhere(request: web.Request) -> web.StreamResponse:
        return web.Response(text=str(await remote_head(peer)))

    peer.routes["/elsewhere/refs/head"] = elsewhere
    code, err = await odfd(capsys, node_b, "pull", peer.url, "--as", "copy", "--protocol", "simple")
    assert code == 0, err
    assert (await node_b.resolve("copy")).head == await remote_head(peer)
    assert stray_files(node_b) == []


async def test_smart_answer_pointing_objects_at_file_urls_is_refused(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def file_urls(request: web.Request) -> web.WebSocketResponse:
        """The liar's Smart Transfer flow, with every object URL pointing at a local file."""
        ws = web.WebSocketResponse(protocols=(m.WEBSOCKET_PROTOCOL,))
        await ws.prepare(request)
        await ws.receive()
        blocks = await peer.liar.chain()
        count = len(blocks)
        await ws.send_str(m.encode(m.DatasetPullResponse(m.TransferPlan(count, 0, 0, 1, 1))))
        await ws.receive()
        payload = pack_blocks(blocks)[1]
        batch = m.MetadataBlocksBatch(count, payload)
        await ws.send_str(m.encode(m.DatasetMetadataPullResponse(batch)))
        frame = await ws.receive()
        files = m.DatasetPullObjectsTransferRequest.from_json(
            m.decode_json(frame.data, "request")
        ).object_files
        strategies = tuple(
            m.PullObjectTransferStrategy(f, m.TransferUrl("file:///etc/passwd")) for f in files
        )
        await ws.send_str(m.encode(m.DatasetPullObjectsTransferResponse(strategies)))
        await ws.receive()
        return ws

    peer.routes["/ds/pull"] = file_urls
    await assert_refused_cleanly(
        capsys,
        node_b,
        peer.url,
        r"points (DataSlice|Checkpoint) .* at a non-HTTP URL \(file:///etc/passwd\); refused",
        "--as",
        "copy",
        protocols=("smart",),
    )


async def test_dribbled_data_file_gives_up_naming_the_object(
    node_b: Workspace,
    peer: Peer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = await peer.liar.chain()
    peer.liar.head = chain[-2][0]
    code, err = await odfd(capsys, node_b, "pull", peer.url, "--as", "copy")
    assert code == 0, err
    peer.liar.head = None
    newest = decode_block(chain[-1][1]).event.new_data.physical_hash
    body = (peer.liar.root / "data" / str(newest)).read_bytes()

    async def dribble(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(len(body))})
        await response.prepare(request)
        for byte in body:
            await response.write(bytes([byte]))
            await asyncio.sleep(0.5)
        return response

    peer.routes[f"/ds/data/{newest}"] = dribble
    monkeypatch.setenv("ODFD_SYNC_RATE_WINDOW", "2s")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await assert_refused_cleanly(
        capsys,
        node_b,
        "copy",
        rf"fetching data/{newest}: the peer stalled: .* bytes/s over 2 s, below min_rate 1024",
        protocols=("simple",),
    )
    assert loop.time() - started < 10  # gives up after one 2 s window
    assert (await node_b.resolve("copy")).head == chain[-2][0]


async def test_server_that_never_answers_refs_head(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def never(request: web.Request) -> web.StreamResponse:
        await peer.closing.wait()
        return web.Response(status=503)

    peer.routes["/ds/refs/head"] = never
    loop = asyncio.get_running_loop()
    started = loop.time()
    await assert_refused_cleanly(
        capsys,
        node_b,
        peer.url,
        r"GET http://127\.0\.0\.1:\d+/ds/refs/head: the peer stalled: no answer within 1 s "
        r"\(first_byte_timeout\)",
        "--as",
        "copy",
        "--first-byte-timeout",
        "1s",
    )
    assert loop.time() - started < 10


async def test_whole_operation_timeout(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1.0)
        return web.Response(text=str(await remote_head(peer)))

    peer.routes["/ds/refs/head"] = slow
    await assert_refused_cleanly(
        capsys,
        node_b,
        peer.url,
        r"took longer than 0\.5 s \(operation_timeout\)",
        "--as",
        "copy",
        "--timeout",
        "0.5s",
        protocols=("simple",),
    )


async def test_unreachable_peer_leaves_nothing_behind(
    node_b: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    await assert_refused_cleanly(
        capsys,
        node_b,
        f"http://127.0.0.1:{port}/cities",
        r"cannot reach the node at http://127\.0\.0\.1:\d+/ \(connection refused\)",
    )


async def test_smart_plan_with_nothing_new_leaves_no_staging_folder(
    node_b: Workspace, peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    async def empty_plan(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.receive()
        await ws.send_str(m.encode(m.DatasetPullResponse(m.TransferPlan(0, 0, 0, 1, 1))))
        await ws.receive()
        return ws

    peer.routes["/ds/pull"] = empty_plan
    code, err = await odfd(capsys, node_b, "pull", peer.url, "--as", "copy", "--protocol", "smart")
    assert code == 0 and "up to date" in err, err
    assert await node_b.list_datasets() == []
    assert stray_files(node_b) == []


def test_default_time_outs_give_up_on_a_stalled_peer_within_30_seconds() -> None:
    limits = SyncConfig().limits()
    assert limits.connect <= 30 and limits.first_byte <= 30 and limits.rate_window <= 30
    assert limits.min_rate > 0


async def test_daemon_sync_from_a_stalled_peer_fails_naming_it(
    node_b: Workspace, peer: Peer
) -> None:
    """A mirror sync from a peer that never answers fails within the time-out; a failed attempt
    is what makes the daemon back the mirror off (``Daemon._record``, ``backoff_delay``)."""

    async def never(request: web.Request) -> web.StreamResponse:
        await peer.closing.wait()
        return web.Response(status=503)

    peer.routes["/ds/refs/head"] = never
    config = NodeConfig(sync=SyncConfig(first_byte_timeout=1.0))
    await MirrorTable(node_b.catalog).add("copy", peer.url, [], 3600.0)
    mirror = await MirrorTable(node_b.catalog).require("copy")
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with aiohttp.ClientSession() as session:
        report = await MirrorSyncer(Node(node_b, config), session).sync(mirror)
    assert loop.time() - started < 10
    assert report.failed and report.attempt.new_head is None
    assert report.attempt.error is not None
    assert re.fullmatch(
        r"GET http://127\.0\.0\.1:\d+/ds/refs/head: the peer stalled: no answer within 1 s "
        r"\(first_byte_timeout\)",
        report.attempt.error,
    ), report.attempt.error
    assert stray_files(node_b) == []
