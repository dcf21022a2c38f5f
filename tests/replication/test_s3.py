"""S3 remotes against a real S3 server (SeaweedFS, access keys checked): push into a bucket and
pull back byte for byte, incremental pulls, racing pushes, named repositories over a bucket
prefix, daemon mirrors from and into a bucket, and every kind of bad input."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from odfd.app.mirror_sync import MirrorSyncer
from odfd.app.node import Node, open_node
from odfd.config import NodeConfig, load_config
from odfd.sync.errors import CorruptSourceError, DivergedError, RemoteNotFoundError, SyncError
from odfd.sync.progress import Progress
from odfd.sync.pull import pull, pull_from_remotes
from odfd.sync.push import PushOptions, push
from odfd.sync.repos import expand
from odfd.sync.search import search_repo
from protocol.identity import Multihash
from storage.catalog.mirrors import MirrorTable
from storage.chain.validate import validate_chain
from storage.errors import RefCasError
from storage.layout import object_name
from storage.s3_client import S3AccessDeniedError, S3Bucket, S3BucketNotFoundError
from storage.s3_settings import parse_s3_url
from storage.s3_storage import S3DatasetStorage
from storage.stores.remote import RemoteUnavailableError
from storage.stores.s3 import S3RefStore, s3_dataset
from storage.workspace import Workspace
from tests.fixtures.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedServer
from tests.replication.datagen import create_root, odfd_verify_integrity, verify_integrity
from tests.replication.s3_pair import S3Pair, bucket_of, s3_node, via
from tests.replication.test_cli import odfd


async def bucket_files(server: SeaweedServer, url: str) -> dict[str, bytes]:
    """Every object under the URL's prefix, by key relative to it."""
    bucket = bucket_of(server, url)
    prefix = bucket.location.prefix
    keys = [key async for key in bucket.list_keys(prefix)]
    found = {}
    for key in keys:
        got = await bucket.get(key)
        assert got is not None
        found[key[len(prefix) :]] = got[0]
    return found


def folder_files(root: Path, *, without: tuple[str, ...] = ("info", "refs/head.sig")) -> dict:
    files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return {k: v for k, v in files.items() if not k.startswith(without)}


async def test_push_pull_round_trip_is_byte_identical_and_incremental(
    s3_pair: S3Pair, s3_bucket: str
) -> None:
    pair = replace(s3_pair, url=s3_pair.server.url(s3_bucket, "datasets/cities"))
    writer = await pair.create_root(slices=3, empty_blocks=1)
    pushed = await pair.push()
    assert (pushed.num_blocks, pushed.num_objects, pushed.signed) == (8, 6, True)
    source = pair.source.layout.dataset(writer.dataset_id).root
    # The bucket holds the spec's layout, with the same keys and bytes as the folder.
    stored = await bucket_files(pair.server, pair.url)
    assert {k: v for k, v in stored.items() if not k.startswith("info")} == folder_files(
        source, without=("info",)
    )
    assert stored["info/alias"] == b"cities"

    first = await pair.pull()
    assert (first.num_blocks, first.num_objects) == (8, 6)
    copy = await pair.target.get_dataset("cities")
    assert copy.id == writer.dataset_id
    assert folder_files(pair.target.layout.dataset(copy.id).root) == folder_files(source)
    assert await verify_integrity(copy) == await verify_integrity(writer.dataset)
    await odfd_verify_integrity(pair.target, "cities")

    new_head = await writer.append(slices=2)
    again = await pair.push()
    assert (again.num_blocks, again.num_objects) == (2, 4)
    second = await pair.pull()
    assert (second.num_blocks, second.num_objects, second.new_head) == (2, 4, new_head)
    assert folder_files(pair.target.layout.dataset(copy.id).root) == folder_files(source)
    assert (await pair.pull()).num_blocks == 0
    assert (await pair.push()).num_blocks == 0


