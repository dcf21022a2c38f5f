"""Pull a dataset published to IPFS (``ipfs://CID``) from a real IPFS node on loopback and compare
the pull with its two halves, each alone: copying the data objects and checking them, all
measured in this one run.

Usage: python scripts/bench_ipfs.py [--slices 1000] [--blocks-per-slice 10] [--rows 400]
    [--repeat 3] [--dir DIR]

The node is the one the tests use (``tests.fixtures.ipfs_node``: js-ipfs serving Kubo's RPC API
and gateway), started for this run and stopped at its end. Node A's root dataset of ``slices x
blocks-per-slice`` blocks (default 10,000) and ``slices`` Parquet files is added to it as odfd
publishes a dataset (the folder without ``info/``). Per round, one after another:

- the pull: odfd pulls ``ipfs://CID`` into a fresh workspace (every block hashed and linked,
  every object's size and hash checked, every data file's records, offsets and logical hash
  checked, everything fsynced before ``refs/head`` moves), with where its time went;
- copy alone: everything a pull moves (the dataset folder's blocks and data files) exported
  by the node as fast as it sends them (one ``dag/export`` of the folder, the node's cheapest
  way out), each written to a file, one ``syncfs``; no hashing, no checks. Beside it, two copies
  of the data objects only (not what a pull moves, so no target is set against them): odfd's
  object fetcher bringing them into a fresh dataset folder as a pull reads them (hash, size
  check, staged write, fsync, rename), and plain GETs of them from the gateway written to files,
  made durable as odfd makes what it stores (an fsync per file, and one ``syncfs``);
- checks alone: the pull's data checks of the same files, already local, on every core.

Each figure is the best of ``--repeat`` rounds. Target: the pull <= 1.2x max(copy alone, checks
alone), the copy being the folder's export. CPU seconds of this process (and of its block-writing
child processes) and of the IPFS node are printed beside each figure, and the load average (the
machine may be shared). Nothing is deleted until every figure is taken (each round writes to its
own folders): on ext4, creating thousands of files right after an ``rm -rf`` of thousands costs
seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from _baselines import (
    DURABILITY,
    Best,
    PhaseClock,
    checks_alone,
    checks_timed,
    load,
    overlap_report,
)
from _proc_cpu import process_cpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odfd.sync.objects import ObjectFetcher, ObjectRef
from odfd.sync.pull import pull
from odfd.sync.transport.ipfs import gateway_view
from odfd.sync.transport.settings import TransportSettings
from protocol.errors import OdfError
from protocol.identity import Multihash
from protocol.transfer.simple import ObjectKind
from storage.dataset import Dataset
from storage.ipfs_client import IpfsClient
from storage.layout import DatasetLayout
from storage.workspace import Workspace
from tests.fixtures.ipfs_node import LocalIpfsNode, start_node, stop_node
from tests.replication.datagen import create_root

PARALLEL = 8


class _Cpu:
    """CPU seconds spent by this process, by the child processes it waited for (the pull's block
    writers), and by the IPFS node between ``__init__`` and ``str``."""

    def __init__(self, node: LocalIpfsNode) -> None:
        self.node = node
        self.ours, self.theirs = time.process_time(), process_cpu(node.pid)
        self.children = _children_cpu()

    def __str__(self) -> str:
        ours = time.process_time() - self.ours
        children = _children_cpu() - self.children
        theirs = process_cpu(self.node.pid) - self.theirs
        return f"CPU {ours:.2f} s odfd (+{children:.2f} s its children) + {theirs:.2f} s IPFS node"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _timed_pull(workspace: Workspace, url: str, node: LocalIpfsNode) -> tuple[float, str]:
    """Seconds and where the time went (``overlap_report``), CPU of both sides."""
    clock = PhaseClock()
    cpu = _Cpu(node)
    with checks_timed() as checks:
        t = time.perf_counter()
        settings = TransportSettings(ipfs=node.settings())
        await pull(workspace, url, alias="big", progress=clock, settings=settings)
        ended = time.perf_counter()
        report = overlap_report(clock, checks, ended)
    return ended - t, f"{cpu}, {load()}]\n  where the pull's time went: {report}"


async def _gateway_download(gateway: str, paths: list[str], dest: Path) -> None:
    """Plain GETs of ``paths`` from the gateway into files, ``PARALLEL`` at a time."""
    await asyncio.to_thread(dest.mkdir, parents=True)
    limit = asyncio.Semaphore(PARALLEL)
    async with aiohttp.ClientSession() as session:

        async def one(path: str) -> None:
            async with limit, session.get(gateway + path) as response:
                response.raise_for_status()
                with open(dest / path.rsplit("/", 1)[1], "wb") as out:  # noqa: ASYNC230 - a plain copy is the baseline
                    async for chunk in response.content.iter_chunked(1 << 20):
                        out.write(chunk)

        await asyncio.gather(*(one(path) for path in paths))


async def _rounds(
    a: Workspace, node: LocalIpfsNode, work: Path, slices: int, blocks: int, rows: int, repeat: int
) -> None:
    t = time.perf_counter()
    empty = max(0, blocks - 1)
    writer = await create_root(
        a, "big", slices=slices, rows=rows, empty_blocks=empty, checkpoints=False
    )
    dataset_id = writer.dataset.id
    assert dataset_id is not None
    root = a.layout.dataset(dataset_id).root
    data = sorted((root / "data").iterdir())
    size = sum(path.stat().st_size for path in data)
    made = time.perf_counter() - t
    t = time.perf_counter()
    cid = await IpfsClient(node.api_multiaddr).add_directory(root, exclude=("info",))
    url = f"ipfs://{cid}"
    print(f"dataset: {len(list((root / 'blocks').iterdir()))} blocks, {len(data)} data files "
          f"({size / 1e6:.1f} MB), made in {made:.1f} s, added to IPFS in "
          f"{time.perf_counter() - t:.1f} s as {url}")  # fmt: skip

    refs = [ObjectRef(ObjectKind.DATA, Multihash.from_multibase(p.name), p.stat().st_size)
            for p in data]  # fmt: skip
    paths = [f"/ipfs/{cid}/data/{p.name}" for p in data]
    odfd_pull, whole, odfd_copy, checks = Best(), Best(), Best(), Best()
    plain: dict[str, Best] = {}
    rpc = IpfsClient(node.api_multiaddr)
    for turn in range(repeat):
        async with await Workspace.init(work / f"b{turn}") as b:
            seconds, detail = await _timed_pull(b, url, node)
            odfd_pull.offer(seconds, detail)

        # Everything the pull moved, copied alone: the folder's one export, written, one syncfs.
        target = work / f"export{turn}"
        cpu = _Cpu(node)
        t = time.perf_counter()
        exported = await rpc.export_raw_blocks(cid, max_bytes=1 << 40)
        await asyncio.to_thread(_write_files, exported, target)
        await asyncio.to_thread(DURABILITY["one syncfs"], target)
        whole.offer(time.perf_counter() - t, f"{len(exported)} files, {cpu}, {load()}")

        # odfd's object fetcher alone: the data objects from the gateway into a fresh folder.
        copy_dest = Dataset.open_local(DatasetLayout(work / f"copy{turn}").create().root)
        fetcher = ObjectFetcher(copy_dest, where=url, parallel=PARALLEL)
        async with aiohttp.ClientSession() as session:
            async with gateway_view(session, cid, "", url, node.settings()) as view:
                cpu = _Cpu(node)
                t = time.perf_counter()
                await fetcher.fetch_all(refs, view.objects)
                odfd_copy.offer(time.perf_counter() - t, f"{cpu}, {load()}")

        # Plain GETs of the same objects, made durable each way.
        for way, sync in DURABILITY.items():
            target = work / f"plain{turn}-{way.replace(' ', '-')}"
            cpu = _Cpu(node)
            t = time.perf_counter()
            await _gateway_download(node.gateway_url, paths, target)
            await asyncio.to_thread(sync, target)
            plain.setdefault(way, Best()).offer(time.perf_counter() - t, f"{cpu}, {load()}")

        # What a pull does beyond copying: every data file read once, on every core.
        seconds, ours = await asyncio.to_thread(checks_alone, data)
        checks.offer(seconds, f"CPU {ours:.2f} s odfd, {load()}")

    print(f"figures: each the best of {repeat} rounds run one after another")
    print(f"pull: odfd {odfd_pull.seconds:.2f} s  [{odfd_pull.detail}")
    print(f"  copy alone (the folder's blocks and data files in one dag/export, written, one "
          f"syncfs; no hashing, no checks): {whole.seconds:.2f} s  [{whole.detail}]")  # fmt: skip
    print(f"  data checks alone (each data file read once, on every core): "
          f"{checks.seconds:.2f} s  [{checks.detail}]")  # fmt: skip
    larger = max(whole.seconds, checks.seconds)
    print(f"  pull against max(copy alone, checks alone) = {larger:.2f} s: "
          f"{odfd_pull.seconds / larger:.2f}x (target <= 1.2x: "
          f"{'met' if odfd_pull.seconds <= 1.2 * larger else 'MISSED'})")  # fmt: skip
    print("  the data objects only (no blocks; not what a pull moves, no target):")
    for way, best in plain.items():
        print(f"    plain GETs from the gateway, {way}: {best.seconds:.2f} s  [{best.detail}]")
    print(f"    odfd's object fetcher (hashed, stored, fsynced): {odfd_copy.seconds:.2f} s  "
          f"[{odfd_copy.detail}]")  # fmt: skip


def _write_files(exported: dict[bytes, bytes], folder: Path) -> None:
    """Each exported block into a numbered file of ``folder`` (a plain write)."""
    folder.mkdir(parents=True)
    for number, data in enumerate(exported.values()):
        (folder / f"{number:06d}").write_bytes(data)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=1000, help="data files of the dataset")
    parser.add_argument("--blocks-per-slice", type=int, default=10, help="blocks per data file")
    parser.add_argument("--rows", type=int, default=400, help="records per data file")
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds of the measurements (best kept)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ipfs-", dir=args.dir))
    node: LocalIpfsNode | None = None
    try:
        node = start_node(work / "ipfs", die_with_parent=True)
        async with await Workspace.init(work / "a") as a:
            await _rounds(a, node, work, args.slices, args.blocks_per_slice, args.rows, args.repeat)
    except OdfError as err:  # odfd's, the node's (IpfsNodeError) and storage errors
        raise SystemExit(f"bench_ipfs: stopped by an error: {err}") from None
    finally:
        if node is not None:
            stop_node(node)  # the node this run started, by its PID
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
