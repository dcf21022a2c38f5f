"""``odfd verify`` performance, as ratios measured in this one run.

1. Data integrity (layer 2) throughput over a root dataset of Parquet slices, in MB of files per
   second, as a ratio to raw SHA3-256 over the same bytes (one stream), for each job count from
   1 to ``--jobs``. Layer 2 reads each slice once, but SHA3s both its bytes (physical hash) and
   its records as arrow-digest encodes them (logical hash), a stream several times the size of
   compressed Parquet: the SHA3 work alone is the floor, ``1 / (1 + stream/file)`` of raw SHA3
   on one core and ``k`` times that on ``k`` cores. Each figure is printed beside its floor (the
   one-core floor for one job, the k-core floor for k jobs; targets >= 0.85 and, for all cores,
   >= 0.8) and the load average while it ran. One job checks one file at a time: its reading and
   decoding overlap its hashing, on a second thread. Every verification runs in a fresh child
   process (with Arrow's allocator chosen as the ``odfd`` program chooses it), whose peak memory is printed next to the data size, and again for a quarter of the
   files (it must not grow with the data); "CPU efficiency" is the floor's SHA3 CPU time over
   the verification's CPU time, all threads (robust on a loaded machine: the share of the work
   that is not SHA3 shows there). The CPU time of decoding the records alone (Parquet pages,
   mostly Snappy and copies) is printed too, and so is that of building arrow-digest's value
   stream from them: a check cannot skip either and the floor counts neither, so
   ``floor / (floor + decoding + building)`` bounds the CPU efficiency, and with it what all
   cores can reach of the all-core floor. Of decoding, the pages' decompression is printed on
   its own: no reader of the files can skip it, so ``floor / (floor + decompression)`` bounds
   any verifier of them, however it decodes. Each figure is, within the noise of the raw SHA3's own
   wall vs CPU time, its CPU efficiency times the cores it kept busy (CPU time over wall time)
   over the floor's cores, printed beside it with the CPU time split into SHA3, decoding,
   building and the rest: a figure below its ceiling on a busy machine shows there as cores not
   kept busy (other processes had them), not as work.
2. Incremental audit: a root dataset of ``--blocks`` small slices is audited in full (stamping
   every file and remembering the verified head), ``--new-blocks`` more are committed, and an
   incremental audit (metadata layer reading only the blocks after the remembered head once every
   old block file's stat matched, data layer reading only the new files) is timed. Target < 1 s.
3. Re-execution (layer 3): the time to re-execute a recorded transform transaction, as a ratio to
   the time the original transaction took (planning, Spark, writing, committing). Target <= 1.2.
   Best of ``--repeat`` transactions each, after a warm-up transaction.

    python scripts/bench_verify.py [--mb 400] [--files 8] [--jobs N] [--blocks 1000]
        [--new-blocks 10] [--rows 300000] [--repeat 3] [--skip-spark]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _synthetic import csv_root_snapshot, sql_derivative_snapshot

from protocol import arrow_schema
from protocol.hashing import logical_hash, physical_hash_file
from protocol.model import (
    AddData,
    DatasetKind,
    DataSlice,
    OffsetInterval,
    SetDataSchema,
    Timestamp,
)
from storage.stores.localfs import local_path
from storage.workspace import Workspace
from verifier.audit import VerifyOptions, default_jobs, verify
from verifier.engine.registry import Engines
from verifier.selection import RangeRequest

REEXECUTION_TARGET = 1.2
INCREMENTAL_TARGET_SECONDS = 1.0
ONE_JOB_TARGET = 0.85
ALL_CORES_TARGET = 0.8
T0 = Timestamp.of(2024, 1, 1)
MS_UTC = pa.timestamp("ms", tz="UTC")


# --- 1. data integrity ------------------------------------------------------------------------


def slice_table(start: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """A slice like an ingest writes: system columns, an event time, numbers and short strings."""
    names = np.array([f"sensor-{i:04d}" for i in range(2000)])
    return pa.table(
        {
            "offset": pa.array(np.arange(start, start + rows, dtype=np.int64)),
            "op": pa.array(np.zeros(rows, dtype=np.int32)),
            "system_time": pa.array(np.full(rows, T0.epoch_millis, dtype=np.int64)).cast(MS_UTC),
            "event_time": pa.array(T0.epoch_millis + np.sort(rng.integers(0, 10**9, rows))).cast(
                MS_UTC
            ),
            "sensor": pa.array(names[rng.integers(0, len(names), rows)]),
            "reading": pa.array(rng.normal(size=rows)),
            "count": pa.array(rng.integers(0, 10**6, rows)),
        }
    )


def data_slice(table: pa.Table, path: Path, offset: int) -> DataSlice:
    """What an AddData says of ``table``, written at ``path`` from ``offset`` on."""
    return DataSlice(
        logical_hash=logical_hash(table),
        physical_hash=physical_hash_file(path),
        offset_interval=OffsetInterval(start=offset, end=offset + table.num_rows - 1),
        size=path.stat().st_size,
    )


async def commit_slice(dataset, table: pa.Table, path: Path, offset: int) -> None:
    """Commits ``table``, written at ``path``, as the next AddData (a SetDataSchema first)."""
    state = await dataset.chain.state()
    if state.schema is None:
        schema = arrow_schema.strip_encoding(arrow_schema.schema_from_arrow(table.schema))
        await dataset.commit_event(
            SetDataSchema(schema=schema), expected_head=state.head, system_time=T0
        )
        state = await dataset.chain.state()
    event = AddData(prev_offset=state.last_offset, new_data=data_slice(table, path, offset))
    await dataset.commit_data(event, data_file=path, expected_head=state.head, system_time=T0)


async def build_root(root: Path, total_mb: int, files: int) -> tuple[str, list[Path]]:
    rng = np.random.default_rng(7)
    rows = max(total_mb * 1_000_000 // 22 // files, 1)  # ~22 bytes a row once compressed
    async with await Workspace.init(root) as workspace:
        dataset = await workspace.create_dataset("sensors", DatasetKind.ROOT, system_time=T0)
        staging = root.parent / f"{root.name}-slices"  # outside the workspace's own staging
        staging.mkdir()
        offset = 0
        for n in range(files):
            table = slice_table(offset, rows, rng)
            path = staging / f"{n}.parquet"
            pq.write_table(table, path, row_group_size=1 << 20)
            await commit_slice(dataset, table, path, offset)
            offset += rows
        paths = [local_path(dataset.data, h) for h in await _slices(dataset)]
    return "sensors", paths


async def _slices(dataset) -> list:
    return [
        b.event.new_data.physical_hash
        async for _, b in dataset.chain.iter_blocks()
        if isinstance(b.event, AddData)
    ]


def logical_stream_bytes(path: Path) -> int:
    """Bytes the logical hash feeds SHA3 for one file (arrow-digest's value records)."""
    from protocol.hashing.value_stream import encode

    total = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536):
        for column in batch.columns:
            data = encode(column, None, with_offsets=False).data
            total += data.nbytes
    return total


