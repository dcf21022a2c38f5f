"""Two nodes over loopback: pulls (simple and smart, full and incremental), pushes, divergence,
resumption, and the integrity of everything that arrives."""

from __future__ import annotations

import asyncio
import contextlib
import io

import aiohttp
import pytest
from aiohttp import web

from odfd.sync.errors import AccessDeniedError, DivergedError, RemoteAheadError
from odfd.sync.progress import Progress
from odfd.sync.pull import PullOptions, pull, pull_from_remotes
from odfd.sync.push import PushOptions, push
from odfd.sync.transport import smart_client as smart
from odfd.sync.transport.smart_client import SmartUnavailableError
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.workspace import Workspace
from tests.replication.conftest import PUSH_TOKEN, ServeFactory
from tests.replication.datagen import create_root, odfd_verify_integrity, verify_integrity


async def files_of(workspace: Workspace) -> set[str]:
    datasets = workspace.layout.datasets_dir
    return {str(p.relative_to(datasets)) for p in datasets.rglob("*") if p.is_file()}


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_pull_and_incremental_pull(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory, protocol: str
) -> None:
    writer = await create_root(node_a, "cities", slices=4, empty_blocks=1)
    server = await serve(node_a)
    url = server.url + "cities"

    first = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert first.protocol == protocol
    assert first.num_blocks == 2 + 4 * 2  # Seed, SetDataSchema, 4 x (slice + watermark-only block)
    assert first.num_objects == 8  # 4 data files + 4 checkpoints
    source = await node_a.get_dataset("cities")
    copy = await node_b.get_dataset("cities")
    assert copy.id is not None and copy.id == source.id
    assert await copy.chain.head() == await source.chain.head()
    assert await verify_integrity(copy) == await verify_integrity(source)
    await odfd_verify_integrity(node_b, "cities")

    new_head = await writer.append(slices=2)
    second = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert (second.num_blocks, second.num_objects, second.old_head, second.new_head) == (
        2,
        4,
        first.new_head,
        new_head,
    )
    assert (await node_b.resolve("cities")).head == new_head
    await verify_integrity(await node_b.get_dataset("cities"))

    again = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert not again.updated and again.describe() == "up to date"
    (state,) = await node_b.catalog.sync_states(copy.id)
    assert state.remote == url and state.last_synced_local_head == new_head
    assert await node_b.catalog.remote_aliases(copy.id, "pull") == [url]
    assert await node_b.catalog.get_transfer(copy.id, url, "pull") is None


async def test_auto_protocol_prefers_smart_and_pull_by_dataset_uses_recorded_remote(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    result = await pull(node_b, server.url + "cities", alias="mirror")
    assert result.protocol == "smart" and result.alias == "mirror"
    head = await writer.append(slices=1)
    [again] = await pull_from_remotes(node_b, "mirror")
    assert again.new_head == head and again.num_blocks == 1


async def test_pull_by_did_and_multi_tenant_alias(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_a, "alice/cities", slices=1)
    server = await serve(node_a)
    record = await node_a.resolve("alice/cities")
    by_alias = await pull(node_b, server.url + "alice/cities")
    assert by_alias.alias == "cities" and by_alias.dataset_id == record.id
    await node_b.delete_dataset("cities")
    by_did = await pull(
        node_b, f"{server.url}{record.id}", alias="by-id", options=PullOptions(protocol="simple")
    )
    assert by_did.dataset_id == record.id and by_did.new_head == record.head


async def test_listing_etags_and_ranges(node_a: Workspace, serve: ServeFactory) -> None:
    await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    record = await node_a.resolve("cities")
    dataset = await node_a.get_dataset("cities")
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url) as response:
            listing = await response.json()
        assert [(d["alias"], d["id"], d["head"]) for d in listing["datasets"]] == [
            ("cities", str(record.id), str(record.head))
        ]
        async with session.get(server.url + "cities/refs/head") as response:
            assert await response.text() == str(record.head)
            etag = response.headers["ETag"]
        async with session.get(
            server.url + "cities/refs/head", headers={"If-None-Match": etag}
        ) as response:
            assert response.status == 304
        data_hash = [h async for h in dataset.data.iter_hashes()][0]
        whole = await dataset.data.get_bytes(data_hash)
        url = f"{server.url}cities/data/{data_hash}"
        async with session.get(url, headers={"Range": "bytes=4-11"}) as response:
            assert response.status == 206
            assert await response.read() == whole[4:12]
            assert response.headers["Content-Range"] == f"bytes 4-11/{len(whole)}"
            assert response.headers["ETag"] == f'"{data_hash}"'
        async with session.get(url, headers={"Range": f"bytes={len(whole)}-"}) as response:
            assert response.status == 416
        async with session.head(url) as response:
            assert response.status == 200 and response.content_length == len(whole)
        async with session.get(
            f"{server.url}cities/data/{data_hash}?scope=x&size=1&expires=9999999999&signature=00"
        ) as response:
            assert response.status == 403
        async with session.get(server.url + "nope/refs/head") as response:
            assert response.status == 404


