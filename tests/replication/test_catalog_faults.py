"""The SQLite catalog deleted or corrupted: ``odfd repair`` (a real process) rebuilds it from the
dataset folders: every dataset at its head, its remotes, and the signed heads it had seen, so a
mirror keeps refusing rollbacks after the repair."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odfd.app.status import build_status
from odfd.sync.pull import pull
from odfd.sync.trust import RollbackError
from protocol.identity import Multihash
from protocol.model.timestamp import Timestamp
from protocol.transfer.signed_head import sign_head
from storage.workspace import Workspace
from tests.daemon.processes import odfd
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root, verify_integrity


def _catalog_files(root: Path) -> list[Path]:
    return [root / f"catalog.sqlite{suffix}" for suffix in ("", "-wal", "-shm")]


def _scribble(path: Path) -> None:
    """Overwrite the first 4 KiB (the SQLite header and first page) with noise."""
    with open(path, "r+b") as file:
        file.write(os.urandom(4096))


async def _state(root: Path) -> dict[str, tuple[str, str | None, list[str], str | None]]:
    """alias -> (id, head, pull remotes, signed head seen)."""
    async with await Workspace.open(root) as workspace:
        out = {}
        for record in await workspace.list_datasets():
            seen = await workspace.signed_heads.get(record.id)
            out[record.alias] = (
                str(record.id),
                None if record.head is None else record.head.to_multibase(),
                await workspace.catalog.remote_aliases(record.id, "pull"),
                None if seen is None else seen.signed.document().decode(),
            )
            await verify_integrity(workspace.open_dataset(record.id))
        return out


@pytest.mark.parametrize("damage", ["deleted", "corrupted"])
async def test_repair_rebuilds_a_lost_catalog(
    node_a: Workspace, node_b: Workspace, serve: ServeFactory, damage: str
) -> None:
    writer = await create_root(node_a, "cities", slices=2)
    server = await serve(node_a)
    url = server.url + "cities"
    await pull(node_b, url)  # B mirrors A's signed dataset
    await create_root(node_b, "local.notes", slices=1)  # and owns one of its own
    stale_url = url  # after the repair, A's older head is served again: a rollback
    before = await _state(node_b.root)
    head_before = before["cities"][1]
    await node_b.close()

    for path in _catalog_files(node_b.root):
        if damage == "deleted":
            path.unlink(missing_ok=True)
        elif path.exists():
            _scribble(path)
    done = odfd("repair", root=node_b.root)
    if damage == "corrupted":
        assert "Catalog was unreadable; moved it to" in done.stderr
    assert "Registered: cities" in done.stdout and "Registered: local.notes" in done.stdout
    assert await _state(node_b.root) == before

    # The restored signed head still guards the mirror: a newer one moves it, an older one
    # (A's statement re-signed back in time) is refused.
    await writer.append(slices=1)
    async with await Workspace.open(node_b.root) as again:
        status = await build_status(again)
        assert {d["alias"]: d["trust"]["state"] for d in status["datasets"]} == {
            "cities": "signed",
            "local.notes": "signed",
        }
        assert (await pull(again, stale_url)).num_blocks == 1
        record = await node_a.resolve("cities")
        key = node_a.keys.load(record.id)
        assert key is not None and head_before is not None
        old = sign_head(key, record.id, Multihash.from_multibase(head_before), 3, Timestamp(1))
        sig = node_a.layout.dataset(record.id).refs_dir / "head.sig"
        sig.write_bytes(old.document())
        with pytest.raises(RollbackError):
            await pull(again, stale_url)