def raw_sha3_seconds(paths: list[Path]) -> tuple[float, float]:
    """Wall and CPU seconds of SHA3-256 over the files, one stream."""
    started, cpu = time.perf_counter(), time.process_time()
    for path in paths:
        hasher = hashlib.sha3_256()
        with open(path, "rb", buffering=0) as file:
            while chunk := file.read(1 << 20):
                hasher.update(chunk)
        hasher.digest()
    return time.perf_counter() - started, time.process_time() - cpu


def unhashed_cpu_seconds(paths: list[Path]) -> tuple[float, float]:
    """CPU seconds of decoding the files' records as layer 2 does (from bytes in memory), and of
    then building their value stream, without hashing or checking them: work a check must do
    that the floor does not count."""
    from protocol.hashing.value_stream import encode, validity_mask

    build = 0.0

    def build_stream(batch: pa.RecordBatch) -> None:
        nonlocal build
        started = time.process_time()
        for column in batch.columns:
            encode(column, validity_mask(column), False)
        build += time.process_time() - started

    contents = [pa.py_buffer(path.read_bytes()) for path in paths]
    decode = sum(decoding_cpu_seconds(content, build_stream) for content in contents)
    return decode, build


def decoding_cpu_seconds(
    content: pa.Buffer, then: Callable[[pa.RecordBatch], None] | None = None
) -> float:
    """CPU seconds of decoding a Parquet file in memory as layer 2 does, without hashing it;
    ``then`` runs on each record batch, outside the time counted."""
    from protocol.hashing import hashing_batches, open_parquet

    decode = 0.0
    with open_parquet(pa.BufferReader(content)) as parquet:
        batches = iter(hashing_batches(parquet))
        while True:
            started = time.process_time()
            batch = next(batches, None)
            decode += time.process_time() - started
            if batch is None:
                return decode
            if then is not None:
                then(batch)