async def test_push_needs_a_valid_token(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_b, "cities", slices=2)
    server = await serve(node_a)
    for token in (None, "wrong"):
        with pytest.raises(AccessDeniedError, match="refused to push"):
            await push(node_b, "cities", server.url + "cities", options=PushOptions(token=token))
        assert await node_a.list_datasets() == []
    assert [p.name for p in node_a.layout.datasets_dir.iterdir()] == []


async def test_push_creates_then_updates_a_dataset(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_b, "cities", slices=2, empty_blocks=1)
    server = await serve(node_a)
    url = server.url + "cities"
    options = PushOptions(token=PUSH_TOKEN)
    created = await push(node_b, "cities", url, options=options)
    source = await node_b.get_dataset("cities")
    assert source.id is not None
    assert created.num_blocks == 6 and created.num_objects == 4
    assert (await node_a.resolve("cities")).head == await source.chain.head()
    await verify_integrity(await node_a.get_dataset("cities"))
    await odfd_verify_integrity(node_a, "cities")

    head = await writer.append(slices=1)
    updated = await push(node_b, "cities", url, options=options)
    assert (updated.num_blocks, updated.old_remote_head, updated.new_remote_head) == (
        1,
        created.new_remote_head,
        head,
    )
    assert (await node_a.resolve("cities")).head == head
    assert (await push(node_b, "cities", url, options=options)).num_blocks == 0
    assert await node_b.catalog.remote_aliases(source.id, "push") == [url]


async def test_concurrent_pushes_one_wins_the_other_diverges(
    node_a: Workspace, node_b: Workspace, tmp_path, serve: ServeFactory
) -> None:
    writer_b = await create_root(node_b, "cities", slices=1)
    server = await serve(node_a)
    url = server.url + "cities"
    options = PushOptions(token=PUSH_TOKEN)
    await push(node_b, "cities", url, options=options)
    async with await Workspace.init(tmp_path / "node-c") as node_c:
        await pull(node_c, url)
        head_c = await (await node_c.get_dataset("cities")).chain.head()
        writer_c = type(writer_b)(
            await node_c.get_dataset("cities"),
            writer_b.rng,
            writer_b.next_offset,
            writer_b.last_checkpoint,
            writer_b.watermark_step + 100,
        )
        head_b = await writer_b.append(slices=2)
        head_c = await writer_c.append(slices=1)
        results = await asyncio.gather(
            push(node_b, "cities", url, options=options),
            push(node_c, "cities", url, options=options),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, BaseException)]
        assert len(winners) == 1 and len(losers) == 1, results
        assert isinstance(losers[0], DivergedError), losers[0]
        remote_head = (await node_a.resolve("cities")).head
        assert remote_head == winners[0].new_remote_head and remote_head in (head_b, head_c)
        await verify_integrity(await node_a.get_dataset("cities"))
        # Nothing is lost: the loser still has its history and is told to reconcile.
        loser_ws = node_c if remote_head == head_b else node_b
        loser_head = head_c if remote_head == head_b else head_b
        assert (await loser_ws.resolve("cities")).head == loser_head
        with pytest.raises(DivergedError, match="histories diverged"):
            await push(loser_ws, "cities", url, options=options)


