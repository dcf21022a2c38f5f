"""A node whose datasets live in an S3 bucket (``[storage] url``), against a real S3 server
(SeaweedFS, access keys checked): the leaderboard example end to end and served to a second
node, ``odfd repair`` from the bucket, pulls into the bucket, two nodes racing on one dataset,
the read-through cache, and bad configuration refused at start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import pyarrow.parquet as pq
import pytest

from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node, open_node
from odfd.config import ConfigError, load_config
from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.transform import update_derivative
from odfd.sync.pull import pull
from odfd.sync.push import PushOptions, push
from protocol.identity import Multihash
from protocol.model import SetInfo, Timestamp
from storage.catalog.mirrors import MirrorTable
from storage.chain.validate import validate_chain
from storage.errors import HashMismatchError, RefCasError
from storage.layout import object_name
from storage.object_cache import ObjectCache
from storage.s3_storage import S3DatasetStorage, S3StorageError
from storage.stores.s3 import S3ObjectStore
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import SECRET_KEY, SeaweedServer
from tests.fixtures.spark import TEST_ENGINES
from tests.fixtures.workspace import object_path
from tests.pipeline.conftest import create
from tests.pipeline.test_pipelines import EXAMPLES, add_examples, clock
from tests.replication.conftest import PUSH_TOKEN, ServeFactory
from tests.replication.datagen import create_root, odfd_verify_integrity
from tests.replication.s3_pair import bucket_of
from tests.replication.test_cli import odfd
from tests.replication.test_s3 import bucket_files
from verifier.audit import VerifyOptions, verify
from verifier.engine.inputs import all_slices, slice_paths


async def s3_backed_node(
    path: Path, server: SeaweedServer, url: str, *, secret: str = SECRET_KEY
) -> Workspace:
    """A workspace configured to keep its datasets at ``url``, opened as the CLI opens it."""
    workspace = await Workspace.init(path)
    config = workspace.layout.config_path
    text = f'{server.config_toml(secret=secret)}\n[storage]\nurl = "{url}"\n'
    await asyncio.to_thread(config.write_text, config.read_text() + "\n" + text)
    await workspace.close()
    return (await open_node(path)).workspace


def local_dataset_folders(workspace: Workspace) -> list[str]:
    folder = workspace.layout.datasets_dir
    return (
        [p.name for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
    )


@pytest.mark.usefixtures("spark")  # the session shared by the suite, with the test settings
async def test_leaderboard_on_an_s3_node_served_to_a_local_node(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path, serve: ServeFactory
) -> None:
    url = s3_server.url(s3_bucket, "node")
    now = clock()
    async with await s3_backed_node(tmp_path / "s3node", s3_server, url) as node:
        assert isinstance(node.storage, S3DatasetStorage)
        await add_examples(node, "leaderboard")
        scores = await node.get_dataset("match.scores")
        board = await node.get_dataset("match.leaderboard")
        for n in (1, 2):  # two transactions: the second reads the first's checkpoint
            path = EXAMPLES / "leaderboard" / "data" / f"{n}.ndjson"
            await ingest_push(node, scores, path, system_time=now(), engines=TEST_ENGINES)
            assert not (
                await update_derivative(node, board, system_time=now(), engines=TEST_ENGINES)
            ).up_to_date
        tables = [
            await asyncio.to_thread(pq.read_table, p)
            for p in await slice_paths(board, await all_slices(board))
        ]
        places = [
            (row["match_id"], row["place"], row["player"])
            for table in tables
            for row in table.to_pylist()
        ]
        assert places == [
            (1, 1, "alice"),
            (1, 2, "carol"),
            (1, 3, "bob"),
            (2, 1, "carol"),  # a tie is broken by the player's name
            (2, 2, "erin"),
            (2, 3, "alice"),
        ]

        # Everything is in the bucket, in the spec's layout; nothing in datasets/.
        assert local_dataset_folders(node) == []
        keys = await bucket_files(s3_server, url)
        for record in await node.list_datasets():
            prefix = f"{record.id.to_multibase()}/"
            assert record.head is not None
            assert keys[f"{prefix}refs/head"].decode() == object_name(record.head)
            assert f"{prefix}info/alias" in keys
        assert sum(k.split("/")[1] == "checkpoints" for k in keys) >= 2  # Spark's checkpoints

        # verify: integrity of both, and the leaderboard's transforms replayed in Spark.
        report = await verify(
            node,
            ["match.leaderboard"],
            VerifyOptions(jobs=1, scratch_dir=tmp_path / "v"),
            engines=TEST_ENGINES,
        )
        assert report.exit_code == 0, report.dumps()
        await odfd_verify_integrity(node, "match.scores")

        # A second, local workspace pulls the derivative from the S3 node's HTTP server.
        server = await serve(node)
        async with await Workspace.init(tmp_path / "local") as local:
            result = await pull(local, server.url + "match.leaderboard")
            copy = await local.get_dataset("match.leaderboard")
            assert result.new_head == await board.chain.head()
            await odfd_verify_integrity(local, "match.leaderboard")
            for hash in await all_slices(copy):
                assert (
                    object_path(copy.data, hash).read_bytes()
                    == keys[f"{board.id.to_multibase()}/data/{object_name(hash)}"]
                )


UPPER = """\
kind: DatasetSnapshot
version: 1
content:
  name: cities.upper
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: cities
      transform:
        kind: Sql
        engine: datafusion
        query: SELECT event_time, upper(value) AS value FROM cities
