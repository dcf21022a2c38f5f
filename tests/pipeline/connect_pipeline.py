"""The leaderboard pipeline (ingest, transforms, ``sql``, ``verify``) with fixed system times,
summarised as JSON, so a run through Spark Connect can be compared with a local session's.

In-process, :func:`run_pipeline` runs in the engines it is given (the tests' local session). As a
script it runs in engines that are a Spark Connect client of the given server — a process is one
or the other, so the Connect run needs its own process.
Usage: ``python -m tests.pipeline.connect_pipeline SC_URL FOLDER``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from odfd.app.query import run_query
from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.query import dataset_view
from odfd.coordinator.transform import update_derivative
from protocol.codec import yaml as odf_yaml
from protocol.model import Timestamp
from storage.snapshots import dependency_order
from storage.workspace import Workspace
from tests.fixtures.workspace import object_path
from verifier.audit import VerifyOptions, verify
from verifier.engine.errors import NonDeterministicQueryError
from verifier.engine.inputs import all_slices
from verifier.engine.registry import Engines
from verifier.engine.spark.collect import ordered_batches
from verifier.engine.spark.determinism import check_deterministic
from verifier.engine.spark.session import isolated_session
from verifier.engine.spark.staged import STAGING_PREFIX

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "leaderboard"
CREATED_AT = Timestamp.of(2000, 1, 1)
QUERY = "SELECT player, sum(score) AS total FROM `match.scores` GROUP BY player ORDER BY player"
NOT_REPRODUCIBLE = ("SELECT rand() AS r", "SELECT uuid() AS u", "SELECT now() AS t")
#: A result with every type a staged Connect result carries (and nulls, nesting, 3 partitions).
ALL_TYPES = """
SELECT id, cast(id % 100 AS tinyint) AS b, cast(id % 1000 AS smallint) AS s, cast(id AS int) AS i,
  cast(id AS float) / 3 AS f, cast(id AS double) / 7 AS d, cast(id AS decimal(10, 2)) AS dec,
  cast(id AS decimal(30, 5)) AS big_dec, cast(id AS string) AS str,
  cast(cast(id AS string) AS binary) AS bin, id % 2 = 0 AS bool,
  date_add(date'1500-01-01', cast(id AS int)) AS dt,
  timestamp'0001-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id / 1000) AS ts,
  cast(timestamp'2020-01-01 00:00:00' AS timestamp_ntz) AS ntz,
  array(id, id + 1) AS arr, array(id, NULL) AS arr_nulls, map('k', id) AS m,
  named_struct('a', id, 'b', cast(id AS string)) AS st,
  array(named_struct('x', map(cast(id AS string), array(id)))) AS deep,
  CASE WHEN id % 3 = 0 THEN NULL ELSE id END AS some_null
FROM range(0, 200000, 1, 3)
"""


async def run_pipeline(folder: Path, engines: Engines) -> dict[str, Any]:
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
                engines=engines,
            )
            await update_derivative(
                workspace, board, system_time=Timestamp.of(2024, 6, n, 2), engines=engines
            )
        views = [await dataset_view(scores)]
        table = await asyncio.to_thread(run_query, engines, QUERY, views, "spark")
        report = await verify(
            workspace, ["match.leaderboard"], VerifyOptions(recursive=True), engines=engines
        )
        # Block hashes differ between workspaces (new dataset keys); the data must not.
        summary: dict[str, Any] = {"sql": table.to_pylist(), "verify": report.exit_code}
        for dataset in (scores, board):
            alias = await dataset.alias()
            slices = await all_slices(dataset)
            summary[f"{alias} logical hashes"] = [await _logical_hash(dataset, h) for h in slices]
            # Slice files are the same bytes too: same batches into the same Parquet writer.
            summary[f"{alias} physical hashes"] = [str(h) for h in slices]
        summary["ddl schema"] = await _ddl_ingest(workspace, engines, folder)
        summary["staging folders left"] = await asyncio.to_thread(_staging_left, folder)
    summary["rejected"] = await asyncio.to_thread(_rejected_queries)
    summary["all types"] = await asyncio.to_thread(_collected, ALL_TYPES, folder)
    summary["failing query"] = await asyncio.to_thread(
        _collected, "SELECT cast(id AS tinyint) AS t FROM range(0, 1000, 1, 1)", folder
    )
    return summary


DDL_SOURCE = """
kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: Csv
        ddlSchema: [city STRING, population BIGINT NOT NULL]
      merge:
        kind: Snapshot
        primaryKey: [city]
