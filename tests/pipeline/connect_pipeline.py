"""The leaderboard pipeline (ingest, transforms, ``sql``, ``verify``) with fixed system times,
summarised as JSON, so a run through Spark Connect can be compared with a local session's.

In-process, :func:`run_pipeline` uses whatever engine the process has (the tests' local session).
As a script it becomes a Spark Connect client of the given server first — a process is one or the
other, so the Connect run needs its own process.
Usage: ``python -m tests.pipeline.connect_pipeline SC_URL FOLDER``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from odfd.cli.commands.sql import run_query
from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.query import dataset_view
from odfd.coordinator.transform import update_derivative
from protocol.codec import yaml as odf_yaml
from protocol.model import Timestamp
from storage.snapshots import dependency_order
from storage.workspace import Workspace
from verifier.audit import VerifyOptions, verify
from verifier.engine.determinism import NonDeterministicQueryError, check_deterministic
from verifier.engine.inputs import all_slices
from verifier.engine.session import isolated_session

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "leaderboard"
CREATED_AT = Timestamp.of(2000, 1, 1)
QUERY = "SELECT player, sum(score) AS total FROM `match.scores` GROUP BY player ORDER BY player"
NOT_REPRODUCIBLE = ("SELECT rand() AS r", "SELECT uuid() AS u", "SELECT now() AS t")


async def run_pipeline(folder: Path) -> dict[str, Any]:
    """Runs the pipeline in a new workspace under ``folder``; what the engine produced."""
    async with await Workspace.init(folder / "workspace") as workspace:
        snapshots = []
        for path in sorted(EXAMPLE.glob("*.yaml")):
            snapshots.extend(odf_yaml.load_snapshots(path.read_bytes(), source=str(path)))
        for snapshot in dependency_order(snapshots):
            await workspace.create_from_snapshot(snapshot, system_time=CREATED_AT)
        scores = await workspace.get_dataset("match.scores")
        board = await workspace.get_dataset("match.leaderboard")
        for n in (1, 2, 3):
            await ingest_push(
                workspace,
                scores,
                EXAMPLE / "data" / f"{n}.ndjson",
                system_time=Timestamp.of(2024, 6, n, 1),
            )
            await update_derivative(workspace, board, system_time=Timestamp.of(2024, 6, n, 2))
        views = [await dataset_view(scores)]
        table = await asyncio.to_thread(run_query, QUERY, views, "spark")
        report = await verify(workspace, ["match.leaderboard"], VerifyOptions(recursive=True))
        # Block hashes differ between workspaces (new dataset keys); the data must not.
        summary: dict[str, Any] = {"sql": table.to_pylist(), "verify": report.exit_code}
        for dataset in (scores, board):
            alias = await dataset.alias()
            summary[f"{alias} logical hashes"] = [
                await _logical_hash(dataset, h) for h in await all_slices(dataset)
            ]
    summary["rejected"] = await asyncio.to_thread(_rejected_queries)
    return summary


async def _logical_hash(dataset: Any, physical: Any) -> str:
    from protocol.hashing import logical_hash_parquet

    return str(await asyncio.to_thread(logical_hash_parquet, dataset.data.path_of(physical)))


def _rejected_queries() -> list[str]:
    """The verdict of the determinism check on queries that must not be used in transforms."""
    spark = isolated_session()
    verdicts = []
    for query in NOT_REPRODUCIBLE:
        try:
            check_deterministic(spark.sql(query), query)
            verdicts.append(f"{query}: accepted")
        except NonDeterministicQueryError as err:
            verdicts.append(str(err))
    return verdicts


def main(url: str, folder: str) -> None:
    from verifier.engine import session
    from verifier.engine.settings import SparkSettings

    session.configure(SparkSettings(remote=url))
    try:
        print(json.dumps(asyncio.run(run_pipeline(Path(folder)))))
    finally:
        session.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
