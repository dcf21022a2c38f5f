"""The console's pages on a node holding 1,000 datasets, measured in one run.

Usage: python scripts/bench_console.py [--datasets 1000] [--repeat 20] [--workspace DIR]

Builds a workspace of ``--datasets`` datasets (nine in ten roots with two data slices each, the
rest derivatives reading three roots each, so lineage has edges), serves it with ``odfd serve``'s
app on loopback and times, over HTTP from a client in the same process, every request a page of
the console makes: the page itself, the dataset list (first page of 100, a search, the last
page), a dataset's overview, latest rows, block log, lineage (both directions), history and
audits, the mirrors and node pages. The console warms its caches when the server starts (the catalog,
the first page's summaries, every derivative's inputs): the warm-up's duration is printed, then
each request is made once ("first", right after the warm-up) and ``--repeat`` times more; the median and the worst are printed, with
the ratio to the Simple Transfer listing ``GET /`` of the same server, measured the same way, as
the baseline. Target: every page within 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odfd.config import ServerConfig
from odfd.console.api import CONSOLE_KEY
from odfd.server.app import running
from protocol.codec.yaml import load_snapshot
from storage.workspace import Workspace
from tests.console.pipelines import console_of, derivative
from tests.replication.datagen import create_root

TARGET_MS = 200.0
SAMPLES = ("bench.root.0000", "bench.derived.0000")


async def _build(root: Path, count: int) -> tuple[str, str]:
    """Returns a root and a derivative to look at."""
    derivatives = max(count // 10, 1)
    roots = [f"bench.root.{n:04d}" for n in range(count - derivatives)]
    async with await Workspace.init(root) as workspace:
        for start in range(0, len(roots), 25):
            await asyncio.gather(
                *(
                    create_root(workspace, name, slices=2, rows=10, seed=n)
                    for n, name in enumerate(roots[start : start + 25], start)
                )
            )
        for n in range(derivatives):
            inputs = [roots[(n * 3 + k) % len(roots)] for k in range(3)]
            name = f"bench.derived.{n:04d}"
            query = f"SELECT * FROM `{inputs[0]}`"
            await workspace.create_from_snapshot(
                load_snapshot(derivative(name, inputs, query), name)
            )
    return SAMPLES


async def _time(http: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with http.get(url) as response:
        await response.read()
        if response.status != 200:
            raise SystemExit(f"GET {url}: HTTP {response.status}")
    return (time.perf_counter() - started) * 1000


async def _measure(root: Path, repeat: int, sample_root: str, sample_derived: str) -> None:
    config = ServerConfig(address="127.0.0.1", port=0)
    async with (
        await Workspace.open(root) as workspace,
        running(workspace, config, mounts=[console_of(workspace)]) as server,
    ):
        base = server.url
        pages = {
            "listing GET / (baseline)": "",
            "page /ui/": "ui/",
            "datasets, first 100": "ui/api/datasets?limit=100",
            "datasets, search": "ui/api/datasets?q=derived&limit=100",
            "datasets, last page": "ui/api/datasets?offset=900&limit=100",
            "overview (derivative)": f"ui/api/datasets/{sample_derived}",
            "latest rows (root)": f"ui/api/datasets/{sample_root}/data?limit=50",
            "block log (root)": f"ui/api/datasets/{sample_root}/blocks?limit=50",
            "lineage (root, both ways)": f"ui/api/datasets/{sample_root}/lineage",
            "lineage (derivative)": f"ui/api/datasets/{sample_derived}/lineage",
            "history (root)": f"ui/api/datasets/{sample_root}/history",
            "audits (root)": f"ui/api/datasets/{sample_root}/audits",
            "mirrors": "ui/api/mirrors",
            "node": "ui/api/node",
        }
        started = time.perf_counter()
        await server.runner.app[CONSOLE_KEY].warmed()
        print(f"console warm-up after the start: {time.perf_counter() - started:.2f} s")
        async with aiohttp.ClientSession() as http:
            first = {name: await _time(http, base + path) for name, path in pages.items()}
            warm: dict[str, list[float]] = {name: [] for name in pages}
            for _ in range(repeat):
                for name, path in pages.items():
                    warm[name].append(await _time(http, base + path))
    baseline = statistics.median(warm["listing GET / (baseline)"])
    print(f"{'request':<28} {'first ms':>9} {'median ms':>10} {'worst ms':>9} {'x listing':>10}")
    slow = []
    for name in pages:
        median, worst = statistics.median(warm[name]), max(warm[name])
        print(
            f"{name:<28} {first[name]:>9.1f} {median:>10.1f} {worst:>9.1f} {median / baseline:>10.2f}"
        )
        if (
            name.startswith(
                (
                    "page",
                    "datasets",
                    "overview",
                    "latest",
                    "block",
                    "lineage",
                    "history",
                    "audits",
                    "mirrors",
                    "node",
                )
            )
            and median > TARGET_MS
        ):
            slow.append(name)
    print(
        f"target: every page's median within {TARGET_MS:.0f} ms -> "
        + ("met" if not slow else f"missed by {', '.join(slow)}")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--workspace",
        type=Path,
        help="build the workspace here and keep it; reused if it exists (default: a temp dir)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = args.workspace or Path(folder) / "ws"
        if (root / "catalog.sqlite").exists():
            sample_root, sample_derived = SAMPLES
        else:
            started = time.perf_counter()
            sample_root, sample_derived = asyncio.run(_build(root, args.datasets))
            print(f"built {args.datasets} datasets in {time.perf_counter() - started:.0f} s")
        asyncio.run(_measure(root, args.repeat, sample_root, sample_derived))


if __name__ == "__main__":
    main()