"""


async def _ddl_ingest(workspace: Workspace, engines: Engines, folder: Path) -> dict[str, Any]:
    """A legacy ``ddlSchema`` read: parsed by the session at hand (a Connect client has no
    SparkContext); its slice's columns, nullability and records."""
    import pyarrow.parquet as pq

    (snapshot,) = odf_yaml.load_snapshots(DDL_SOURCE.encode(), source="cities.yaml")
    dataset = await workspace.create_from_snapshot(snapshot, system_time=CREATED_AT)
    data = folder / "cities.csv"
    data.write_text("kyiv,3000\nlviv,700\n")
    await ingest_push(
        workspace,
        dataset,
        data,
        system_time=Timestamp.of(2024, 6, 4),
        event_time=CREATED_AT,
        engines=engines,
    )
    (slice_hash,) = await all_slices(dataset)
    table = pq.read_table(object_path(dataset.data, slice_hash))
    return {
        "columns": [[f.name, f.nullable] for f in table.schema],
        "rows": [[r["city"], r["population"]] for r in table.to_pylist()],
    }


def _staging_left(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob(f"{STAGING_PREFIX}*")]


def _collected(query: str, folder: Path) -> dict[str, Any]:
    """What collecting ``query``'s result gives (schema, batch sizes, a digest of the values),
    or the error it raises; and whether a staged result was left behind."""
    work = folder / "collect"
    work.mkdir(exist_ok=True)
    outcome: dict[str, Any]
    try:
        with ordered_batches(isolated_session().sql(query), spill_dir=str(work)) as (s, batches):
            table = pa.Table.from_batches(list(batches), s)
        outcome = {
            "schema": str(table.schema),
            "batches": [len(chunk) for chunk in table.column(0).chunks],
            # The values as Python sees them (Arrow's bytes may differ: slicing, empty bitmaps).
            "digest": hashlib.sha256(repr(table.to_pylist()).encode()).hexdigest(),
        }
    except Exception as err:  # noqa: BLE001  # the error itself is the result compared
        outcome = {"error": type(err).__name__, "message": str(err).splitlines()[0]}
    outcome["left"] = sorted(p.name for p in work.iterdir())
    return outcome


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


@contextmanager
def counting_staged_results(counter: list[int]) -> Iterator[None]:
    """Counts the results a Connect server hands over as files (the real path, observed)."""
    from verifier.engine.spark import collect

    real = collect.staged_batches

    @contextmanager
    def counted(df: Any, schema: pa.Schema, parent: Path) -> Iterator[Iterator[pa.RecordBatch]]:
        counter.append(1)
        with real(df, schema, parent) as batches:
            yield batches

    collect.staged_batches = counted
    try:
        yield
    finally:
        collect.staged_batches = real


def main(url: str, folder: str) -> None:
    """Prints the summary, and how many results came back as staged files (``"staged"``)."""
    from verifier.engine.spark.settings import SparkSettings

    # The tests' server runs on this machine (loopback master and worker): it can write results
    # into the workspace, so they come back as files, the way a cluster with a shared mount does.
    engines = Engines(SparkSettings(remote=url, shared_filesystem=True))
    staged: list[int] = []
    try:
        engines.start()
        with counting_staged_results(staged):
            summary = asyncio.run(run_pipeline(Path(folder), engines))
        print(json.dumps({**summary, "staged": len(staged)}))
    finally:
        engines.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
