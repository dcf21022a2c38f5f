"""Which dataset reads which, on a node with many datasets: the dataset graph from the catalog's
index against reading chain states, measured in this one run.

Usage: python scripts/bench_graph.py [--roots 1000] [--derivatives 50] [--rounds 3] [--dir DIR]

A workspace holds ``--roots`` root datasets and ``--derivatives`` derivatives, each reading two
roots (and every fifth one also the derivative before it). The question is the one ``odfd delete``,
``add --replace``, ``reset``, ``compact``, ``pull --recursive``, ``push --recursive``, the console's
lineage and the daemon's derivative updates ask: who reads this dataset? Answered three ways, each
in a fresh workspace object (as a command starts) and best of ``--rounds``:

1. every dataset's chain state read (what delete, ``add --replace``, reset and compact did);
2. every derivative's chain state read (what the daemon and the console did);
3. ``Workspace.graph()``: the catalog's datasets and its index of inputs, no chain read;
4. the graph of the derivatives alone (the daemon asks which of its derivatives read a dataset).

The chain states come from the states the workspace saved in its catalog (a few block reads each),
so 1 and 2 are the cheap way of reading chains; the ratios are what the graph saves on top.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from protocol.model import (
    DatasetKind,
    SetTransform,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from storage.workspace import Workspace


def _transform(inputs: list[DatasetId]) -> SetTransform:
    return SetTransform(
        inputs=tuple(
            TransformInput(dataset_ref=DatasetRef(dataset_id), alias=f"in{n}")
            for n, dataset_id in enumerate(inputs)
        ),
        transform=TransformSql(
            engine="datafusion", queries=(SqlQueryStep(query="SELECT * FROM in0"),)
        ),
    )


async def build(root: Path, roots: int, derivatives: int) -> None:
    workspace = await Workspace.init(root)
    try:
        root_ids = []
        for n in range(roots):
            dataset = await workspace.create_dataset(
                DatasetAlias.parse(f"root{n}"), DatasetKind.ROOT
            )
            assert dataset.id is not None
            root_ids.append(dataset.id)
        previous: DatasetId | None = None
        for n in range(derivatives):
            inputs = [root_ids[(2 * n) % roots], root_ids[(2 * n + 1) % roots]]
            if previous is not None and n % 5 == 0:
                inputs.append(previous)
            dataset = await workspace.create_dataset(
                DatasetAlias.parse(f"deriv{n}"), DatasetKind.DERIVATIVE, [_transform(inputs)]
            )
            previous = dataset.id
    finally:
        await workspace.close()


async def readers_from_chains(workspace: Workspace, kind: DatasetKind | None) -> int:
    """Every chain state of ``kind`` (all datasets: ``None``) read, as the callers did."""
    readers: dict[DatasetId, list[DatasetId]] = {}
    for record in await workspace.catalog.list_datasets(kind):
        state = await workspace.open_dataset(record.id).chain.state()
        for input_id in state.transform_input_ids:
            readers.setdefault(input_id, []).append(record.id)
    return sum(len(r) for r in readers.values())


async def readers_from_graph(workspace: Workspace, kind: DatasetKind | None) -> int:
    graph = await workspace.graph(await workspace.catalog.list_datasets(kind))
    inputs = {i for dataset_id in graph.records for i in graph.inputs_of(dataset_id)}
    return sum(len(graph.readers_of(dataset_id)) for dataset_id in inputs)


async def best(
    root: Path, rounds: int, question: Callable[[Workspace], Awaitable[int]]
) -> tuple[float, int]:
    times, answer = [], 0
    for _ in range(rounds):
        workspace = await Workspace.open(root)
        try:
            started = time.perf_counter()
            answer = await question(workspace)
            times.append(time.perf_counter() - started)
        finally:
            await workspace.close()
    return min(times), answer


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=1000)
    parser.add_argument("--derivatives", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench-graph-"))
    try:
        root = work / "ws"
        started = time.perf_counter()
        await build(root, args.roots, args.derivatives)
        print(
            f"setup:      {args.roots} roots + {args.derivatives} derivatives "
            f"in {time.perf_counter() - started:.1f} s"
        )
        graph_s, edges = await best(root, args.rounds, lambda ws: readers_from_graph(ws, None))
        deriv_graph_s, deriv_graph_edges = await best(
            root, args.rounds, lambda ws: readers_from_graph(ws, DatasetKind.DERIVATIVE)
        )
        all_s, all_edges = await best(root, args.rounds, lambda ws: readers_from_chains(ws, None))
        deriv_s, deriv_edges = await best(
            root, args.rounds, lambda ws: readers_from_chains(ws, DatasetKind.DERIVATIVE)
        )
        assert edges == all_edges == deriv_edges == deriv_graph_edges
        total = args.roots + args.derivatives
        print(
            f"graph:      {graph_s * 1000:8.1f} ms  (catalog index, 0 chains read; {edges} edges)"
        )
        print(
            f"all chains: {all_s * 1000:8.1f} ms  ({total} chain states read) -> "
            f"{all_s / graph_s:.1f}x the graph's time"
        )
        print(
            f"derivatives' graph: {deriv_graph_s * 1000:.1f} ms vs their {args.derivatives} "
            f"chain states read: {deriv_s * 1000:.1f} ms -> {deriv_s / deriv_graph_s:.1f}x"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