async def test_refs_head_moves_by_conditional_writes_exactly_one_racer_wins(
    s3_server: SeaweedServer, s3_bucket: str
) -> None:
    location = parse_s3_url(s3_server.url(s3_bucket, "race"))
    bucket = S3Bucket(location, s3_server.settings())
    await (
        bucket.check_bucket()
    )  # as opening a dataset does (the server loads the bucket's settings)
    refs = S3RefStore(bucket, location)
    # Few racers: SeaweedFS serialises conditional writes of one key behind a lock that a loser
    # may wait on for seconds.
    heads = [Multihash.from_digest_sha3_256(bytes([i])) for i in range(4)]
    for expected in (None, heads[0]):
        racers = heads[1:] if expected is not None else heads
        results = await asyncio.gather(
            *(refs.set("head", h, expected=expected) for h in racers), return_exceptions=True
        )
        winners = [h for h, r in zip(racers, results, strict=True) if r is None]
        assert len(winners) == 1, results
        assert all(isinstance(r, RefCasError) for r in results if r is not None)
        assert "another write won" in str(next(r for r in results if r is not None))
        assert await refs.get("head") == winners[0]
        if expected is None:
            await refs.set("head", heads[0], expected=winners[0])


async def test_concurrent_pushes_leave_one_valid_head(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    url = s3_server.url(s3_bucket, "cities")
    async with (
        await s3_node(tmp_path / "b", s3_server) as node_b,
        await s3_node(tmp_path / "c", s3_server) as node_c,
        await s3_node(tmp_path / "d", s3_server) as node_d,
    ):
        writer_b = await create_root(node_b, "cities", slices=1)
        await push(node_b, "cities", url, settings=via(node_b))
        await pull(node_c, url, settings=via(node_c))
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
            push(node_b, "cities", url, settings=via(node_b)),
            push(node_c, "cities", url, settings=via(node_c)),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, BaseException)]
        assert len(winners) == 1 and len(losers) == 1, results
        # Lost at the head's conditional write, or saw the winner's head first: either way told.
        assert isinstance(losers[0], (SyncError, DivergedError)), losers[0]
        if not isinstance(losers[0], DivergedError):
            assert "another write won" in str(losers[0])
        remote_head = winners[0].new_remote_head
        assert remote_head in (head_b, head_c)
        # The bucket's history is whole up to the winner's head: every block, rule and object.
        stored = s3_dataset(bucket_of(s3_server, url), parse_s3_url(url), writer_b.dataset.id)
        assert await stored.chain.head() == remote_head
        await validate_chain(
            stored.chain, dataset_id=stored.id, data=stored.data, checkpoints=stored.checkpoints
        )
        # A fresh pull verifies (it goes to the owner's signed head, node b's last signed one).
        await pull(node_d, url, settings=via(node_d))
        await odfd_verify_integrity(node_d, "cities")
        loser = node_c if remote_head == head_b else node_b
        loser_head = head_c if loser is node_c else head_b
        assert (await loser.resolve("cities")).head == loser_head
        # The loser may replace the bucket's history on purpose.
        forced = await push(
            loser, "cities", url, options=PushOptions(force=True), settings=via(loser)
        )
        assert forced.new_remote_head == loser_head == await stored.chain.head()
        await validate_chain(
            stored.chain, dataset_id=stored.id, data=stored.data, checkpoints=stored.checkpoints
        )