async def test_divergence_is_detected_and_force_replaces(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer_a = await create_root(node_a, "cities", slices=2)
    server = await serve(node_a)
    url = server.url + "cities"
    first = await pull(node_b, url)
    local = await node_b.get_dataset("cities")
    writer_b = type(writer_a)(
        local,
        writer_a.rng,
        writer_a.next_offset,
        writer_a.last_checkpoint,
        writer_a.watermark_step + 50,
    )
    local_head = await writer_b.append(slices=1)
    remote_head = await writer_a.append(slices=2)
    before = await files_of(node_b)
    for protocol in ("smart", "simple"):
        with pytest.raises(DivergedError) as error:
            await pull(node_b, url, options=PullOptions(protocol=protocol))
        assert error.value.common is not None and error.value.common.hash == first.new_head
        assert str(first.new_head) in str(error.value) and "--force" in str(error.value)
        assert (await node_b.resolve("cities")).head == local_head
        assert await files_of(node_b) == before
    forced = await pull(node_b, url, options=PullOptions(force=True))
    assert forced.new_head == remote_head and forced.num_blocks == 2
    assert (await node_b.resolve("cities")).head == remote_head
    await verify_integrity(await node_b.get_dataset("cities"))


async def test_local_ahead_pulls_nothing_and_push_refuses_remote_ahead(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    url = server.url + "cities"
    await pull(node_b, url)
    local = await node_b.get_dataset("cities")
    ahead = type(writer)(
        local, writer.rng, writer.next_offset, writer.last_checkpoint, writer.watermark_step + 9
    )
    await ahead.append(slices=1, empty_blocks=1)
    result = await pull(node_b, url)
    assert not result.updated and result.local_ahead == 2
    await writer.append(slices=1)
    with pytest.raises(DivergedError):
        await push(node_b, "cities", url, options=PushOptions(token=PUSH_TOKEN))
    # A remote strictly ahead of an older local copy is refused with advice to pull first.
    async with await Workspace.init(node_b.root.parent / "node-d") as node_d:
        await pull(node_d, url)
        await writer.append(slices=1)
        record = await node_a.resolve("cities")
        dataset_d = await node_d.get_dataset("cities")
        assert (await dataset_d.chain.head()) != record.head
        with pytest.raises(RemoteAheadError, match="pull first"):
            await push(node_d, "cities", url, options=PushOptions(token=PUSH_TOKEN))


async def test_plain_file_server_falls_back_to_simple(node_a: Workspace, node_b: Workspace) -> None:
    """A dataset folder behind any static HTTP server is pullable (Simple Transfer Protocol);
    ``odf+http://`` insists on the Smart one."""
    await create_root(node_a, "cities", slices=2)
    record = await node_a.resolve("cities")
    app = web.Application()
    app.router.add_static("/ds", node_a.layout.dataset(record.id).root)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"127.0.0.1:{runner.addresses[0][1]}/ds"
    try:
        result = await pull(node_b, f"http://{base}", alias="cities")
        assert result.protocol == "simple" and result.new_head == record.head
        await verify_integrity(await node_b.get_dataset("cities"))
        await odfd_verify_integrity(node_b, "cities")
        with pytest.raises(SmartUnavailableError):
            await pull(node_b, f"odf+http://{base}", alias="other")
    finally:
        await runner.cleanup()


async def test_file_urls_push_and_pull(node_a: Workspace, node_b: Workspace, tmp_path) -> None:
    writer = await create_root(node_a, "cities", slices=2)
    folder = tmp_path / "exported"
    pushed = await push(node_a, "cities", f"file://{folder}")
    assert pushed.num_blocks == 4 and pushed.num_objects == 4
    head = await writer.append(slices=1)
    again = await push(node_a, "cities", f"file://{folder}")
    assert again.num_blocks == 1 and again.new_remote_head == head
    pulled = await pull(node_b, f"file://{folder}", alias="cities")
    assert pulled.new_head == head and pulled.num_objects == 6
    await verify_integrity(await node_b.get_dataset("cities"))
    await odfd_verify_integrity(node_b, "cities")


def test_progress_line_counts_blocks_objects_and_bytes() -> None:
    stream = io.StringIO()
    progress = Progress("pull cities", stream, enabled=True)
    progress.add_blocks(12)
    progress.set_phase("objects", objects_total=3)
    progress.object_done()
    progress.add_bytes(2048)
    line = progress.line()
    assert line.startswith("pull cities: objects: 12 blocks, 1/3 objects, 2.0 KiB at ")
    assert "\r\x1b[K" in stream.getvalue()
    quiet = io.StringIO()
    Progress("x", quiet, enabled=False).add_blocks(1)
    assert quiet.getvalue() == ""


async def test_server_commits_only_one_of_two_interleaved_pushes(
    node_a: Workspace, node_b: Workspace, tmp_path, serve: ServeFactory
) -> None:
    """Both sessions are accepted from the same head and upload everything; the second
    ``DatasetPushComplete`` loses the compare-and-swap and is refused, leaving the winner's head."""
    writer_b = await create_root(node_b, "cities", slices=1, checkpoints=False)
    server = await serve(node_a)
    url = server.url + "cities"
    await push(node_b, "cities", url, options=PushOptions(token=PUSH_TOKEN))
    base = (await node_a.resolve("cities")).head
    async with await Workspace.init(tmp_path / "node-c") as node_c:
        await pull(node_c, url)
        dataset_c = await node_c.get_dataset("cities")
        writer_c = type(writer_b)(
            dataset_c,
            writer_b.rng,
            writer_b.next_offset,
            writer_b.last_checkpoint,
            writer_b.watermark_step + 100,
        )
        heads = [
            await writer_b.append(slices=1, checkpoints=False),
            await writer_c.append(slices=1, checkpoints=False),
        ]
        sources = [await node_b.get_dataset("cities"), dataset_c]
        async with aiohttp.ClientSession() as session, contextlib.AsyncExitStack() as stack:
            channels = []
            for dataset, head in zip(sources, heads, strict=True):
                block = await dataset.chain.get_block(head)
                count, payload = pack_blocks([(head, await dataset.chain.get_block_bytes(head))])
                channel = await stack.enter_async_context(
                    smart.connect(session, server.url + "cities/", "push", PUSH_TOKEN)
                )
                await smart.push_begin(
                    channel,
                    base,
                    m.TransferPlan(1, 1, 10, 1, 1),
                    False,
                    m.MetadataBlocksBatch(count, payload),
                )
                data = block.event.new_data
                strategies = await smart.push_object_urls(
                    channel, (m.ObjectFileReference("DataSlice", data.physical_hash, data.size),)
                )
                [strategy] = strategies
                assert strategy.push_strategy == "HttpUpload" and strategy.upload_to is not None
                async with session.put(
                    strategy.upload_to.url,
                    data=await dataset.data.get_bytes(data.physical_hash),
                    headers=dict(strategy.upload_to.headers),
                ) as response:
                    assert response.status == 200
                await channel.send(m.DatasetPushObjectsUploadProgressResponse())
                channels.append(channel)
            await smart.push_complete(channels[0])
            with pytest.raises(smart.RemoteTransferError, match="diverged"):
                await smart.push_complete(channels[1])
    assert (await node_a.resolve("cities")).head == heads[0]
    await verify_integrity(await node_a.get_dataset("cities"))


async def test_server_refuses_a_lying_pusher(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    """Uploads must match the signed hash and size, a push must link to the server's head, and a
    commit naming an object never uploaded is refused; the served dataset stays as it was."""
    writer = await create_root(node_b, "cities", slices=1, checkpoints=False)
    server = await serve(node_a)
    url = server.url + "cities"
    await push(node_b, "cities", url, options=PushOptions(token=PUSH_TOKEN))
    base = (await node_a.resolve("cities")).head
    head = await writer.append(slices=1, checkpoints=False)
    dataset = await node_b.get_dataset("cities")
    block = await dataset.chain.get_block(head)
    count, payload = pack_blocks([(head, await dataset.chain.get_block_bytes(head))])
    batch = m.MetadataBlocksBatch(count, payload)
    async with aiohttp.ClientSession() as session:
        async with smart.connect(session, server.url + "cities/", "push", PUSH_TOKEN) as channel:
            with pytest.raises(smart.RemoteTransferError, match="diverged"):
                await smart.push_begin(channel, head, m.TransferPlan(1, 1, 1, 1, 1), False, batch)
        async with smart.connect(session, server.url + "cities/", "push", PUSH_TOKEN) as channel:
            await smart.push_begin(channel, base, m.TransferPlan(1, 1, 1, 1, 1), False, batch)
            data = block.event.new_data
            [strategy] = await smart.push_object_urls(
                channel, (m.ObjectFileReference("DataSlice", data.physical_hash, data.size),)
            )
            assert strategy.upload_to is not None
            upload = strategy.upload_to.url
            for body, status in ((b"\0" * data.size, 400), (b"\0" * (data.size + 1), 413)):
                async with session.put(upload, data=body) as response:
                    assert response.status == status
            async with session.put(
                upload.replace("signature=", "signature=0"), data=b"x"
            ) as response:
                assert response.status == 403
            await channel.send(m.DatasetPushObjectsUploadProgressResponse())
            with pytest.raises(smart.RemoteTransferError, match="missing-object"):
                await smart.push_complete(channel)
    assert (await node_a.resolve("cities")).head == base
    await verify_integrity(await node_a.get_dataset("cities"))
