"""Removing a mirror releases its IPFS pin, against a real IPFS node: by ``odfd mirror remove``
(in-process CLI), with a clear warning and the removal done when the node is unreachable, and by
the daemon when the mirror is removed while its sync is pinning a new CID."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from odfd.app.mirror_sync import MirrorSyncer, SyncReport
from odfd.app.node import Node
from odfd.cli.main import main
from odfd.config import load_config
from odfd.daemon.service import Daemon
from odfd.sync.pins import release_pin
from storage.catalog.mirror_records import MirrorRecord
from storage.catalog.mirrors import AttemptBookkeeping, MirrorTable
from storage.ipfs_client import IpfsClient, parse_cid
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import LocalIpfsNode, NodePorts
from tests.fixtures.spark import TEST_SPARK_CONFIG
from tests.replication.datagen import create_root

pytestmark = pytest.mark.ipfs

ALIAS = "cities"


def _ipfs_config(api: str, gateway: str) -> str:
    return f'\n[ipfs]\napi = "{api}"\ngateway = "{gateway}"\npin = true\n'


async def _mirror_and_pin(tmp_path: Path, node: LocalIpfsNode) -> tuple[Path, str]:
    """Node B mirrors a dataset once and records the attempt (with its pin), as the daemon does;
    returns B's workspace and the pinned CID."""
    root = tmp_path / "b"
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(root) as workspace,
    ):
        writer = await create_root(source, ALIAS, slices=2, seed=9)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        config_path = workspace.layout.config_path
        config_path.write_text(
            config_path.read_text() + _ipfs_config(node.api_multiaddr, node.gateway_url)
        )
        table = MirrorTable(workspace.catalog)
        record = await table.add(ALIAS, url, [], 3600.0)
        async with aiohttp.ClientSession() as session:
            config = load_config(config_path)
            syncer = MirrorSyncer(Node(workspace, config), session)
            report = await syncer.sync(record)
        assert report.attempt.outcome == "updated" and report.pinned_cid is not None, (
            report.attempt.error
        )
        await table.finish_attempt(report.attempt, _bookkeeping(report))
        assert (await table.require(ALIAS)).pinned_cid == report.pinned_cid
    return root, report.pinned_cid


def _bookkeeping(report: SyncReport) -> AttemptBookkeeping:
    source = report.source
    assert source is not None
    return AttemptBookkeeping(
        next_run_at=report.attempt.finished_at,
        consecutive_failures=0,
        last_error=None,
        source_head=source.head,
        source_sequence=source.sequence_number,
        source_cid=source.cid,
        pinned_cid=report.pinned_cid,
        target_state=report.target_state,
    )


async def _remaining(root: Path) -> tuple[list[str], bool]:
    """Mirrors left in B's catalog, and whether the dataset is still there."""
    async with await Workspace.open(root) as workspace:
        mirrors = [m.name for m in await MirrorTable(workspace.catalog).list()]
        return mirrors, await workspace.catalog.find_by_alias(ALIAS) is not None


def test_mirror_remove_releases_the_pin(
    ipfs_node: LocalIpfsNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ipfs = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)
    root, cid = asyncio.run(_mirror_and_pin(tmp_path, ipfs_node))
    assert parse_cid(cid) in asyncio.run(ipfs.pin_ls())

    assert main(["mirror", "remove", ALIAS, "--root", str(root)]) == 0
    err = capsys.readouterr().err
    assert f"Removed mirror {ALIAS}" in err and f"Unpinned ipfs://{cid}" in err, err
    assert parse_cid(cid) not in asyncio.run(ipfs.pin_ls())
    assert asyncio.run(_remaining(root)) == ([], True)
    # Releasing a pin that is already gone (say, removed by hand) is not an error.
    asyncio.run(release_pin(load_config(root / "config.toml").ipfs, cid))


def test_mirror_remove_with_ipfs_unreachable_removes_and_says_what_stays_pinned(
    ipfs_node: LocalIpfsNode,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ipfs = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)
    root, cid = asyncio.run(_mirror_and_pin(tmp_path, ipfs_node))
    dead_api = f"/ip4/127.0.0.1/tcp/{NodePorts.pick_free().api}/http"  # nothing listens there
    monkeypatch.setenv("ODFD_IPFS_API", dead_api)
    try:
        assert main(["mirror", "remove", ALIAS, "--root", str(root)]) == 0
        err = capsys.readouterr().err
        assert f"Removed mirror {ALIAS}" in err and "Unpinned" not in err, err
        warning = next(line for line in err.splitlines() if line.startswith("warning:"))
        assert f"could not unpin ipfs://{cid}" in warning and dead_api in warning, warning
        assert f"ipfs pin rm {cid}" in warning, warning
        assert asyncio.run(_remaining(root)) == ([], True)
        assert parse_cid(cid) in asyncio.run(ipfs.pin_ls())  # still pinned, as the warning says
    finally:
        asyncio.run(ipfs.pin_rm(parse_cid(cid)))


async def test_daemon_releases_the_pin_of_a_mirror_removed_during_its_sync(
    ipfs_node: LocalIpfsNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``odfd mirror remove`` lands while a sync is pinning a new head: the remover released
    the pin it read, the daemon releases the one the attempt made."""
    ipfs = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)
    async with (
        await Workspace.init(tmp_path / "a") as source,
        await Workspace.init(tmp_path / "b") as node,
    ):
        writer = await create_root(source, ALIAS, slices=1, seed=4)
        url = source.layout.dataset(writer.dataset_id).root.as_uri()
        config_path = node.layout.config_path
        config_path.write_text(
            config_path.read_text()
            + TEST_SPARK_CONFIG  # the session's, if one runs
            + '\n[sync]\nstartup_spread = "0s"\n[audit]\nafter_sync = false\ninterval = "0s"\n'
            + _ipfs_config(ipfs_node.api_multiaddr, ipfs_node.gateway_url)
        )
        await MirrorTable(node.catalog).add(ALIAS, url, [], 3600.0)
        made: list[str] = []
        sync = MirrorSyncer.sync

        async def sync_then_removed(self: MirrorSyncer, mirror: MirrorRecord) -> SyncReport:
            report = await sync(self, mirror)
            assert (
                report.pinned_cid is not None
                and parse_cid(report.pinned_cid) in await ipfs.pin_ls()
            )
            made.append(report.pinned_cid)
            removed = await MirrorTable(self.workspace.catalog).remove(ALIAS)
            assert removed.pinned_cid is None  # the remover has nothing to release
            return report

        monkeypatch.setattr(MirrorSyncer, "sync", sync_then_removed)
        daemon = Daemon(
            Node(node, load_config(config_path)),
            server_overrides={"address": "127.0.0.1", "port": 0},
        )
        await daemon.start()
        try:
            deadline = asyncio.get_running_loop().time() + 30
            while daemon.syncs.running or not await MirrorTable(node.catalog).attempts(ALIAS):
                assert asyncio.get_running_loop().time() < deadline, (
                    "the mirror's sync did not finish"
                )
                await asyncio.sleep(0.2)
            assert len(made) == 1 and parse_cid(made[0]) not in await ipfs.pin_ls()
            assert await MirrorTable(node.catalog).get(ALIAS) is None
        finally:
            await daemon.shutdown()
