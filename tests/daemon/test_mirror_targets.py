"""The daemon's mirror targets, IPFS pinning and failing audits, end to end with real processes:
node A serves a root dataset (built without Spark), node B mirrors it and pushes it on to node
C (Smart Transfer push with a bearer token) and to ``ipns://`` in a real IPFS node, pinning the
folder; then a data file corrupted on B fails B's audit, B withholds the dataset, and a repaired
file brings it back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from odfd.sync.pull import pull
from protocol.errors import OdfError
from protocol.identity import DatasetId, Multihash
from storage.dataset import Dataset
from storage.ipfs_client import IpfsClient, parse_cid
from storage.layout import dataset_dir_name
from storage.workspace import Workspace
from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    DaemonProcess,
    init_workspace,
    mirror_manifests,
    odfd,
    wait_for,
)
from tests.fixtures.ipfs_node import LocalIpfsNode
from tests.replication.datagen import DatasetWriter, create_root, verify_integrity

ALIAS = "cities"
PUSH_TOKEN = "c-push-token"


@dataclass
class SourceNode:
    """Node A: a daemon serving ``cities``, plus what is needed to append to it."""

    daemon: DaemonProcess
    root: Path
    dataset_id: DatasetId
    writer_state: dict[str, Any]

    @property
    def url(self) -> str:
        assert self.daemon.server_url is not None
        return f"{self.daemon.server_url}{ALIAS}"

    def head(self) -> Multihash:
        head = asyncio.run(self.dataset().chain.head())
        assert head is not None
        return head

    def append_slice(self) -> Multihash:
        """One more slice, written while A's daemon serves the dataset."""

        async def append() -> Multihash:
            async with await Workspace.open(self.root) as workspace:
                writer = DatasetWriter(workspace.open_dataset(self.dataset_id), **self.writer_state)
                head = await writer.append(slices=1)
                self.writer_state = _writer_state(writer)
                return head

        return asyncio.run(append())

    def dataset(self) -> Dataset:
        return Dataset.open_local(self.root / "datasets" / dataset_dir_name(self.dataset_id))


def _writer_state(writer: DatasetWriter) -> dict[str, Any]:
    return {
        "rng": writer.rng,
        "next_offset": writer.next_offset,
        "last_checkpoint": writer.last_checkpoint,
        "watermark_step": writer.watermark_step,
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SourceNode]:
    root = tmp_path_factory.mktemp("mirror-targets") / "a"

    async def make() -> tuple[DatasetId, dict[str, Any]]:
        async with await Workspace.init(root) as workspace:
            writer = await create_root(workspace, ALIAS, slices=3, rows=20, seed=11)
            return writer.dataset_id, _writer_state(writer)

    dataset_id, state = asyncio.run(make())
    daemon = DaemonProcess(root, root.parent / "a.log").start()
    yield SourceNode(daemon, root, dataset_id, state)
    assert daemon.stop() == 0


def _mirror(status: dict[str, Any]) -> dict[str, Any]:
    return next((m for m in status["mirrors"] if m["name"] == ALIAS), {})


def _dataset(status: dict[str, Any]) -> dict[str, Any]:
    return next((d for d in status["datasets"] if d["alias"] == ALIAS), {})


def _folder(root: Path, dataset_id: DatasetId) -> Path:
    return root / "datasets" / dataset_dir_name(dataset_id)


# --- targets and pinning ---------------------------------------------------------------------------


