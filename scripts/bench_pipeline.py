#!/usr/bin/env python3
"""Benchmark of the Spark pipeline, measured in one run.

1. Ingest: a generated CSV of at least ``--csv-mb`` MB (default 1024) pushed into a root dataset
   (declared schema, Append merge): rows/s and MB/s of the whole transaction (read, merge, order,
   collect, write the Parquet slice, logical and physical hashes, commit), and its ratio to plain
   Spark reading the same CSV with the same schema and writing it as Parquet (``df.write``).
2. Transform: a filter/aggregate query run as a derivative dataset's transaction over that slice,
   as a ratio to the same query run directly in Spark on the same Parquet file: a separate plain
   PySpark process (same master and driver memory, stock settings and shuffle, ``spark.read
   .parquet(...)``, result collected as Arrow), timed alternately with odfd. Target: <= 1.5x.

With ``--connect`` odfd runs as a Spark Connect client of a local Connect server (started by the
script with the same master and driver memory; ``verifier.engine.spark.connect_server``), as CLI
commands do when a daemon runs; plain Spark stays a classic PySpark process. Target: ingest
<= 1.2x through Connect. ``--shared-filesystem true`` has the server write results into the
workspace instead of streaming them over gRPC (``verifier.engine.spark.staged``).

``--time-ordered`` generates a CSV already in event-time order (one sorted run, which odfd writes
while Spark still reads it) instead of the default's sorted runs that overlap (merged after Spark
has read everything; ``verifier.engine.spark.run_merge``).

Spark start-up is excluded (one warm-up run of each kind first). Each timing is the median of
``--repeat`` runs. Usage: ``.venv/bin/python scripts/bench_pipeline.py [--csv-mb 1024] [--connect]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _synthetic import csv_root_snapshot, sql_derivative_snapshot

from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.transform import update_derivative
from protocol.codec import yaml as odf_yaml
from protocol.model import Timestamp
from storage.stores.localfs import local_path
from storage.workspace import Workspace
from verifier.engine.inputs import all_slices
from verifier.engine.registry import Engines
from verifier.engine.spark import session
from verifier.engine.spark.connect_server import LocalConnectServer, free_port
from verifier.engine.spark.settings import SparkSettings

COLUMNS = {
    "event_time": "timestamp",
    "sensor": "string",
    "region": "string",
    "value": "float64",
    "status": "int32",
}

QUERY = (
    "SELECT max(event_time) AS event_time, region, sensor, count(*) AS n, avg(value) AS mean, "
    "max(value) AS peak FROM readings WHERE status = 0 AND value > 10.0 GROUP BY region, sensor"
)

ROWS_PER_CHUNK = 1_000_000


def aggregate(name: str, input: str) -> str:
    """The manifest of a derivative dataset running :data:`QUERY` over ``input`` (as ``readings``)."""
    return sql_derivative_snapshot(name, {input: "readings"}, [(None, QUERY)])


def generate_csv(
    path: Path,
    target_bytes: int,
    chunk_rows: int = ROWS_PER_CHUNK,
    seed: int = 7,
    time_ordered: bool = False,
) -> int:
    """Writes a sensor-readings CSV of at least ``target_bytes``; returns the number of rows.

    Each chunk of rows is in event-time order over the whole year, so the file is several sorted
    runs; ``time_ordered`` gives each chunk the next day instead (one run, as appended logs are).
    """
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-01T00:00:00", "ms")
    rows = 0
    with pacsv.CSVWriter(str(path), _schema()) as writer:
        while rows == 0 or path.stat().st_size < target_bytes:
            n = chunk_rows
            span = 86_400_000 if time_ordered else 365 * 86_400_000
            first = (rows // chunk_rows) * span if time_ordered else 0
            millis = np.sort(rng.integers(first, first + span, n)) + (start.astype("int64"))
            table = pa.table(
                {
                    "event_time": pa.array(millis.astype("datetime64[ms]")).cast(
                        pa.timestamp("ms", tz="UTC")
                    ),
                    "sensor": pa.array(
                        np.char.add("sensor-", rng.integers(0, 5000, n).astype(str))
                    ),
                    "region": pa.array(
                        np.array(["north", "south", "east", "west", "central"])[
                            rng.integers(0, 5, n)
                        ]
                    ),
                    "value": pa.array(np.round(rng.normal(20.0, 8.0, n), 3)),
                    "status": pa.array(rng.choice([0, 0, 0, 1, 2], n).astype(np.int32)),
                },
                schema=_schema(),
            )
            writer.write_table(table)
            rows += n
    return rows


def _schema() -> pa.Schema:
    return pa.schema(
        [
            ("event_time", pa.timestamp("ms", tz="UTC")),
            ("sensor", pa.string()),
            ("region", pa.string()),
            ("value", pa.float64()),
            ("status", pa.int32()),
        ]
    )


async def bench(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="odfd-bench-", dir=args.dir))
    csv = work / "readings.csv"
    print(f"generating a CSV of >= {args.csv_mb} MB in {work} ...", flush=True)
    rows = generate_csv(csv, args.csv_mb * 1024 * 1024, time_ordered=args.time_ordered)
    size_mb = csv.stat().st_size / 1024 / 1024
    small = work / "small.csv"
    generate_csv(small, 1, chunk_rows=10_000)

    settings = SparkSettings(
        master=args.master, driver_memory=args.driver_memory, local_dir=str(work / "spark")
    )
    server = None
    if args.connect:
        server = LocalConnectServer(settings, free_port(), work / "spark-connect.log")
        server.start()
        server.wait_ready()
        settings = SparkSettings(
            remote=server.address.url, shared_filesystem=args.shared_filesystem == "true"
        )
    engines = Engines(settings)
    engines.start()
    if server is not None:
        how = "results as files" if session.shares_filesystem() else "results over gRPC"
        print(f"odfd runs through Spark Connect ({server.address.display}; {how})", flush=True)
    async with await Workspace.init(work / "ws") as ws:
        clock = iter(Timestamp.of(2030, 1, 1, 0, m) for m in range(60))

        async def dataset(manifest: str):
            return await ws.create_from_snapshot(
                odf_yaml.load_snapshot(manifest.encode()), system_time=Timestamp.of(2029, 1, 1)
            )

        # Warm-up: start Spark and JIT the paths once on small data.
        warm = await dataset(csv_root_snapshot("warmup", COLUMNS))
        await ingest_push(ws, warm, small, engines=engines, system_time=next(clock))
        warm_agg = await dataset(aggregate("warmup.agg", "warmup"))
        await update_derivative(ws, warm_agg, engines=engines, system_time=next(clock))

        plain = PlainSpark([str(small)], args)
        ingest_times, plain_ingest_times = [], []
        try:
            for n in range(args.repeat):
                root = await dataset(csv_root_snapshot(f"readings{n}", COLUMNS))
                began = time.perf_counter()
                outcome = await ingest_push(ws, root, csv, engines=engines, system_time=next(clock))
                ingest_times.append(time.perf_counter() - began)
                assert outcome.num_records == rows, outcome
                plain_ingest_times.append(plain.ingest(csv, work / f"plain-{n}.parquet"))
        finally:
            plain.close()
        ingest, plain_ingest = (
            statistics.median(ingest_times),
            statistics.median(plain_ingest_times),
        )
        print(
            f"ingest: {rows:,} rows, {size_mb:,.0f} MB CSV in {ingest:.1f} s (median of {args.repeat}): "
            f"{rows / ingest:,.0f} rows/s, {size_mb / ingest:,.1f} MB/s; plain Spark CSV -> Parquet "
            f"{plain_ingest:.1f} s, ratio {ingest / plain_ingest:.2f}x"
            + (" (through Spark Connect; target <= 1.2x)" if args.connect else "")
            + "\n  runs in order, odfd / plain: "
            + ", ".join(
                f"{a:.1f} / {b:.1f}" for a, b in zip(ingest_times, plain_ingest_times, strict=True)
            )
        )

        root = await ws.get_dataset("readings0")
        plain = PlainSpark([str(local_path(root.data, h)) for h in await all_slices(root)], args)
        transform_times, plain_times = [], []
        try:
            for n in range(args.repeat):
                derivative = await dataset(aggregate(f"agg{n}", "readings0"))
                began = time.perf_counter()
                transformed = await update_derivative(
                    ws, derivative, engines=engines, system_time=next(clock)
                )
                transform_times.append(time.perf_counter() - began)
                seconds, plain_rows = plain.run()
                plain_times.append(seconds)
                assert plain_rows == transformed.num_records, (plain_rows, transformed)
        finally:
            plain.close()
        transform, direct = statistics.median(transform_times), statistics.median(plain_times)
        print(
            f"transform: filter/aggregate over {rows:,} rows -> {transformed.num_records:,} rows: odfd {transform:.2f} s, "
            f"plain Spark {direct:.2f} s, ratio {transform / direct:.2f}x (target <= 1.5x)"
        )
    engines.stop()
    if server is not None:
        server.stop()
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


CONNECT_ENV = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")


class PlainSpark:
    """The query in a plain PySpark process of its own, run on request (see :func:`plain_worker`)."""

    def __init__(self, paths: list[str], args: argparse.Namespace) -> None:
        command = [
            sys.executable,
            __file__,
            "--plain-worker",
            "--master",
            args.master,
            "--driver-memory",
            args.driver_memory,
            *paths,
        ]
        # a classic JVM session, even when this process is a Spark Connect client
        env = {k: v for k, v in os.environ.items() if k not in CONNECT_ENV}
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        if self._reply() != "ready":
            raise RuntimeError("the plain Spark process did not start")

    def run(self) -> tuple[float, int]:
        """Seconds the query took and the rows it returned."""
        seconds, rows = self._ask("run").split()
        return float(seconds), int(rows)

    def ingest(self, csv: Path, out: Path) -> float:
        """Seconds plain Spark took to read ``csv`` with the declared schema and write Parquet."""
        return float(self._ask(f"ingest\t{csv}\t{out}"))

    def _ask(self, request: str) -> str:
        assert self._process.stdin is not None
        self._process.stdin.write(request + "\n")
        self._process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=120)

    def _reply(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()


def plain_worker(args: argparse.Namespace) -> None:
    """Stock PySpark: default settings, Spark's own shuffle; one warm-up run, then one per request."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if args.paths[0].endswith(".csv"):
        _plain_ingest(spark, args.paths[0], args.paths[0] + ".warm.parquet")
    else:
        spark.read.parquet(*args.paths).createOrReplaceTempView("readings")
        spark.sql(QUERY).toArrow()
    print("ready", flush=True)
    for line in sys.stdin:
        began = time.perf_counter()
        if line.startswith("ingest\t"):
            _, csv, out = line.rstrip("\n").split("\t")
            _plain_ingest(spark, csv, out)
            print(time.perf_counter() - began, flush=True)
            continue
        rows = spark.sql(QUERY).toArrow().num_rows
        print(f"{time.perf_counter() - began} {rows}", flush=True)
    spark.stop()


def _plain_ingest(spark: object, csv: str, out: str) -> None:
    ddl = "event_time TIMESTAMP, sensor STRING, region STRING, value DOUBLE, status INT"
    frame = spark.read.schema(ddl).option("header", "true").csv(csv)  # type: ignore[attr-defined]  # spark is a SparkSession, typed object to keep pyspark out of the imports
    frame.write.mode("overwrite").parquet(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--csv-mb", type=int, default=1024, help="size of the generated CSV (default 1024)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per timing (median is reported)"
    )
    parser.add_argument(
        "--time-ordered",
        action="store_true",
        help="a CSV in event-time order throughout (default: sorted runs of 1M rows, each over a year)",
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--dir", default=None, help="scratch folder (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--connect", action="store_true", help="run odfd through a local Spark Connect server"
    )
    parser.add_argument(
        "--shared-filesystem",
        choices=("true", "false"),
        default="false",
        help="with --connect: [spark] shared_filesystem (true: results come back as files)",
    )
    parser.add_argument("--plain-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_worker:
        plain_worker(args)
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
