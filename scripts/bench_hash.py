"""Hash throughput, as ratios measured in this one run (best of ``--repeat`` timings each).

1. The logical hash of an in-memory table, as a ratio to plain SHA3-256 over the table's bytes.
   Targets: >= 0.8 for fixed-width columns, >= 0.4 for string-heavy data.
2. ``odfd data hash`` (a whole process: start-up, one read of the file, both hashes) on a Parquet
   file of ``--file-mb``, as a ratio to its floor: one process that reads the file, SHA3s its
   bytes, then SHA3s as many bytes again as the logical hash's value stream holds (arrow-digest's
   records of the file's columns, counted before the runs). Target >= 0.85, for fixed-width
   columns and for string columns. The floor runs on one core; ``odfd data hash`` hashes the
   file's bytes and its columns on every core, so the ratio also shows what a busy machine leaves
   of its second core: the load average is printed beside each figure, and so is each process's
   CPU time (user + system, best run) and their ratio, which a busy machine disturbs far less
   (``odfd`` also pays for its start-up, decoding and building the stream there; on ``k`` idle
   cores its wall-clock ratio can reach about ``k`` times the CPU ratio).

    python scripts/bench_hash.py [--mb 100] [--file-mb 150] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from protocol.hashing import logical_hash

TARGETS = {"fixed-width": 0.8, "strings": 0.4}
DATA_HASH_TARGET = 0.85


def fixed_width_table(total_bytes: int, rng: np.random.Generator, null_rate: float) -> pa.Table:
    rows = total_bytes // 16
    ints = rng.integers(-(2**62), 2**62, rows)
    floats = rng.normal(size=rows)
    mask = (rng.random(rows) < null_rate) if null_rate else None
    return pa.table({"id": pa.array(ints, mask=mask), "value": pa.array(floats, mask=mask)})


def string_table(total_bytes: int, rng: np.random.Generator) -> pa.Table:
    """Strings of 0..48 ASCII bytes (mean 24) with 5% nulls, plus an int64 key column."""
    mean_record = 24 + 4 + 8
    rows = total_bytes // mean_record
    lengths = rng.integers(0, 49, rows)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = rng.integers(32, 127, int(offsets[-1]), dtype=np.uint8)
    validity = rng.random(rows) >= 0.05
    strings = pa.Array.from_buffers(
        pa.large_string(),
        rows,
        [
            pa.py_buffer(np.packbits(validity, bitorder="little")),
            pa.py_buffer(offsets),
            pa.py_buffer(data),
        ],
    )
    return pa.table({"key": pa.array(np.arange(rows, dtype=np.int64)), "text": strings})


def measure(name: str, table: pa.Table, repeat: int) -> float:
    """Best-of-``repeat`` times, alternating the two hashes so load changes hit both alike."""
    size = table.nbytes
    raw = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    raw_times, hash_times = [], []
    for _ in range(repeat):
        raw_times.append(_timed(lambda: hashlib.sha3_256(memoryview(raw)).digest()))
        hash_times.append(_timed(lambda: logical_hash(table)))
    raw_time, hash_time = min(raw_times), min(hash_times)
    ratio = raw_time / hash_time
    print(
        f"{name:<28} {size / 1e6:8.1f} MB  sha3 {size / raw_time / 1e6:7.1f} MB/s  "
        f"logical {size / hash_time / 1e6:7.1f} MB/s  ratio {ratio:5.2f}"
    )
    return ratio


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def logical_stream_bytes(path: Path) -> int:
    """Bytes the logical hash feeds SHA3 for the file (arrow-digest's value records), read as
    ``odfd data hash`` reads it."""
    from protocol.hashing import hashing_batches, open_parquet
    from protocol.hashing.value_stream import encode, validity_mask

    total = 0
    with open_parquet(str(path)) as parquet:
        for batch in hashing_batches(parquet):
            for column in batch.columns:
                total += encode(column, validity_mask(column), False).data.nbytes
    return total


_FLOOR = """
import hashlib, sys
data = open(sys.argv[1], "rb").read()
hashlib.sha3_256(data).digest()
hasher, view, left = hashlib.sha3_256(), memoryview(data), int(sys.argv[2])
while left:
    hasher.update(view[: min(left, len(view))])
    left -= min(left, len(view))
hasher.digest()
"""
"""The floor of ``odfd data hash``: read the file, SHA3 its bytes, SHA3 as many bytes as the
logical hash's value stream holds (the file's bytes again, so no time goes to making them)."""


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure_data_hash(name: str, table: pa.Table, work: Path, repeat: int) -> float:
    """Best-of-``repeat`` wall times of ``odfd data hash`` and of its floor, alternated."""
    path = work / f"{name}.parquet"
    pq.write_table(table, path)
    odfd = [str(Path(sys.executable).parent / "odfd"), "data", "hash", str(path)]
    stream = logical_stream_bytes(path)
    floor = [sys.executable, "-c", _FLOOR, str(path), str(stream)]
    floor_runs, odfd_runs = [], []
    for _ in range(repeat):
        floor_runs.append(_child_times(lambda: subprocess.run(floor, check=True)))
        odfd_runs.append(
            _child_times(lambda: subprocess.run(odfd, check=True, stdout=subprocess.DEVNULL))
        )
    floor_time, odfd_time = min(w for w, _ in floor_runs), min(w for w, _ in odfd_runs)
    floor_cpu, odfd_cpu = min(c for _, c in floor_runs), min(c for _, c in odfd_runs)
    ratio = floor_time / odfd_time
    print(
        f"odfd data hash, {name:<12} {path.stat().st_size / 1e6:6.1f} MB file, "
        f"{stream / 1e6:6.1f} MB value stream: floor {floor_time:5.2f} s, "
        f"odfd {odfd_time:5.2f} s, ratio {ratio:4.2f} (target >= {DATA_HASH_TARGET})  "
        f"CPU floor {floor_cpu:5.2f} s, odfd {odfd_cpu:5.2f} s, "
        f"ratio {floor_cpu / odfd_cpu:4.2f}  [{load()}]"
    )
    return ratio


def _child_times(action: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds of ``action`` and the CPU seconds (user + system) of the children it ran."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _timed(action)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="approximate table size in MB")
    parser.add_argument("--repeat", type=int, default=3, help="timings per measurement (best kept)")
    parser.add_argument(
        "--file-mb", type=int, default=150, help="decoded size of the data-hash files in MB"
    )
    parser.add_argument("--skip-tables", action="store_true", help="only the data-hash part")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="odfd-bench-hash-") as work:
        file_total = args.file_mb * 1_000_000
        for name, table in (
            ("fixed-width", fixed_width_table(file_total, rng, 0.0)),
            ("strings", string_table(file_total, rng)),
        ):
            measure_data_hash(name, table, Path(work), args.repeat)
    if args.skip_tables:
        return
    total = args.mb * 1_000_000
    results = {
        "fixed-width": measure(
            "int64+float64, no nulls", fixed_width_table(total, rng, 0.0), args.repeat
        ),
        "strings": measure("strings (5% nulls)", string_table(total, rng), args.repeat),
    }
    measure("int64+float64, 5% nulls", fixed_width_table(total, rng, 0.05), args.repeat)
    for name, ratio in results.items():
        verdict = "meets" if ratio >= TARGETS[name] else "MISSES"
        print(f"{name}: ratio {ratio:.2f} {verdict} target {TARGETS[name]}")


if __name__ == "__main__":
    main()