@pytest.mark.ipfs
def test_mirror_pushes_to_node_and_ipns_and_pins(
    source: SourceNode, ipfs_node: LocalIpfsNode, tmp_path: Path
) -> None:
    ipfs = IpfsClient(ipfs_node.api_multiaddr, fetch_timeout=20.0)
    ipfs_config = (
        f'\n[ipfs]\napi = "{ipfs_node.api_multiaddr}"\ngateway = "{ipfs_node.gateway_url}"\n'
        "pin = true\n"
    )
    c_root, b_root = tmp_path / "c", tmp_path / "b"
    init_workspace(c_root, f'\n[server]\npush_tokens = ["{PUSH_TOKEN}"]\n' + FAST_SYNC_CONFIG)
    c = DaemonProcess(c_root, tmp_path / "c.log").start()
    b = DaemonProcess(b_root, tmp_path / "b.log")
    try:
        assert c.server_url is not None
        target = f"{c.server_url}{ALIAS}"
        init_workspace(
            b_root,
            FAST_SYNC_CONFIG + f'[sync.tokens]\n"{c.server_url}" = "{PUSH_TOKEN}"\n' + ipfs_config,
        )
        manifests = mirror_manifests(
            tmp_path, {ALIAS: source.url}, targets={ALIAS: [target, "ipns://"]}
        )
        odfd("apply", "-f", str(manifests), root=b_root)
        b.start()

        def pushed_everywhere(head: Multihash) -> dict[str, Any] | None:
            status = b.admin_status()
            mirror, dataset = _mirror(status), _dataset(status)
            states = mirror.get("targetsState", {})
            done = (
                dataset.get("head") == head.to_multibase()
                and set(states) == {target, "ipns://"}
                and all(
                    s["head"] == head.to_multibase() and s["error"] is None for s in states.values()
                )
                and mirror["lastOutcome"] == "updated"
            )
            return status if done else None

        head = source.head()
        status = wait_for(
            "B to mirror A and push to C and IPNS",
            lambda: pushed_everywhere(head),
            60,
            0.5,
            detail=lambda: _mirror(b.admin_status()),
        )
        states = _mirror(status)["targetsState"]
        assert states[target]["remote"] == target
        ipns_url = states["ipns://"]["remote"]
        assert ipns_url.startswith("ipns://k51")

        # C holds the dataset at the source's head, under the source's id, and it verifies.
        c_dataset = _dataset(c.admin_status())
        assert c_dataset["head"] == head.to_multibase() and c_dataset["id"] == str(
            source.dataset_id
        )
        c_copy = Dataset.open_local(_folder(c_root, source.dataset_id))
        assert asyncio.run(c_copy.chain.head()) == head
        assert asyncio.run(verify_integrity(c_copy)) == asyncio.run(
            verify_integrity(source.dataset())
        )

        # The IPNS name resolves to B's dataset folder (without info/), whose refs/head is the head;
        # the same folder is what B pinned.
        cid = asyncio.run(ipfs.name_resolve(ipns_url.removeprefix("ipns://")))
        b_folder = _folder(b_root, source.dataset_id)
        assert cid == asyncio.run(ipfs.add_directory(b_folder, exclude=("info",), only_hash=True))
        assert asyncio.run(ipfs.cat(f"{cid}/refs/head")).decode() == head.to_multibase()
        listed = json.loads(odfd("mirror", "list", "-o", "json", root=b_root).stdout)
        pinned = listed[0]["pinnedCid"]
        assert pinned == str(cid)
        assert parse_cid(pinned) in asyncio.run(ipfs.pin_ls())
        assert f"pinned: ipfs://{pinned}" in odfd("mirror", "list", root=b_root).stdout

        # A third workspace pulls the published name and gets the same head.
        d_root = tmp_path / "d"
        init_workspace(d_root, ipfs_config)
        odfd("pull", ipns_url, "--as", "from-ipns", root=d_root)
        d_copy = Dataset.open_local(_folder(d_root, source.dataset_id))
        assert asyncio.run(d_copy.chain.head()) == head

        # New data on A: the next sync passes it on to C, re-publishes the IPNS name and re-pins.
        new_head = source.append_slice()
        b.admin("POST", f"/mirrors/{ALIAS}/sync")
        status = wait_for(
            "B to pass A's new head on",
            lambda: pushed_everywhere(new_head),
            60,
            0.5,
            detail=lambda: _mirror(b.admin_status()),
        )
        assert (
            _mirror(status)["targetsState"]["ipns://"]["remote"] == ipns_url
        )  # the same key, published again
        assert asyncio.run(c_copy.chain.head()) == new_head
        assert asyncio.run(verify_integrity(c_copy)) == asyncio.run(
            verify_integrity(source.dataset())
        )
        new_cid = asyncio.run(ipfs.name_resolve(ipns_url.removeprefix("ipns://")))
        assert new_cid != cid
        assert asyncio.run(ipfs.cat(f"{new_cid}/refs/head")).decode() == new_head.to_multibase()
        new_pinned = json.loads(odfd("mirror", "list", "-o", "json", root=b_root).stdout)[0][
            "pinnedCid"
        ]
        assert new_pinned == str(new_cid)
        pins = asyncio.run(ipfs.pin_ls())
        assert parse_cid(new_pinned) in pins and parse_cid(pinned) not in pins

        metrics = b.metrics()
        assert metrics['odfd_pushes_total{outcome="ok"}'] == 4  # two targets, two syncs that moved
        assert metrics.get('odfd_pushes_total{outcome="failed"}', 0) == 0
        assert b.stop() == 0
        assert "push failed" not in b.log()
    finally:
        b.stop()
        c.stop()


# --- failing audits ----------------------------------------------------------------------------------


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as response:
            return response.status, await response.text()


async def _pull_into(root: Path, url: str) -> Multihash | None:
    async with await Workspace.open(root) as workspace:
        result = await pull(workspace, url, alias=ALIAS)
        return result.new_head


