"""An interrupted pull resumes: what it verified stays (invisible), the next pull fetches only
the rest, and the catalog's transfer row tracks how far it got."""

from __future__ import annotations

import resource
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from odfd.config import ServerConfig
from odfd.server.app import create_app
from odfd.sync.errors import SyncError
from odfd.sync.pull import PullOptions, pull
from storage.errors import StorageError
from storage.workspace import Workspace
from tests.replication.datagen import create_root, verify_integrity


class Flaky:
    """Counts GETs by kind and fails object downloads (503) after ``budget`` of them."""

    def __init__(self) -> None:
        self.budget: int | None = None
        self.gets: dict[str, int] = {"blocks": 0, "objects": 0}

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        if request.method == "GET" and len(parts) >= 3 and parts[-2] in ("data", "checkpoints"):
            if self.budget is not None:
                if self.budget <= 0:
                    return web.Response(status=503, text="maintenance")
                self.budget -= 1
            self.gets["objects"] += 1
        elif request.method == "GET" and len(parts) >= 3 and parts[-2] == "blocks":
            self.gets["blocks"] += 1
        return await handler(request)


@asynccontextmanager
async def serve_flaky(node: Workspace, name: str) -> AsyncIterator[tuple[str, Flaky]]:
    """``node`` served on a free port behind a ``Flaky``: the URL of its dataset ``name``."""
    flaky = Flaky()
    app = create_app(node, ServerConfig(port=0))
    app.middlewares.append(flaky.middleware)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/{name}", flaky
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_interrupted_pull_resumes_without_refetching(
    node_a: Workspace, node_b: Workspace, protocol: str
) -> None:
    await create_root(node_a, "cities", slices=6)  # 12 objects
    async with serve_flaky(node_a, "cities") as (url, flaky):
        flaky.budget = 5
        with pytest.raises(StorageError, match="503"):
            await pull(node_b, url, options=PullOptions(protocol=protocol, parallel=1))
        assert await node_b.list_datasets() == []
        record_a = await node_a.resolve("cities")
        transfer = await node_b.catalog.get_transfer(record_a.id, url, "pull")
        assert transfer is not None and transfer.target_head == record_a.head
        assert (transfer.objects_total, transfer.objects_done) == (12, 5)

        flaky.budget = None
        flaky.gets = {"blocks": 0, "objects": 0}
        result = await pull(node_b, url, options=PullOptions(protocol=protocol))
        assert result.resumed_objects == 5 and result.num_objects == 7
        assert flaky.gets["objects"] == 7
        if protocol == "simple":
            assert (
                flaky.gets["blocks"] == 0
            )  # every block was verified and kept by the first attempt
        assert await node_b.catalog.get_transfer(record_a.id, url, "pull") is None
        assert (await node_b.resolve("cities")).head == record_a.head
        await verify_integrity(await node_b.get_dataset("cities"))
        assert not [p for p in node_b.layout.datasets_dir.iterdir() if p.name.startswith(".")]


async def test_a_resumed_pull_rereads_the_blocks_an_earlier_attempt_stored(
    node_a: Workspace, node_b: Workspace
) -> None:
    """A smart pull's large block batch is read back by the child that wrote it; a block the
    interrupted attempt left (not rewritten by the resumed one) is re-read before head moves:
    one spoiled meanwhile stops the pull, and nothing is made the dataset."""
    await create_root(node_a, "cities", slices=30, empty_blocks=9, checkpoints=False)  # 302 blocks
    async with serve_flaky(node_a, "cities") as (url, flaky):
        flaky.budget = 5
        with pytest.raises(StorageError, match="503"):
            await pull(node_b, url, options=PullOptions(protocol="smart", parallel=1))
        stashed = sorted(node_b.layout.datasets_dir.glob(".*/blocks/f1620*"))
        assert len(stashed) == 302
        for path in stashed[22:]:  # the resumed pull writes these again, in a child
            path.unlink()
        stashed[7].write_bytes(stashed[7].read_bytes() + b" ")
        flaky.budget = None
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        with pytest.raises(SyncError, match=f"block file {stashed[7].name}: content hashes"):
            await pull(node_b, url, options=PullOptions(protocol="smart"))
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > children_before
        assert await node_b.list_datasets() == []
