"""Force transfers both ways between odfd and a peer written from the reference's messages.

``tests/replication/kamu_peer.py`` is a client and a server built from kamu-cli's
``smart_protocol/messages.rs`` and its client and server flows, not from odfd's classes. The
cases restate kamu-cli's ``src/e2e/app/cli/repo-tests/src/test_smart_transfer_protocol.rs``
``test_smart_push_force_smart_pull_force`` (a push over a history the target lacks fails
without ``--force`` and replaces it with; a pull into a copy that went ahead fails without
``--force`` and resets it with), over Smart Transfer in both directions and Simple Transfer for
pulls.
"""

from __future__ import annotations

import random

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from odfd.sync.errors import RemoteAheadError
from odfd.sync.pull import PullOptions, pull
from odfd.sync.push import PushOptions, push
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.replication import kamu_peer as kamu
from tests.replication.conftest import PUSH_TOKEN, ServeFactory
from tests.replication.datagen import DatasetWriter, create_root, verify_integrity


async def _two_copies(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> tuple[str, DatasetWriter, DatasetWriter, kamu.Repo]:
    """``cities`` on node A (served by odfd) and the same history on node B, whose folder the
    reference-side peer uses as its repository."""
    writer_a = await create_root(node_a, "cities", slices=2)
    server = await serve(node_a)
    await pull(node_b, server.url + "cities")
    local = await node_b.get_dataset("cities")
    assert local.layout is not None
    return server.url, writer_a, fork(writer_a, local), kamu.Repo(local.layout.root)


def fork(writer: DatasetWriter, dataset: Dataset) -> DatasetWriter:
    """A writer appending other slices to ``dataset``, a copy of ``writer``'s history."""
    return DatasetWriter(
        dataset,
        random.Random(99),
        writer.next_offset,
        writer.last_checkpoint,
        writer.watermark_step + 50,
    )


async def _head(dataset: Dataset) -> str:
    return str(await dataset.chain.head())


async def test_reference_client_force_pushes_a_diverged_history(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    base, writer_a, writer_b, repo = await _two_copies(node_a, node_b, serve)
    await writer_a.append(slices=2)
    ours = await writer_b.append(slices=1)
    target = await node_a.get_dataset("cities")
    async with aiohttp.ClientSession() as session:
        refused = await kamu.client_push(
            session, base, "cities", repo, await _head(target), force=False, token=PUSH_TOKEN
        )
    assert refused == {"result": "InvalidInterval"}
    assert await target.chain.head() != ours
    async with aiohttp.ClientSession() as session:
        done = await kamu.client_push(
            session, base, "cities", repo, await _head(target), force=True, token=PUSH_TOKEN
        )
    assert done["result"] == "Updated" and done["uploaded"] == 2  # the new slice + checkpoint
    assert await target.chain.head() == ours
    await verify_integrity(target)


async def test_reference_client_force_pushes_an_older_head(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    base, writer_a, _, repo = await _two_copies(node_a, node_b, serve)
    older = repo.head()
    await writer_a.append(slices=1)
    target = await node_a.get_dataset("cities")
    async with aiohttp.ClientSession() as session:
        done = await kamu.client_push(
            session, base, "cities", repo, await _head(target), force=True, token=PUSH_TOKEN
        )
    assert done == {"result": "Updated", "uploaded": 0, "skipped": 4}
    assert await _head(target) == older
    await verify_integrity(target)


async def test_reference_client_force_pulls_over_its_own_history(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    base, writer_a, writer_b, repo = await _two_copies(node_a, node_b, serve)
    source = await node_a.get_dataset("cities")
    await writer_b.append(slices=1)  # the reference side is ahead
    async with aiohttp.ClientSession() as session:
        assert await kamu.client_pull(session, base, "cities", repo, force=False) == {
            "result": "Diverged"
        }
        done = await kamu.client_pull(session, base, "cities", repo, force=True)
    assert done["result"] == "Updated" and repo.head() == await _head(source)

    writer_b = fork(writer_a, writer_b.dataset)
    await writer_b.append(slices=1)  # now diverged: both sides have blocks the other lacks
    await writer_a.append(slices=1)
    async with aiohttp.ClientSession() as session:
        done = await kamu.client_pull(session, base, "cities", repo, force=True)
    assert repo.head() == await _head(source)
    await verify_integrity(Dataset.open_local(repo.root))


@pytest.fixture
async def reference_server(node_b: Workspace):
    """The reference-side server, serving node B's copy of ``cities`` from its folder."""
    servers = []

    async def start(repo: kamu.Repo) -> str:
        server = TestServer(kamu.server_app({"cities": repo}), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}/cities/"

    yield start
    for server in servers:
        await server.close()


async def test_odfd_force_push_to_a_reference_server(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory, reference_server
) -> None:
    _, writer_a, writer_b, repo = await _two_copies(node_a, node_b, serve)
    url = await reference_server(repo)
    await writer_b.append(slices=1)  # the reference side is ahead
    with pytest.raises(RemoteAheadError):
        await push(node_a, "cities", url)
    result = await push(node_a, "cities", url, options=PushOptions(force=True))
    ours = await _head(await node_a.get_dataset("cities"))
    assert result.updated and repo.head() == ours
    assert "Skipped" not in result.describe() and "up to date" not in result.describe()

    writer_b = fork(writer_a, writer_b.dataset)
    await writer_b.append(slices=1)
    head_a = await writer_a.append(slices=2)  # diverged
    await push(node_a, "cities", url, options=PushOptions(force=True))
    assert repo.head() == str(head_a)
    await verify_integrity(Dataset.open_local(repo.root))


@pytest.mark.parametrize("protocol", ["smart", "simple"])
async def test_odfd_force_pull_from_a_reference_server(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory, reference_server, protocol: str
) -> None:
    _, writer_a, writer_b, repo = await _two_copies(node_a, node_b, serve)
    url = await reference_server(repo)
    options = PullOptions(force=True, protocol=protocol)
    await writer_a.append(slices=1)  # odfd is ahead of the reference side
    result = await pull(node_a, url, alias="cities", options=options)
    assert result.updated and result.num_blocks == 0
    assert await _head(await node_a.get_dataset("cities")) == repo.head()
    assert "reset" in result.describe()

    writer_a = fork(writer_b, await node_a.get_dataset("cities"))
    await writer_a.append(slices=1)
    await writer_b.append(slices=2)  # diverged
    await pull(node_a, url, alias="cities", options=options)
    copy = await node_a.get_dataset("cities")
    assert await _head(copy) == repo.head()
    await verify_integrity(copy)


async def test_reference_client_cannot_force_push_another_dataset(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    """``test_smart_push_smart_pull_force_overwrite_seed_block``: ``--force`` never replaces the
    Seed; the refusal is the reference's ``SeedBlockOverwriteRestricted`` result."""
    await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    other = await create_root(node_b, "cities", slices=1, seed=7)
    assert other.dataset.layout is not None
    target = await node_a.get_dataset("cities")
    head = await target.chain.head()
    async with aiohttp.ClientSession() as session:
        refused = await kamu.client_push(
            session,
            server.url,
            "cities",
            kamu.Repo(other.dataset.layout.root),
            str(head),
            force=True,
            token=PUSH_TOKEN,
        )
    assert refused == {"result": "Refused", "answer": {"Err": {"SeedBlockOverwriteRestricted": {}}}}
    assert await target.chain.head() == head