def test_failing_audit_withholds_dataset_until_an_audit_passes(
    source: SourceNode, tmp_path: Path
) -> None:
    b_root = tmp_path / "b"
    init_workspace(b_root, FAST_SYNC_CONFIG + "[audit]\nwithhold_failing = true\n")
    odfd("apply", "-f", str(mirror_manifests(tmp_path, {ALIAS: source.url})), root=b_root)
    b = DaemonProcess(b_root, tmp_path / "b.log").start()
    try:
        head = source.head()

        def audited(wanted: str) -> dict[str, Any] | None:
            status = b.admin_status()
            audit = _dataset(status).get("lastAudit") or {}
            done = audit.get("status") == wanted and audit.get("head") == head.to_multibase()
            return status if done else None

        status = wait_for(
            "B to mirror A and audit it",
            lambda: audited("ok"),
            60,
            0.5,
            detail=lambda: _dataset(b.admin_status()),
        )
        first_audit = _dataset(status)["lastAudit"]
        assert not _dataset(status)["failing"] and not _dataset(status)["withheld"]
        served = f"{b.server_url}{ALIAS}"
        assert asyncio.run(_get(f"{served}/refs/head")) == (200, head.to_multibase())

        # A data file rots on B's disk; the next audit finds it.
        data_dir = _folder(b_root, source.dataset_id) / "data"
        victim = sorted(data_dir.iterdir())[0]
        original = victim.read_bytes()
        rotten = bytearray(original)
        rotten[len(rotten) // 2] ^= 0x01
        victim.write_bytes(bytes(rotten))
        b.admin("POST", f"/audit/{ALIAS}", scope="integrity")
        status = wait_for(
            "the audit to fail",
            lambda: audited("failed"),
            60,
            0.5,
            detail=lambda: _dataset(b.admin_status()),
        )
        dataset = _dataset(status)
        assert dataset["failing"] and dataset["withheld"]
        assert (
            dataset["lastAudit"]["scope"] == "integrity"
            and dataset["lastAudit"]["at"] >= first_audit["at"]
        )
        assert victim.name in dataset["lastAudit"]["summary"], dataset["lastAudit"]["summary"]
        text = odfd("status", root=b_root).stdout
        line = next(line for line in text.splitlines() if line.startswith(ALIAS))
        assert "FAILING:" in line and victim.name in line and line.endswith("[withheld]"), line
        assert b.metrics()["odfd_datasets_failing"] == 1
        resource = json.loads(odfd("get", "mirror", ALIAS, "-o", "json", root=b_root).stdout)
        condition = resource["status"]["conditions"][
            "https://odfd.dev/schemas/daemon/v1alpha1/Audited"
        ]
        assert condition["status"] == "False" and condition["result"] == "failed"

        # Withheld: neither listed nor served, by either protocol, with an error saying why.
        listing = json.loads(asyncio.run(_get(b.server_url or ""))[1])
        assert ALIAS not in [d["alias"] for d in listing["datasets"]]
        withheld = f"dataset {ALIAS} is withheld by this node: its latest audit failed"
        for path in ("refs/head", f"data/{victim.name}"):
            code, body = asyncio.run(_get(f"{served}/{path}"))
            assert code == 403 and withheld in body, (code, body)
        e_root = tmp_path / "e"
        init_workspace(e_root)
        for url in (served, f"odf+{served}"):  # Simple and Smart Transfer
            with pytest.raises(OdfError, match=withheld):
                asyncio.run(_pull_into(e_root, url))

        # Withholding survives a restart (it comes from the audit history in the catalog).
        assert b.stop() == 0
        b.start()
        assert _dataset(b.admin_status())["withheld"]
        assert asyncio.run(_get(f"{b.server_url}{ALIAS}/refs/head"))[0] == 403

        # Repaired: the next audit passes and the dataset is served again.
        victim.write_bytes(original)
        b.admin("POST", f"/audit/{ALIAS}", scope="integrity")
        status = wait_for(
            "the audit to pass again",
            lambda: audited("ok"),
            60,
            0.5,
            detail=lambda: _dataset(b.admin_status()),
        )
        assert not _dataset(status)["failing"] and not _dataset(status)["withheld"]
        assert b.metrics()["odfd_datasets_failing"] == 0
        assert asyncio.run(_get(f"{b.server_url}{ALIAS}/refs/head")) == (200, head.to_multibase())
        assert asyncio.run(_pull_into(e_root, f"{b.server_url}{ALIAS}")) == head
        copy = Dataset.open_local(_folder(e_root, source.dataset_id))
        assert asyncio.run(verify_integrity(copy)) == asyncio.run(
            verify_integrity(source.dataset())
        )
    finally:
        b.stop()


def test_heads_never_audited_are_audited_at_start_up(tmp_path: Path) -> None:
    """A head that moved before a crash or shutdown left no room for its after-sync audit."""
    root = tmp_path / "b"
    init_workspace(root, FAST_SYNC_CONFIG)

    async def make() -> Multihash:
        async with await Workspace.open(root) as workspace:
            writer = await create_root(workspace, ALIAS, slices=2, seed=3)
            head = await writer.dataset.chain.head()
            assert head is not None
            return head

    head = asyncio.run(make())
    b = DaemonProcess(root, tmp_path / "b.log").start()
    try:

        def audit() -> dict[str, Any] | None:
            return _dataset(b.admin_status()).get("lastAudit")

        first = wait_for("the start-up audit", audit, 30, 0.25)
        assert (first["scope"], first["status"], first["head"]) == (
            "integrity",
            "ok",
            head.to_multibase(),
        )
        assert "trigger=startup" in b.log()
        # Audited heads are not audited again at the next start.
        assert b.stop() == 0
        b.start()
        runtime = b.admin_status()["daemon"]
        assert (runtime["auditsQueued"], runtime["auditsRunning"]) == (0, 0)
        assert not any(key.startswith("odfd_audits_total") for key in b.metrics())
        assert audit() == first
    finally:
        b.stop()
