"""Signed heads between real nodes (aiohttp servers on loopback, folders, a real IPFS node): the
owner signs, every transport carries the signature, pullers verify it and refuse what a lying or
stale peer serves (missing, invalid, rollback, fork), and freezes are reported."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest

from odfd.app.status import (
    build_status,
    read_status_rows,
    read_status_rows_now,
)
from odfd.cli.status_text import render_status
from odfd.sync.pull import PullOptions, pull
from odfd.sync.push import PushOptions, push
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.trust import (
    ForkError,
    InvalidSignatureError,
    MissingSignatureError,
    RollbackError,
)
from protocol.identity import DatasetId
from protocol.model.timestamp import Timestamp
from protocol.transfer.signed_head import SignedHead, parse_signed_head, sign_head
from storage.catalog.audit_records import AuditRecord
from storage.catalog.audits import AuditTable
from storage.catalog.mirror_records import SyncAttempt
from storage.catalog.mirrors import AttemptBookkeeping, MirrorTable
from storage.catalog.sync_reader import open_sync_reader
from storage.ipfs_client import IpfsClient
from storage.layout import HEAD_REF
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import LocalIpfsNode
from tests.replication.conftest import PUSH_TOKEN, ServeFactory
from tests.replication.datagen import create_root, verify_integrity


@pytest.fixture
async def node_c(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.init(tmp_path / "node-c") as workspace:
        yield workspace


async def signed_of(workspace: Workspace, alias: str) -> SignedHead | None:
    dataset = await workspace.get_dataset(alias)
    document = await dataset.refs.get_signature(HEAD_REF)
    return None if document is None else parse_signed_head(document, alias)


def sig_path(workspace: Workspace, dataset_id: DatasetId) -> Path:
    return workspace.layout.dataset(dataset_id).refs_dir / "head.sig"


async def test_owner_signs_every_head_move_with_increasing_times(node_a: Workspace) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    first = await signed_of(node_a, "cities")
    record = await node_a.resolve("cities")
    assert first is not None and first.head == record.head and first.dataset_id == record.id
    assert first.sequence_number == record.head_sequence
    head = await writer.append(slices=1)
    second = await signed_of(node_a, "cities")
    assert second is not None and second.head == head and second.is_newer_than(first)
    seen = await node_a.signed_heads.get(record.id)
    assert seen is not None and seen.source is None and seen.signed == second
    again = await node_a.sign_head(record.id)  # the heartbeat: same head, newer time
    assert again is not None and again.head == head and again.is_newer_than(second)


@pytest.mark.parametrize("protocol", ["simple", "smart"])
async def test_pull_over_http_verifies_and_keeps_the_signature(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory, protocol: str
) -> None:
    writer = await create_root(node_a, "cities", slices=2)
    server = await serve(node_a)
    url = server.url + "cities"
    result = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert result.trust == "signed" and result.protocol == protocol
    assert result.dataset_id is not None
    owner = await signed_of(node_a, "cities")
    assert await signed_of(node_b, "cities") == owner  # B now serves the owner's statement
    seen = await node_b.signed_heads.get(result.dataset_id)
    assert seen is not None and seen.signed == owner and seen.source == url

    await writer.append(slices=1)
    again = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert again.num_blocks == 1 and again.trust == "signed"
    assert await signed_of(node_b, "cities") == await signed_of(node_a, "cities")

    # A heartbeat (same head, newer signature) reaches the mirror without any block moving.
    beat = await node_a.sign_head(result.dataset_id)
    idle = await pull(node_b, url, options=PullOptions(protocol=protocol))
    assert not idle.updated and await signed_of(node_b, "cities") == beat


async def test_peer_serving_unsigned_blocks_beyond_the_signed_head(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    signed_doc = sig_path(node_a, record.id).read_bytes()
    signed_head = record.head
    await writer.append(slices=2)  # then a stale statement is put back: H is beyond it
    sig_path(node_a, record.id).write_bytes(signed_doc)
    server = await serve(node_a)
    for protocol in ("smart", "simple"):
        result = await pull(node_b, server.url + "cities", options=PullOptions(protocol=protocol))
        assert result.trust == "signed" and result.trust_note is not None
        assert "pulled up to the signed head" in result.trust_note
        assert (await node_b.resolve("cities")).head == signed_head
    await verify_integrity(await node_b.get_dataset("cities"))


async def test_stale_peer_is_a_rollback_and_a_fork_is_refused(
    node_a: Workspace, node_b: Workspace, node_c: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    server_a = await serve(node_a)
    await pull(node_c, server_a.url + "cities")  # C stays behind
    await writer.append(slices=1)
    await pull(node_b, server_a.url + "cities")  # B has seen the newer signed head
    server_c = await serve(node_c)
    with pytest.raises(RollbackError, match="older than the newest signed head seen"):
        await pull(node_b, server_c.url + "cities", options=PullOptions(protocol="simple"))
    forced = await pull(
        node_b, server_c.url + "cities", options=PullOptions(force=True, protocol="simple")
    )
    assert forced.trust_note == "RollbackError overridden by --force" and forced.local_ahead == 1

    # The key holder signing two heads at one instant is a fork: C serves its older head signed
    # at the very time B's newest statement carries.
    record = await node_a.resolve("cities")
    key = node_a.keys.load(record.id)
    assert key is not None
    newest = await node_b.signed_heads.get(record.id)
    assert newest is not None
    c_head = (await node_c.resolve("cities")).head
    assert c_head is not None and c_head != newest.signed.head
    fork = sign_head(key, record.id, c_head, 2, newest.signed.signed_at)
    sig_path(node_c, record.id).write_bytes(fork.document())
    with pytest.raises(ForkError, match="a different head signed at the same time"):
        await pull(node_b, server_c.url + "cities")


async def test_missing_and_invalid_signatures_after_signed(
    node_a: Workspace, node_b: Workspace, node_c: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    server_a = await serve(node_a)
    await pull(node_c, server_a.url + "cities")
    await pull(node_b, server_a.url + "cities")
    server_c = await serve(node_c)
    url_c = server_c.url + "cities"
    good = sig_path(node_c, record.id).read_bytes()

    sig_path(node_c, record.id).unlink()
    with pytest.raises(MissingSignatureError, match="has signed it before"):
        await pull(node_b, url_c)
    allowed = await pull(node_b, url_c, options=PullOptions(allow_unsigned=True))
    assert allowed.trust == "unsigned" and allowed.trust_note is not None

    value = json.loads(good)
    value["signature"] = (
        "f" + ("0" if value["signature"][1] != "0" else "1") + value["signature"][2:]
    )
    sig_path(node_c, record.id).write_text(json.dumps(value))
    with pytest.raises(InvalidSignatureError, match="does not verify"):
        await pull(node_b, url_c)
    assert (await pull(node_b, url_c, options=PullOptions(allow_unsigned=True))).trust == (
        "unsigned"
    )

    # Key rotation: a valid signature by another key, naming its own id, is refused clearly.
    other_key, other_id = DatasetId.new_generated()
    assert record.head is not None
    rotated = sign_head(other_key, other_id, record.head, 2, Timestamp.now())
    sig_path(node_c, record.id).write_bytes(rotated.document())
    with pytest.raises(InvalidSignatureError, match="key rotation is not supported"):
        await pull(node_b, url_c)


async def test_unsigned_datasets_still_replicate_and_show_unsigned(
    node_a: Workspace, node_b: Workspace, node_c: Workspace, serve: ServeFactory, tmp_path: Path
) -> None:
    """A dataset whose owner never signs (as the reference publishes them)."""
    writer = await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    assert record.head_sequence is not None
    folder = tmp_path / "reference-folder"
    shutil.copytree(node_a.layout.dataset(record.id).root, folder)
    (folder / "refs" / "head.sig").unlink()
    await node_c.import_dataset(folder, "cities")  # C holds no key: it never signs
    server = await serve(node_c)
    result = await pull(node_b, server.url + "cities")
    assert result.trust == "unsigned" and result.num_blocks == record.head_sequence + 1
    assert await signed_of(node_b, "cities") is None
    assert await node_b.signed_heads.get(record.id) is None
    del writer
    status = await build_status(node_b)
    [entry] = status["datasets"]
    assert entry["trust"] == {"state": "unsigned"}
    assert " unsigned " in render_status(status)


async def test_freeze_is_reported_after_the_mirrors_bound(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    key = node_a.keys.load(record.id)
    assert key is not None and record.head is not None
    old = Timestamp.from_datetime(Timestamp.now().to_datetime() - timedelta(days=2))
    stale = sign_head(key, record.id, record.head, record.head_sequence or 0, old)
    sig_path(node_a, record.id).write_bytes(stale.document())  # the source stopped re-signing
    server = await serve(node_a)
    url = server.url + "cities"
    await pull(node_b, url)
    await MirrorTable(node_b.catalog).add("cities", url, [], 300.0)
    status = await build_status(node_b, freeze_after=86400.0)
    trust = status["datasets"][0]["trust"]
    assert trust["state"] == "frozen" and trust["ageSeconds"] > 2 * 86400 - 60
    assert status["mirrors"][0]["trust"]["state"] == "frozen"
    text = render_status(status)
    assert "FROZEN 2d" in text and "no newer signed head for" in text
    await node_b.signed_heads.set_freeze_bound("cities", 3 * 86400.0)  # this mirror's own bound
    assert (await build_status(node_b, freeze_after=86400.0))["datasets"][0]["trust"][
        "state"
    ] == "signed"
    # The owner's own datasets never count as frozen.
    assert (await build_status(node_a, freeze_after=1.0))["datasets"][0]["trust"]["state"] == (
        "signed"
    )


async def test_status_without_an_event_loop_reads_the_rows_the_daemon_reads(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    url = server.url + "cities"
    result = await pull(node_b, url)
    mirrors = MirrorTable(node_b.catalog)
    await mirrors.add("cities", url, [], 300.0)
    await node_b.signed_heads.set_freeze_bound("cities", 3 * 86400.0)
    record = await node_b.resolve("cities")
    now = datetime.now(UTC)
    await mirrors.finish_attempt(
        SyncAttempt("cities", url, record.id, now, now, "updated", new_head=record.head, blocks=3),
        AttemptBookkeeping(now, 0, None, record.head, record.head_sequence, None, None, {}),
    )
    await AuditTable(node_b.catalog).add(
        AuditRecord(record.id, "cities", "full", "test", record.head, now, now, "ok", "fine"),
        keep=5,
    )
    reader = open_sync_reader(node_b.layout.catalog_path)
    assert reader is not None
    with reader:
        rows = read_status_rows_now(reader)
    assert rows == await read_status_rows(node_b)
    assert result.num_blocks and len(rows.signed_heads) == len(rows.attempts) == 1
    assert len(rows.audits) == len(rows.mirrors) == len(rows.freeze_bounds) == 1


async def test_smart_push_hands_the_signature_to_a_server_that_serves_it(
    node_a: Workspace, node_b: Workspace, node_c: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    server_c = await serve(node_c)
    url_c = server_c.url + "cities"
    options = PushOptions(token=PUSH_TOKEN)
    pushed = await push(node_a, "cities", url_c, options=options)
    assert pushed.signed and pushed.num_blocks > 0
    assert await signed_of(node_c, "cities") == await signed_of(node_a, "cities")
    record = await node_a.resolve("cities")
    seen = await node_c.signed_heads.get(record.id)
    assert seen is not None and seen.source == "push"
    assert (await pull(node_b, url_c)).trust == "signed"

    await writer.append(slices=1)
    assert (await push(node_a, "cities", url_c, options=options)).signed
    assert (await pull(node_b, url_c)).num_blocks == 1
    assert await signed_of(node_b, "cities") == await signed_of(node_a, "cities")


async def test_put_signed_head_checks(
    node_a: Workspace, node_c: Workspace, serve: ServeFactory
) -> None:
    await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    server_a = await serve(node_a)
    await pull(node_c, server_a.url + "cities")
    server_c = await serve(node_c)
    url = server_c.url + "cities/refs/head.sig"
    current = sig_path(node_c, record.id).read_bytes()
    key = node_a.keys.load(record.id)
    assert key is not None and record.head is not None
    auth = {"Authorization": f"Bearer {PUSH_TOKEN}"}
    older = sign_head(key, record.id, record.head, record.head_sequence or 0, Timestamp(0))
    newer = sign_head(key, record.id, record.head, record.head_sequence or 0, Timestamp.now())
    other_key, other_id = DatasetId.new_generated()
    foreign = sign_head(other_key, other_id, record.head, 1, Timestamp.now())
    async with aiohttp.ClientSession() as session:

        async def put(body: bytes, headers: dict[str, str] = auth) -> tuple[int, str]:
            async with session.put(url, data=body, headers=headers) as response:
                return response.status, await response.text()

        assert (await put(newer.document(), {}))[0] == 401
        assert (await put(b"{}"))[0] == 400
        status, text = await put(foreign.document())
        assert status == 400 and "signed for" in text
        status, text = await put(older.document())
        assert status == 409 and "not newer" in text
        assert sig_path(node_c, record.id).read_bytes() == current  # nothing replaced
        assert (await put(newer.document()))[0] == 204
        async with session.get(url) as response:
            assert await response.read() == newer.document()


async def test_file_pull_and_push_carry_the_signature(
    node_a: Workspace, node_b: Workspace, tmp_path: Path
) -> None:
    await create_root(node_a, "cities", slices=1)
    record = await node_a.resolve("cities")
    folder = tmp_path / "exported"
    pushed = await push(node_a, "cities", f"file://{folder}")
    assert pushed.signed
    assert (folder / "refs" / "head.sig").read_bytes() == sig_path(node_a, record.id).read_bytes()
    result = await pull(node_b, f"file://{folder}", alias="cities")
    assert result.trust == "signed"


async def test_repair_restores_signed_heads_and_resigns_a_stale_owned_head(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory
) -> None:
    writer = await create_root(node_a, "cities", slices=1)
    server = await serve(node_a)
    await pull(node_b, server.url + "cities")
    record = await node_b.resolve("cities")
    expected = await node_b.signed_heads.get(record.id)
    await node_b.catalog.sql.execute("DELETE FROM signed_heads")
    await node_b.repair()
    restored = await node_b.signed_heads.get(record.id)
    assert restored is not None and expected is not None and restored.signed == expected.signed

    # A crash between the owner's head move and its signature: repair signs the head.
    old_doc = sig_path(node_a, record.id).read_bytes()
    head = await writer.append(slices=1)
    sig_path(node_a, record.id).write_bytes(old_doc)
    await node_a.repair()
    fresh = await signed_of(node_a, "cities")
    assert fresh is not None and fresh.head == head


@pytest.mark.ipfs
async def test_ipns_push_publishes_the_signature(
    node_a: Workspace,
    node_b: Workspace,
    ipfs_node: LocalIpfsNode,
) -> None:
    via = TransportSettings(ipfs=ipfs_node.settings())
    await create_root(node_a, "cities", slices=1)
    pushed = await push(node_a, "cities", "ipns://", settings=via)
    result = await pull(node_b, pushed.remote, alias="cities", settings=via)
    assert result.trust == "signed"
    assert await signed_of(node_b, "cities") == await signed_of(node_a, "cities")
    # A stale publication (the folder's previous CID) after B saw a newer statement is a rollback.
    client = IpfsClient(ipfs_node.api_multiaddr)
    old_cid = await client.name_resolve(pushed.remote.removeprefix("ipns://"))
    record = await node_a.resolve("cities")
    await node_a.sign_head(record.id)  # a heartbeat, published again under the same name
    again = await push(node_a, "cities", "ipns://", settings=via)
    assert (
        again.remote == pushed.remote
        and await client.name_resolve(pushed.remote.removeprefix("ipns://")) != old_cid
    )
    assert (await pull(node_b, pushed.remote, alias="cities", settings=via)).trust == "signed"
    assert await signed_of(node_b, "cities") == await signed_of(node_a, "cities")
    with pytest.raises(RollbackError):
        await pull(node_b, f"ipfs://{old_cid}", alias="cities", settings=via)