"""


async def test_datafusion_transform_then_repair_from_the_bucket(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A DataFusion derivative transformed twice on an S3 node and verified (its transactions
    replayed); then the catalog file is deleted and ``repair`` rebuilds it from the bucket."""
    url = s3_server.url(s3_bucket, "datasets")
    root = tmp_path / "node"
    async with await s3_backed_node(root, s3_server, url) as node:
        writer = await create_root(node, "cities", slices=2)
        await create_root(node, "rivers", slices=1, seed=2)
        upper = await create(node, UPPER)
        assert not (await update_derivative(node, upper, engines=TEST_ENGINES)).up_to_date
        await writer.append(slices=1)
        assert not (await update_derivative(node, upper, engines=TEST_ENGINES)).up_to_date
        values = [
            row["value"]
            for path in await slice_paths(upper, await all_slices(upper))
            for row in pq.read_table(path).to_pylist()
        ]
        assert len(values) == 30 and all(v == v.upper() for v in values)
        report = await verify(
            node,
            ["cities.upper"],
            VerifyOptions(jobs=1, scratch_dir=root / "v"),
            engines=TEST_ENGINES,
        )
        assert report.exit_code == 0, report.dumps()
        before = {(r.alias, r.id, r.head, r.head_sequence) for r in await node.list_datasets()}
        await writer.dataset.set_remote_aliases("pull", ["https://example.org/cities"])
    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
        (root / name).unlink(missing_ok=True)
    async with (await open_node(root)).workspace as node:
        assert await node.list_datasets() == []
        repaired = await node.repair()
        assert not repaired.skipped
        after = {(r.alias, r.id, r.head, r.head_sequence) for r in await node.list_datasets()}
        assert after == before
        record = await node.resolve("cities")
        assert await node.catalog.remote_aliases(record.id, "pull") == [
            "https://example.org/cities"
        ]
        await odfd_verify_integrity(node, "cities")
        # Deleting goes through the bucket too: head first, then every key of the dataset.
        await node.delete_dataset("rivers")
        assert {r.alias for r in (await node.repair()).registered} == {"cities", "cities.upper"}
        # A data object changed in the bucket (not in the cache) is a physical-hash finding.
        slice_hash = (await all_slices(node.open_dataset((await node.resolve("cities")).id)))[0]
        key = next(
            k for k in await bucket_files(s3_server, url) if k.endswith(object_name(slice_hash))
        )
        bucket = bucket_of(s3_server, url)
        await bucket.put(bucket.location.prefix + key, b"tampered")
        assert isinstance(node.storage, S3DatasetStorage)
        node.storage.cache.path_of(slice_hash).unlink(missing_ok=True)
        report = await verify(
            node,
            ["cities"],
            VerifyOptions(integrity_only=True, scratch_dir=root / "v2"),
            engines=TEST_ENGINES,
        )
        found = [(f.rule, f.file) for d in report.datasets for x in d.layers for f in x.findings]
        assert found == [("physical-hash", f"data/{object_name(slice_hash)}")], report.dumps()