async def test_search_and_pull_from_a_repository_over_a_bucket_prefix(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    base = s3_server.url(s3_bucket, "hub")
    async with (
        await s3_node(tmp_path / "a", s3_server) as node_a,
        await s3_node(tmp_path / "b", s3_server) as node_b,
    ):
        writers = {}
        for seed, name in enumerate(("cities", "rivers"), start=1):
            writers[name] = await create_root(node_a, name, slices=1, seed=seed)
            await push(node_a, name, f"{base}/{name}", settings=via(node_a))
        settings = via(node_b)
        found = await search_repo("hub", base, "", settings)
        assert [(f.alias, f.url) for f in found] == [
            ("cities", f"{base}/cities"),
            ("rivers", f"{base}/rivers"),
        ]
        assert [f.alias for f in await search_repo("hub", base, "riv", settings)] == ["rivers"]
        await node_b.catalog.add_remote("hub", base)
        for name in ("cities", "rivers"):
            await pull(node_b, await expand(node_b, f"hub/{name}"), settings=via(node_b))
        head = await writers["rivers"].append(slices=1)
        await push(node_a, "rivers", f"{base}/rivers", settings=via(node_a))
        # `odfd pull --all` syncs every dataset from its recorded remote.
        results = [
            r
            for name in ("cities", "rivers")
            for r in await pull_from_remotes(node_b, name, settings=via(node_b))
        ]
        assert [r.num_blocks for r in results] == [0, 1]
        assert (await node_b.resolve("rivers")).head == head


async def test_daemon_mirrors_from_a_bucket_and_into_another(
    s3_server: SeaweedServer, tmp_path: Path
) -> None:
    source_url = s3_server.url(s3_server.make_bucket(), "cities")
    target_url = s3_server.url(s3_server.make_bucket(), "mirror/cities")
    async with (
        await s3_node(tmp_path / "a", s3_server) as node_a,
        await s3_node(tmp_path / "m", s3_server) as mirror_node,
    ):
        writer = await create_root(node_a, "cities", slices=2)
        await push(node_a, "cities", source_url, settings=via(node_a))
        config = replace(NodeConfig(), s3=load_config(mirror_node.layout.config_path).s3)
        record = await MirrorTable(mirror_node.catalog).add(
            "cities", source_url, [target_url], 60.0
        )
        async with aiohttp.ClientSession() as session:
            report = await MirrorSyncer(Node(mirror_node, config), session).sync(record)
            assert report.attempt.outcome == "updated", report.attempt.error
            head = await writer.append(slices=1)
            await push(node_a, "cities", source_url, settings=via(node_a))
            report = await MirrorSyncer(Node(mirror_node, config), session).sync(record)
            assert report.attempt.outcome == "updated", report.attempt.error
        assert (await mirror_node.resolve("cities")).head == head
        refs = S3RefStore(bucket_of(s3_server, target_url), parse_s3_url(target_url))
        assert await refs.get("head") == head
        source_files = await bucket_files(s3_server, source_url)
        target_files = await bucket_files(s3_server, target_url)
        assert {k for k in target_files if not k.startswith("refs/head.sig")} == {
            k for k in source_files if not k.startswith("refs/head.sig")
        }


# --- bad input --------------------------------------------------------------------------------


async def test_wrong_credentials_missing_bucket_and_empty_prefix_change_nothing(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    url = s3_server.url(s3_bucket, "cities")
    async with (
        await s3_node(tmp_path / "a", s3_server) as node_a,
        await s3_node(tmp_path / "bad", s3_server, secret="not-the-secret") as wrong,
    ):
        await create_root(node_a, "cities", slices=1)
        await create_root(wrong, "cities", slices=1)
        with pytest.raises(S3AccessDeniedError, match="access denied") as denied:
            await push(wrong, "cities", url, settings=via(wrong))
        assert "not-the-secret" not in str(denied.value) and "\n" not in str(denied.value)
        assert await bucket_files(s3_server, url) == {}

        await push(node_a, "cities", url, settings=via(node_a))
        before = await bucket_files(s3_server, url)
        with pytest.raises(S3AccessDeniedError):
            await pull(wrong, url, alias="other", settings=via(wrong))
        assert await wrong.try_resolve("other") is None

        missing = s3_server.url("no-such-bucket", "cities")
        for attempt in (
            pull(node_a, missing, alias="x", settings=via(node_a)),
            push(node_a, "cities", missing, settings=via(node_a)),
        ):
            with pytest.raises(S3BucketNotFoundError, match="no-such-bucket: no such bucket"):
                await attempt
        with pytest.raises(RemoteNotFoundError, match="no dataset there"):
            await pull(
                node_a, s3_server.url(s3_bucket, "nothing-here"), alias="x", settings=via(node_a)
            )
        assert [r.alias for r in await node_a.list_datasets()] == ["cities"]
        assert not [p for p in node_a.layout.datasets_dir.iterdir() if p.name.startswith(".")]
        assert await bucket_files(s3_server, url) == before


@pytest.mark.parametrize("lose", ["data", "blocks"])
async def test_a_bucket_missing_an_object_is_refused_and_nothing_is_kept(
    s3_pair: S3Pair, lose: str
) -> None:
    writer = await s3_pair.create_root(slices=2)
    await s3_pair.push()
    folder = s3_pair.source.layout.dataset(writer.dataset_id)
    head = await writer.dataset.chain.head()
    assert head is not None
    if lose == "blocks":
        victim = (await writer.dataset.chain.get_block(head)).prev_block_hash
    else:
        victim = min(Multihash.from_multibase(p.name) for p in folder.data_dir.iterdir())
    assert victim is not None
    bucket = s3_pair.bucket()
    await bucket.delete(bucket.location.key(f"{lose}/{object_name(victim)}"))
    with pytest.raises(CorruptSourceError, match=str(victim)):
        await s3_pair.pull()
    assert await s3_pair.target.list_datasets() == []
    assert not any(s3_pair.target.layout.datasets_dir.iterdir())


async def test_server_killed_mid_upload_then_the_next_push_completes(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    server = s3_server
    url = server.url(s3_bucket, "cities")

    class KillAfterFirstBytes(Progress):
        def add_bytes(self, n: int) -> None:
            super().add_bytes(n)
            server.kill()

    async with (
        await s3_node(tmp_path / "a", server) as node_a,
        await s3_node(tmp_path / "b", server) as node_b,
    ):
        writer = await create_root(node_a, "cities", slices=4, rows=20_000)
        with pytest.raises(RemoteUnavailableError, match="cannot be reached"):
            await push(
                node_a,
                "cities",
                url,
                progress=KillAfterFirstBytes("push", enabled=False),
                settings=via(node_a),
            )
        server.start()
        stored = await bucket_files(server, url)
        assert not any(k.startswith(("refs/", "blocks/")) for k in stored), sorted(stored)
        pushed = await push(node_a, "cities", url, settings=via(node_a))
        assert pushed.new_remote_head == await writer.dataset.chain.head()
        await pull(node_b, url, settings=via(node_b))
        await odfd_verify_integrity(node_b, "cities")


def test_the_commands_with_aws_variables(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """``odfd push`` / ``repo add`` / ``search`` / ``pull`` as a user runs them, credentials from
    the standard ``AWS_*`` variables; a wrong secret is one line that does not print it."""
    root_a, root_b = tmp_path / "a", tmp_path / "b"

    async def prepare() -> None:
        async with await Workspace.init(root_a) as node_a:
            await create_root(node_a, "cities", slices=1)
        await (await Workspace.init(root_b)).close()

    asyncio.run(prepare())
    base = s3_server.url(s3_bucket, "hub")
    env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    bad = {**env, "AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}
    denied = odfd("push", "cities", f"{base}/cities", "--root", str(root_a), env=bad)
    assert denied.returncode == 1, denied
    assert denied.stderr.count("\n") == 1 and "access denied" in denied.stderr, denied.stderr
    assert "wrong-secret-value" not in denied.stderr + denied.stdout
    pushed = odfd("push", "cities", f"{base}/cities", "--root", str(root_a), env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert odfd("repo", "add", "hub", base, "--root", str(root_b), env=env).returncode == 0
    found = odfd("search", "cit", "--repo", "hub", "-o", "json", "--root", str(root_b), env=env)
    assert found.returncode == 0, found.stderr
    assert [(r["alias"], r["url"]) for r in json.loads(found.stdout)] == [
        ("cities", f"{base}/cities")
    ]
    pulled = odfd("pull", "hub/cities", "--root", str(root_b), env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert "cities" in odfd("list", "--root", str(root_b)).stdout


# --- s3:// on a server the AWS conventions name ------------------------------------------------


def test_s3_urls_reach_the_endpoint_of_the_aws_variables(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path: Path
) -> None:
    """``s3://bucket/prefix`` with ``AWS_ENDPOINT_URL`` pointing at a plain-http server (MinIO,
    SeaweedFS, LocalStack: the AWS CLI's convention) is pushed to, searched and pulled from
    there, and ``AWS_ENDPOINT_URL_S3`` goes before ``AWS_ENDPOINT_URL`` as for the AWS CLI."""
    root_a, root_b = tmp_path / "a", tmp_path / "b"

    async def prepare() -> None:
        async with await Workspace.init(root_a) as node_a:
            await create_root(node_a, "cities", slices=1)
        await (await Workspace.init(root_b)).close()

    asyncio.run(prepare())
    base = f"s3://{s3_bucket}/hub"
    keys = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    env = {**keys, "AWS_ENDPOINT_URL": s3_server.endpoint}
    pushed = odfd("push", "cities", f"{base}/cities", "--root", str(root_a), env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert "cities" in {
        key.split("/")[0]
        for key in asyncio.run(bucket_files(s3_server, s3_server.url(s3_bucket, "hub")))
    }
    assert odfd("repo", "add", "hub", base, "--root", str(root_b), env=env).returncode == 0
    found = odfd("search", "cit", "--repo", "hub", "-o", "json", "--root", str(root_b), env=env)
    assert found.returncode == 0, found.stderr
    assert [(r["alias"], r["url"]) for r in json.loads(found.stdout)] == [
        ("cities", f"{base}/cities")
    ]
    # The S3 variable wins over the general one (which names a port nothing listens on).
    specific = {
        **keys,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint,
    }
    pulled = odfd("pull", f"{base}/cities", "--root", str(root_b), env=specific)
    assert pulled.returncode == 0, pulled.stderr
    assert "cities" in odfd("list", "--root", str(root_b)).stdout
    unreachable = odfd(
        "pull",
        f"{base}/cities",
        "--as",
        "again",
        "--root",
        str(root_b),
        env={**keys, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    assert unreachable.returncode == 1 and "http://127.0.0.1:9/" in unreachable.stderr, (
        unreachable.stderr
    )


async def test_a_mirror_and_a_bucket_node_reach_the_endpoint_of_the_aws_profile(
    s3_server: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An AWS profile's ``endpoint_url`` (``AWS_PROFILE``, ``~/.aws/config``) takes ``s3://``
    URLs to that server: a daemon's mirror from one bucket into another, and a node whose
    datasets live in a third."""
    aws = tmp_path / "aws"
    aws.mkdir()
    (aws / "config").write_text(f"[profile seaweed]\nendpoint_url = {s3_server.endpoint}\n")
    (aws / "credentials").write_text(
        f"[seaweed]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT", "AWS_ACCESS_KEY_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(aws / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws / "credentials"))
    monkeypatch.setenv("AWS_PROFILE", "seaweed")
    source, target, storage = (s3_server.make_bucket() for _ in range(3))
    source_url, target_url = f"s3://{source}/cities", f"s3://{target}/mirror/cities"
    async with (
        await Workspace.init(tmp_path / "a") as node_a,
        await Workspace.init(tmp_path / "m") as mirror_node,
    ):
        writer = await create_root(node_a, "cities", slices=2)
        head = await writer.dataset.chain.head()
        await push(node_a, "cities", source_url, settings=via(node_a))
        record = await MirrorTable(mirror_node.catalog).add(
            "cities", source_url, [target_url], 60.0
        )
        async with aiohttp.ClientSession() as session:
            report = await MirrorSyncer(Node(mirror_node, NodeConfig()), session).sync(record)
        assert report.attempt.outcome == "updated", report.attempt.error
        mirrored = s3_server.url(target, "mirror/cities")
        assert (
            await S3RefStore(bucket_of(s3_server, mirrored), parse_s3_url(mirrored)).get("head")
            == head
        )

    root = tmp_path / "bucket-node"
    async with await Workspace.init(root) as fresh:
        config = fresh.layout.config_path
        text = f'{config.read_text()}\n[storage]\nurl = "s3://{storage}/node"\n'
        await asyncio.to_thread(config.write_text, text)
    async with (await open_node(root)).workspace as node:
        assert isinstance(node.storage, S3DatasetStorage)
        assert (await pull(node, source_url, settings=via(node))).new_head == head
    stored = await bucket_files(s3_server, s3_server.url(storage, "node"))
    assert any(key.endswith("refs/head") for key in stored), sorted(stored)