def decompression_cpu_seconds(paths: list[Path], repeat: int) -> float:
    """CPU seconds of decompressing the files' pages (their codec: Snappy here), which no reader
    of the files can skip: decoding each file less decoding the same pages written uncompressed
    (same row groups; dictionary and page limits apply to uncompressed sizes), one file at a
    time, each the best of ``repeat``."""
    total = 0.0
    for path in paths:
        content = pa.py_buffer(path.read_bytes())
        metadata = pq.ParquetFile(pa.BufferReader(content)).metadata
        sink = pa.BufferOutputStream()
        pq.write_table(
            pq.read_table(pa.BufferReader(content)),
            sink,
            row_group_size=metadata.row_group(0).num_rows,
            compression="none",
        )
        uncompressed = sink.getvalue()
        runs = [
            (decoding_cpu_seconds(content), decoding_cpu_seconds(uncompressed))
            for _ in range(repeat)
        ]
        total += min(c for c, _ in runs) - min(u for _, u in runs)
    return max(total, 0.0)


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


_CHILD = """
from odfd.cli.main import prefer_arrow_memory_pool
prefer_arrow_memory_pool()  # the allocator the `odfd` program runs with (before Arrow loads)
import asyncio, json, sys, time
from pathlib import Path
from tests.fixtures.proc_memory import memory_kib
from storage.workspace import Workspace
from verifier.audit import VerifyOptions, verify
from verifier.engine.registry import Engines
from verifier.selection import RangeRequest

async def main():
    last = int(sys.argv[3])
    options = VerifyOptions(
        jobs=int(sys.argv[2]),
        integrity_only=True,
        block_range=RangeRequest(None, last if last >= 0 else None),
    )
    async with await Workspace.open(Path(sys.argv[1])) as workspace:
        started, cpu = time.perf_counter(), time.process_time()
        report = await verify(workspace, ["sensors"], options, engines=Engines())
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    entry = report.datasets[0]
    assert report.exit_code == 0, report.dumps()
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "data_seconds": entry.data.duration_seconds,
                      "records": entry.data.checked["records"],
                      "max_rss_mb": peak_rss_mb()}))

def peak_rss_mb():
    # VmHWM belongs to this program's memory map; ru_maxrss would include the parent's before exec.
    return memory_kib("self", "VmHWM") / 1024

asyncio.run(main())
"""


