"""SIGKILL the mirroring daemon mid-transfer, many times: every dataset it holds is at some head
of the source's history after each kill (never between heads), and after a restart it converges
to the source's heads and every dataset verifies. Also SIGTERM (cancel after the grace period)
and SIGHUP (reload)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol.identity import Multihash
from storage.chain import validate_chain
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    DaemonProcess,
    init_workspace,
    mirror_manifests,
    odfd,
    wait_for,
)
from tests.replication.datagen import create_root

pytestmark = pytest.mark.slow

DATASETS = 5
SLICES = 16
ROWS = 3000
KILLS = 8


@dataclass
class Source:
    daemon: DaemonProcess
    heads: dict[str, Multihash]
    history: dict[str, set[Multihash]]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """One node serving ``DATASETS`` root datasets of ``SLICES`` slices each (read-only here)."""
    root = tmp_path_factory.mktemp("fault") / "a"
    heads = asyncio.run(_make_source(root))
    history = asyncio.run(_source_history(root))
    daemon = DaemonProcess(root, root.parent / "a.log").start()
    yield Source(daemon, heads, history)
    assert daemon.stop() == 0


async def _make_source(root: Path) -> dict[str, Multihash]:
    heads = {}
    async with await Workspace.init(root) as workspace:
        for n in range(DATASETS):
            writer = await create_root(workspace, f"big.{n}", slices=SLICES, rows=ROWS, seed=n)
            head = await writer.dataset.chain.head()
            assert head is not None
            heads[f"big.{n}"] = head
    return heads


async def _source_history(root: Path) -> dict[str, set[Multihash]]:
    async with await Workspace.open(root) as workspace:
        history = {}
        for record in await workspace.list_datasets():
            history[record.alias] = {
                h async for h, _ in workspace.open_dataset(record.id).chain.iter_blocks()
            }
        return history


async def _check_between_heads(
    root: Path, history: dict[str, set[Multihash]]
) -> dict[str, Multihash]:
    """Every dataset folder (whatever the catalog says) is at a head of the source's history, with
    a valid chain and all its objects."""
    heads = {}
    for folder in sorted((root / "datasets").iterdir()):
        if folder.name.startswith("."):
            continue
        dataset = Dataset.open_local(folder)
        head = await dataset.chain.head()
        if head is None:
            continue
        alias = await dataset.alias()
        assert alias in history and head in history[alias], (
            f"{folder}: head {head} is not a source head"
        )
        await validate_chain(
            dataset.chain, head, data=dataset.data, checkpoints=dataset.checkpoints
        )
        heads[alias] = head
    return heads


def _staged_object(root: Path) -> bool:
    """Whether a pull in progress (its ``.pull-*`` folder, renamed into place at commit) holds an
    object yet."""
    pulls = (root / "datasets").glob(".pull-*")
    return any(any(folder.glob("blocks/*")) or any(folder.glob("data/*")) for folder in pulls)


def test_sigkill_mid_transfer_converges_and_verifies(source: Source, tmp_path: Path) -> None:
    root = tmp_path / "b"
    init_workspace(root, FAST_SYNC_CONFIG)
    manifests = mirror_manifests(
        tmp_path, {alias: f"{source.daemon.server_url}{alias}" for alias in source.heads}
    )
    odfd("apply", "-f", str(manifests), root=root)
    b = DaemonProcess(root, tmp_path / "b.log")
    rng = random.Random(7)
    complete = []
    for kill in range(KILLS):
        b.start()
        if kill == 0:
            # The first kill lands while objects are being pulled (a pull can finish within the
            # random delays below on a fast machine).
            wait_for("a pull to stage an object", lambda: _staged_object(root), 30, 0.002)
        else:
            asyncio.run(asyncio.sleep(rng.uniform(0.05, 1.5)))
        b.kill()
        heads = asyncio.run(_check_between_heads(root, source.history))
        complete.append(sum(1 for alias, head in heads.items() if head == source.heads[alias]))
    # The kills landed mid-way: the first ones left the mirror incomplete.
    assert complete[0] < DATASETS, complete
    b.start()

    def converged() -> bool:
        heads = {d["alias"]: d["head"] for d in b.status()["datasets"]}
        return all(heads.get(alias) == head.to_multibase() for alias, head in source.heads.items())

    wait_for("the mirror to converge", converged, 120, 1.0)
    assert b.stop() == 0
    verify = odfd("verify", "--integrity-only", "-o", "json", *source.heads, root=root)
    report = json.loads(verify.stdout)
    assert {d["alias"]: d["status"] for d in report["datasets"]} == {
        alias: "ok" for alias in source.heads
    }


def test_sigterm_cancels_within_grace_and_sighup_reloads(source: Source, tmp_path: Path) -> None:
    root = tmp_path / "b"
    init_workspace(
        root, FAST_SYNC_CONFIG.replace('shutdown_timeout = "5s"', 'shutdown_timeout = "0.2s"')
    )
    b = DaemonProcess(root, tmp_path / "b.log").start()
    # SIGHUP: the log format switches to JSON lines without a restart.
    config = root / "config.toml"
    config.write_text(config.read_text() + '\n[log]\nformat = "json"\n')
    b.signal(signal.SIGHUP)
    wait_for("JSON logs", lambda: '"message": "configuration reloaded"' in b.log(), 20)
    manifests = mirror_manifests(
        tmp_path, {alias: f"{source.daemon.server_url}{alias}" for alias in source.heads}
    )
    odfd("apply", "-f", str(manifests), root=root)
    wait_for("a sync to finish", lambda: '"message": "sync finished"' in b.log(), 30, 0.05)
    assert b.stop(timeout=15) == 0  # with syncs still running: they are cancelled after 0.2 s
    lines = [json.loads(line) for line in b.log().splitlines() if line.startswith("{")]
    assert lines[-1]["message"] == "daemon stopped"
    outcomes = [line.get("outcome") for line in lines if line["message"] == "sync finished"]
    assert "updated" in outcomes, outcomes
    asyncio.run(_check_between_heads(root, source.history))