async def test_mirror_syncs_commit_into_the_bucket(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """The daemon's mirror of a dataset into an S3 node: the first sync is assembled locally and
    committed into the bucket (head last), the next appends there, its new objects written
    through the cache."""
    url = s3_server.url(s3_bucket, "mirror")
    async with (
        await Workspace.init(tmp_path / "source") as source,
        await s3_backed_node(tmp_path / "node", s3_server, url) as node,
    ):
        writer = await create_root(source, "cities", slices=2)
        assert writer.dataset.id is not None
        remote = source.layout.dataset(writer.dataset.id).root.as_uri()
        config = load_config(node.layout.config_path)
        record = await MirrorTable(node.catalog).add("cities", remote, [], 60.0)
        async with aiohttp.ClientSession() as session:
            first = await MirrorSyncer(Node(node, config), session).sync(record)
            assert first.attempt.outcome == "updated", first.attempt.error
            assert local_dataset_folders(node) == []
            head = await writer.append(slices=2)
            again = await MirrorSyncer(Node(node, config), session).sync(record)
            assert again.attempt.outcome == "updated", again.attempt.error
        dataset = await node.get_dataset("cities")
        assert await dataset.chain.head() == head == (await node.resolve("cities")).head
        await validate_chain(
            dataset.chain, dataset_id=dataset.id, data=dataset.data, checkpoints=dataset.checkpoints
        )
        await odfd_verify_integrity(node, "cities")
        keys = await bucket_files(s3_server, url)
        assert sum(f"{writer.dataset.id.to_multibase()}/data/" in k for k in keys) == 4
        cached = {p.name for p in (node.root / "cache" / "objects").iterdir()}
        assert {k.rsplit("/", 1)[1] for k in keys if "/data/" in k} <= cached


async def test_pushes_to_an_s3_nodes_server_land_in_the_bucket(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path, serve: ServeFactory
) -> None:
    """Smart Transfer pushes into an S3 node: a new dataset is staged and committed into the
    bucket; the next push uploads its objects through the signed URLs into the bucket."""
    url = s3_server.url(s3_bucket, "pushed")
    async with (
        await Workspace.init(tmp_path / "source") as source,
        await s3_backed_node(tmp_path / "node", s3_server, url) as node,
    ):
        writer = await create_root(source, "cities", slices=2)
        server = await serve(node)
        options = PushOptions(token=PUSH_TOKEN)
        created = await push(source, "cities", server.url + "cities", options=options)
        assert created.num_objects == 4  # two slices, two checkpoints
        head = await writer.append(slices=1)
        updated = await push(source, "cities", server.url + "cities", options=options)
        assert (updated.num_blocks, updated.new_remote_head) == (1, head)
        assert (await node.resolve("cities")).head == head
        assert local_dataset_folders(node) == []
        await odfd_verify_integrity(node, "cities")
        keys = await bucket_files(s3_server, url)
        assert writer.dataset.id is not None
        assert keys[f"{writer.dataset.id.to_multibase()}/refs/head"] == object_name(head).encode()


async def test_two_nodes_racing_on_one_dataset_one_head_wins(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    url = s3_server.url(s3_bucket, "shared")
    async with (
        await s3_backed_node(tmp_path / "a", s3_server, url) as node_a,
        await s3_backed_node(tmp_path / "b", s3_server, url) as node_b,
    ):
        await create_root(node_a, "cities", slices=1)
        await node_b.repair()
        for round in range(3):
            ours = await node_a.get_dataset("cities")
            theirs = await node_b.get_dataset("cities")
            head = await ours.chain.head()
            assert await theirs.chain.head() == head
            results = await asyncio.gather(
                *(
                    dataset.commit_event(
                        SetInfo(description=f"round {round} by {who}"),
                        expected_head=head,
                        system_time=Timestamp.of(2030, 1, 1 + round),
                    )
                    for who, dataset in (("a", ours), ("b", theirs))
                ),
                return_exceptions=True,
            )
            won = [r for r in results if not isinstance(r, BaseException)]
            lost = [r for r in results if isinstance(r, BaseException)]
            assert len(won) == 1 and len(lost) == 1, results
            assert isinstance(lost[0], RefCasError) and "another write won" in str(lost[0])
            assert await ours.chain.head() == won[0].new_head
            # The loser's block may stay in the bucket unreferenced; the winner's is there.
            assert await ours.blocks.contains(won[0].new_head)
        state = await validate_chain(ours.chain, dataset_id=ours.id)
        assert state.sequence_number == 2 + 3
        await odfd_verify_integrity(node_b, "cities")


async def test_cache_is_content_addressed_bounded_and_checked(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    url = s3_server.url(s3_bucket, "objects")
    bucket = bucket_of(s3_server, url)
    store = S3ObjectStore(bucket, bucket.location, "data")
    blobs = [bytes([n]) * 1000 for n in range(4)]
    hashes = [await store.put_bytes(blob) for blob in blobs]
    cache = ObjectCache(tmp_path / "cache", max_bytes=2500, grace=0)
    for used, (hash, blob) in enumerate(zip(hashes, blobs, strict=True)):
        path = await cache.fetch(store, hash)
        assert path.name == object_name(hash) and path.read_bytes() == blob
        os.utime(path, (1000 + used, 1000 + used))  # used long ago, in this order
    # Bounded: the least recently used went, the newest stayed.
    assert sorted(p.name for p in cache.root.iterdir()) == sorted(
        object_name(h) for h in hashes[2:]
    )
    # A refetch is a cache hit (no request) and refreshes the entry's use time.
    assert await cache.fetch(store, hashes[3]) == cache.path_of(hashes[3])
    # An object whose bytes do not hash to its name never enters the cache.
    wrong = Multihash.from_digest_sha3_256(b"something else")
    await bucket.put(store.key_of(wrong), b"tampered")
    with pytest.raises(HashMismatchError):
        await cache.fetch(store, wrong)
    assert not cache.path_of(wrong).exists()


async def test_bad_storage_config_is_one_line_at_start(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Refused credentials, a missing bucket and a malformed URL each stop the node at start with
    one line (the CLI prints just that), before anything is read or written."""
    url = s3_server.url(s3_bucket, "node")
    with pytest.raises(S3StorageError) as denied:
        await s3_backed_node(tmp_path / "a", s3_server, url, secret="wrong-secret-000000")
    message = str(denied.value)
    assert "\n" not in message and "[storage] url" in message and "access denied" in message
    assert "wrong-secret" not in message and SECRET_KEY not in message
    missing = s3_server.url("no-such-bucket-here", "node")
    with pytest.raises(S3StorageError, match=r"no such bucket") as absent:
        await s3_backed_node(tmp_path / "b", s3_server, missing)
    assert "\n" not in str(absent.value)
    repaired = await asyncio.to_thread(odfd, "repair", "--root", str(tmp_path / "b"))
    assert repaired.returncode != 0 and repaired.stdout == ""
    [line] = repaired.stderr.strip().splitlines()
    assert "[storage] url" in line and "no such bucket" in line
    config = tmp_path / "c.toml"
    config.write_text('[storage]\nurl = "s3+http://127.0.0.1:1/Bad_Bucket/x"\n')
    with pytest.raises(ConfigError, match=r"storage.*url.*not a bucket name"):
        load_config(config)
    config.write_text('[storage]\nurl = "ftp://somewhere/x"\n')
    with pytest.raises(ConfigError, match=r"not an S3 URL"):
        load_config(config)