def verify_in_child(root: Path, jobs: int, last_block: int = -1) -> dict:
    """One verification of the data layer in a fresh process (up to block ``last_block``)."""
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(jobs), str(last_block)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(repo)},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench_data_integrity(work: Path, total_mb: int, files: int, jobs: int, repeat: int) -> None:
    root = work / "integrity"
    _, paths = asyncio.run(build_root(root, total_mb, files))
    size = sum(p.stat().st_size for p in paths)
    print(f"data integrity: {len(paths)} slices, {size / 1e6:.1f} MB of Parquet")
    sha3, sha3_cpu = min(raw_sha3_seconds(paths) for _ in range(repeat))
    stream = logical_stream_bytes(paths[0]) / paths[0].stat().st_size
    floor = 1 / (1 + stream)
    floor_cpu = sha3_cpu * (1 + stream)
    print(
        f"  raw SHA3-256 (1 stream)      {size / sha3 / 1e6:8.1f} MB/s   logical-hash stream "
        f"{stream:.2f}x the file bytes: floor {floor:.2f}x raw SHA3 per core  [{load()}]"
    )
    unhashed = [unhashed_cpu_seconds(paths) for _ in range(repeat)]
    decode_cpu, build_cpu = min(d for d, _ in unhashed), min(b for _, b in unhashed)
    ceiling = floor_cpu / (floor_cpu + decode_cpu)
    print(
        f"  decoding the records alone   {decode_cpu:5.2f} s CPU, {decode_cpu / floor_cpu:4.2f} of the "
        f"floor's {floor_cpu:5.2f} s (pyarrow's Parquet decoder, mostly Snappy and copies): CPU "
        f"efficiency, and so the all-core figure, can reach at most {ceiling:4.2f}"
    )
    decompress_cpu = decompression_cpu_seconds(paths, repeat)
    bound = floor_cpu / (floor_cpu + decompress_cpu)
    print(
        f"    of which decompression     {decompress_cpu:5.2f} s CPU, {decompress_cpu / floor_cpu:4.2f} "
        f"of the floor's (the pages' Snappy: decoding them less decoding them uncompressed): "
        f"SHA3 and decompression alone bound CPU efficiency at {bound:4.2f}"
    )
    ceiling = floor_cpu / (floor_cpu + decode_cpu + build_cpu)
    print(
        f"  building the value stream    {build_cpu:5.2f} s CPU, {build_cpu / floor_cpu:4.2f} of the "
        f"floor's: with decoding, at most {ceiling:4.2f}"
    )
    cores = default_jobs()
    for workers in range(1, jobs + 1):
        runs = []
        for _ in range(repeat):
            runs.append(verify_in_child(root, workers))
            runs[-1]["load"] = load()
        best = min(runs, key=lambda r: r["seconds"])
        rate = size / best["seconds"] / 1e6
        ratio = rate / (size / sha3 / 1e6)
        floor_k = floor * min(workers, cores)
        target = ONE_JOB_TARGET if workers == 1 else ALL_CORES_TARGET
        verdict = "meets" if ratio / floor_k >= target else "MISSES"
        ceiling_note = (
            f"; decoding caps it at {ceiling:4.2f}" if workers > 1 and ceiling < target else ""
        )
        used = best["cpu_seconds"] / best["seconds"]  # one job hashes on every core too
        other = best["cpu_seconds"] - floor_cpu - decode_cpu - build_cpu
        print(
            f"  verify data layer, jobs={workers:<3} {rate:8.1f} MB/s  ratio to SHA3 {ratio:5.2f}"
            f"  floor ({min(workers, cores)} core{'s' if min(workers, cores) > 1 else ''}) "
            f"{floor_k:4.2f}: {ratio / floor_k:4.2f} of it ({verdict} >= {target}{ceiling_note})"
            f"  CPU efficiency {floor_cpu / best['cpu_seconds']:4.2f}"
            f"  peak RSS {best['max_rss_mb']:.0f} MB  [{best['load']}]"
        )
        print(
            f"    = CPU efficiency x cores used {used:4.2f} / the floor's {min(workers, cores)} "
            f"(CPU {best['cpu_seconds']:5.2f} s over {best['seconds']:5.2f} s; of {cores} cores): "
            f"SHA3 {floor_cpu:5.2f} s + decoding "
            f"{decode_cpu:4.2f} + building {build_cpu:4.2f} + the rest {other:4.2f} (reading, "
            f"column checks, hand-offs)"
        )
    quarter = max(len(paths) // 4, 1)
    # Blocks 0 and 1 are the seed and the schema; slice n is block n + 2.
    small = verify_in_child(root, jobs, last_block=quarter + 1)
    full = verify_in_child(root, jobs)
    print(
        f"  peak RSS, jobs={jobs}: {full['max_rss_mb']:.0f} MB for {len(paths)} slices "
        f"({full['records']:,} records), {small['max_rss_mb']:.0f} MB for {quarter} "
        f"({small['records']:,} records)"
    )


# --- 2. incremental audit ---------------------------------------------------------------------


async def commit_small_slices(dataset, start_offset: int, count: int, staging: Path) -> int:
    """Commits ``count`` blocks of a 100-record slice each; returns the next offset."""
    rng = np.random.default_rng(start_offset)
    offset = start_offset
    for _ in range(count):
        table = slice_table(offset, 100, rng)
        path = staging / f"{offset}.parquet"
        pq.write_table(table, path)
        await commit_slice(dataset, table, path, offset)
        offset += 100
    return offset


async def bench_incremental(work: Path, blocks: int, new_blocks: int, jobs: int) -> None:
    from verifier.audit_state import RACY_NS

    root = work / "incremental"
    staging = work / "incremental-staging"
    staging.mkdir()
    async with await Workspace.init(root) as workspace:
        dataset = await workspace.create_dataset("sensors", DatasetKind.ROOT, system_time=T0)
        offset = await commit_small_slices(dataset, 0, blocks, staging)
        await asyncio.sleep(RACY_NS / 1e9)  # files this fresh are never stamped
        started = time.perf_counter()
        full = await verify(
            workspace,
            ["sensors"],
            VerifyOptions(jobs=jobs, integrity_only=True, audit_state="full"),
            engines=Engines(),
        )
        full_seconds = time.perf_counter() - started
        assert full.exit_code == 0, full.dumps()
        await commit_small_slices(dataset, offset, new_blocks, staging)
        started = time.perf_counter()
        report = await verify(
            workspace,
            ["sensors"],
            VerifyOptions(jobs=jobs, integrity_only=True, audit_state="incremental"),
            engines=Engines(),
        )
        seconds = time.perf_counter() - started
    assert report.exit_code == 0, report.dumps()
    entry = report.datasets[0]
    print(
        f"incremental audit: {blocks} data blocks audited in full ({full_seconds:.2f} s), then {new_blocks} more"
    )
    print(
        f"  incremental audit {seconds:6.2f} s (target < {INCREMENTAL_TARGET_SECONDS:.0f} s): "
        f"metadata layer {entry.metadata.duration_seconds:.2f} s reading "
        f"{entry.metadata.checked.get('blocks', 0)} blocks "
        f"({entry.metadata.checked.get('unchanged', 0)} unchanged), "
        f"data layer {entry.data.duration_seconds:.2f} s, "
        f"{entry.data.checked['slices'] - entry.data.checked['unchanged']} slices read, "
        f"{entry.data.checked['unchanged']} unchanged"
    )


# --- 3. re-execution --------------------------------------------------------------------------

DERIVATIVE = sql_derivative_snapshot(
    "readings.hourly",
    {"readings": None},
    [
        ("valid", "SELECT event_time, sensor, reading FROM readings WHERE reading IS NOT NULL"),
        (
            None,
            "SELECT max(event_time) AS event_time, sensor, date_trunc('hour', event_time) AS hour, "
            "count(*) AS n, round(avg(reading), 6) AS mean, max(reading) AS peak "
            "FROM valid GROUP BY sensor, date_trunc('hour', event_time)",
        ),
    ],
)

ROOT = csv_root_snapshot(
    "readings", {"event_time": "timestamp", "sensor": "string", "reading": "float64"}
)


def write_csv(path: Path, rows: int, day: int, rng: np.random.Generator) -> Path:
    seconds = np.sort(rng.integers(0, 86_400, rows))
    sensors = rng.integers(0, 500, rows)
    readings = rng.normal(size=rows)
    with open(path, "w") as out:
        out.write("event_time,sensor,reading\n")
        for s, sensor, reading in zip(seconds, sensors, readings, strict=True):
            out.write(
                f"2024-01-{day:02d}T{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}Z,s{sensor},{reading:.6f}\n"
            )
    return path


async def bench_reexecution(work: Path, rows: int, repeat: int) -> None:
    from odfd.coordinator.ingest import ingest_push
    from odfd.coordinator.transform import update_derivative
    from protocol.codec import yaml as odf_yaml
    from verifier.engine.spark.settings import SparkSettings

    engines = Engines(
        SparkSettings(master="local[*]", driver_memory="2g", app_name="odfd-bench-verify")
    )
    rng = np.random.default_rng(11)
    async with await Workspace.init(work / "reexecution") as workspace:
        for manifest in (ROOT, DERIVATIVE):
            await workspace.create_from_snapshot(
                odf_yaml.load_snapshot(manifest.encode(), source="bench"), system_time=T0
            )
        readings = await workspace.get_dataset("readings")
        hourly = await workspace.get_dataset("readings.hourly")
        originals: list[float] = []
        sequence_numbers: list[int] = []
        for day in range(1, repeat + 2):  # day 1 warms Spark up and is not measured
            await ingest_push(
                workspace,
                readings,
                write_csv(work / f"day{day}.csv", rows, day, rng),
                engines=engines,
            )
            started = time.perf_counter()
            outcome = await update_derivative(workspace, hourly, engines=engines)
            elapsed = time.perf_counter() - started
            if day > 1:
                originals.append(elapsed)
                sequence_numbers.append((await hourly.chain.state()).sequence_number)
        replays: list[float] = []
        for number in sequence_numbers:
            options = VerifyOptions(block_range=RangeRequest(number, number), jobs=default_jobs())
            report = await verify(workspace, ["readings.hourly"], options, engines=engines)
            assert report.exit_code == 0, report.dumps()
            replays.append(report.datasets[-1].reproducibility.duration_seconds)
    original, replay = min(originals), min(replays)
    print(
        f"re-execution: {rows:,} input records per transaction, {outcome.num_records:,} output records"
    )
    print(
        f"  original transaction {original:6.2f} s   re-execution {replay:6.2f} s   "
        f"ratio {replay / original:4.2f} (target <= {REEXECUTION_TARGET})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mb", type=int, default=400, help="size of the dataset for the data layer"
    )
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--blocks", type=int, default=1000, help="data blocks before the increment")
    parser.add_argument("--new-blocks", type=int, default=10)
    parser.add_argument(
        "--rows", type=int, default=300_000, help="input records per transform transaction"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-spark", action="store_true", help="only the data-integrity part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odfd-bench-verify-") as work:
        bench_data_integrity(Path(work), args.mb, args.files, args.jobs, args.repeat)
        asyncio.run(bench_incremental(Path(work), args.blocks, args.new_blocks, args.jobs))
        if not args.skip_spark:
            asyncio.run(bench_reexecution(Path(work), args.rows, args.repeat))


if __name__ == "__main__":
    main()
