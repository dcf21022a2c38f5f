"""SIGKILL of the mirroring daemon at each narrow window of a sync and an audit
(``storage.crashpoints``): after blocks are stored, right after the head moved (catalog and
signature not yet told), after an audit ran (report not recorded); a kill after a pull's objects
are fetched is tests/replication/test_peer_faults.py's resumption. After
each kill every dataset is at a valid head of the source's history; after a restart the catalog
agrees with the refs, the signed heads and audits catch up, and the daemon converges."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from protocol.identity import Multihash
from storage.chain import validate_chain
from storage.crashpoints import ENV
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    DaemonProcess,
    ServeProcess,
    init_workspace,
    mirror_manifests,
    odfd,
    wait_for,
)
from tests.replication.datagen import DatasetWriter, create_root

pytestmark = pytest.mark.slow

ALIASES = ("crash.one", "crash.two")
POINTS = ("chain.blocks-stored", "chain.head-moved", "audit.verified")


async def _heads(root: Path) -> dict[str, Multihash]:
    """alias -> head, read from refs/head (the truth)."""
    async with await Workspace.open(root) as workspace:
        return {
            r.alias: head
            for r in await workspace.list_datasets()
            if (head := await workspace.open_dataset(r.id).chain.head()) is not None
        }


async def _check_folders(root: Path, history: set[Multihash]) -> None:
    """Offline, straight after a kill: every dataset folder of B is at a head of A's history
    and its whole chain validates."""
    for folder in (root / "datasets").iterdir():
        if folder.name.startswith("."):
            continue
        dataset = Dataset.open_local(folder)
        head = await dataset.chain.head()
        if head is None:
            continue
        assert head in history, f"{folder.name} at {head}, not a head A ever had"
        await validate_chain(
            dataset.chain, head, data=dataset.data, checkpoints=dataset.checkpoints
        )


def _catalog(root: Path) -> dict[str, tuple[str, str | None, str | None]]:
    """alias -> (head in the catalog, head of its latest audit, its signed head)."""
    with sqlite3.connect(root / "catalog.sqlite", timeout=30) as db:
        heads = dict(db.execute("SELECT alias, head FROM datasets").fetchall())
        audits = dict(
            db.execute(
                "SELECT alias, head FROM audits WHERE id IN (SELECT max(id) FROM audits"
                " GROUP BY dataset_id) AND status = 'ok'"
            ).fetchall()
        )
        signed = dict(
            db.execute(
                "SELECT d.alias, s.head FROM signed_heads s JOIN datasets d ON d.id = s.dataset_id"
            ).fetchall()
        )
    return {alias: (head, audits.get(alias), signed.get(alias)) for alias, head in heads.items()}


async def _append(root: Path, writers: dict[str, DatasetWriter]) -> set[Multihash]:
    heads = set()
    for writer in writers.values():
        heads.add(await writer.append(slices=1, rows=500))
    return heads


def test_sigkill_at_every_crash_point_recovers(tmp_path: Path) -> None:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    history: set[Multihash] = set()

    async def make_source() -> tuple[Workspace, dict[str, DatasetWriter]]:
        workspace = await Workspace.init(a_root)
        writers = {alias: await create_root(workspace, alias, slices=2) for alias in ALIASES}
        for writer in writers.values():
            history.update([h async for h, _ in writer.dataset.chain.iter_blocks()])
        return workspace, writers

    loop = asyncio.new_event_loop()
    source, writers = loop.run_until_complete(make_source())
    server = ServeProcess(a_root).start()
    # No Spark Connect server: mirroring root datasets needs no engine, and a SIGKILLed daemon
    # leaves the server it started running (README, reliability: known gap).
    init_workspace(
        b_root, FAST_SYNC_CONFIG.replace("[daemon]\n", "[daemon]\nspark_connect = false\n")
    )
    odfd(
        "apply",
        "-f",
        str(mirror_manifests(tmp_path, {a: f"{server.url}{a}" for a in ALIASES}, every="1s")),
        root=b_root,
    )
    b = DaemonProcess(b_root, tmp_path / "b.log")
    try:
        for point in POINTS:
            history |= loop.run_until_complete(_append(a_root, writers))
            b.extra_env = {ENV: point}
            b.start(wait=False)
            assert b.process is not None
            code = b.process.wait(timeout=180)
            assert code == -9, f"daemon did not die at {point} (exit {code}):\n{b.log()}"
            loop.run_until_complete(_check_folders(b_root, history))

            b.extra_env = {}
            b.start()
            want = {a: h.to_multibase() for a, h in loop.run_until_complete(_heads(a_root)).items()}

            def converged(want: dict[str, str] = want) -> bool:
                catalog = _catalog(b_root)
                return all(catalog.get(a, (None,) * 3) == (want[a],) * 3 for a in ALIASES)

            wait_for(
                f"B to converge after a kill at {point}",
                converged,
                180,
                0.5,
                detail=lambda: _catalog(b_root),
            )
            assert b.stop() == 0
            b_heads = loop.run_until_complete(_heads(b_root))
            assert {a: h.to_multibase() for a, h in b_heads.items()} == want  # refs = catalog
    finally:
        b.stop()
        server.kill()
        loop.run_until_complete(source.close())
        loop.close()
