"""A transform gives the same records, bit for bit, however Spark spreads it over machines.

The verifier re-executes transactions possibly on another master than the one that wrote them, so
the engine's output must not depend on cores, executors or the order shuffle blocks arrive in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from protocol.identity import DatasetId
from protocol.model import Timestamp
from tests.pipeline.cluster_transform import request_from_json
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformInputSlice
from verifier.engine.spark.transform import (
    INPUT_SPLIT_BYTES,
    execute_transform,
    input_frame,
    transform_session,
)

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
MS = pa.timestamp("ms", tz="UTC")
T0 = Timestamp.of(2024, 1, 1)


def _readings(start: int, n: int, rng: np.random.Generator) -> pa.Table:
    """Records ``start..start+n`` with a group key and doubles of widely varying magnitude."""
    offsets = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "offset": offsets,
            "op": pa.array(np.zeros(n, np.int32)),
            "system_time": pa.array(np.full(n, T0.epoch_millis), pa.int64()).cast(MS),
            "event_time": pa.array(T0.epoch_millis + offsets * 1000, pa.int64()).cast(MS),
            "k": rng.integers(0, 3000, n),
            "value": rng.normal(0.0, 1.0, n) * 10.0 ** rng.integers(-3, 9, n),
        }
    )


def _write_slices(
    folder: Path, sizes: list[int], seed: int = 11, **parquet_options: object
) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths, start = [], 0
    for n, size in enumerate(sizes):
        path = folder / f"slice-{n}.parquet"
        pq.write_table(_readings(start, size, rng), path, **parquet_options)
        paths.append(path)
        start += size
    return paths


def _spec(
    paths: list[Path], interval: tuple[int, int], query: str, out_dir: Path
) -> dict[str, object]:
    """A request over ``paths`` (input ``readings``) in the JSON form ``cluster_transform`` takes."""
    return {
        "paths": [str(p) for p in paths],
        "seed": "readings",
        "alias": "readings",
        "interval": list(interval),
        "query": query,
        "system_time": "2024-03-01T00:00:00Z",
        "out_dir": str(out_dir),
    }


def test_an_aggregation_over_shuffles_gives_the_same_hash_on_a_two_executor_cluster(
    spark, tmp_path: Path
) -> None:
    # Six files, together larger than one split: six map outputs per shuffle.
    paths = _write_slices(tmp_path, [200_000] * 6, compression="none")
    assert sum(p.stat().st_size for p in paths) > INPUT_SPLIT_BYTES
    query = (
        "SELECT max(event_time) AS event_time, k, sum(value) AS total, avg(value) AS mean, "
        "count(*) AS n FROM readings GROUP BY k"
    )
    spec = _spec(paths, (0, 1_199_999), query, tmp_path / "local")
    local = execute_transform(request_from_json(json.dumps(spec)))
    assert local.new_data is not None and local.new_data.num_records == 3000

    spec["out_dir"] = str(tmp_path / "cluster")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.pipeline.cluster_transform",
            "local-cluster[2,1,1024]",
            json.dumps(spec),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == str(local.new_data.logical_hash)


def test_an_input_that_fits_in_one_split_is_one_partition(spark, tmp_path: Path) -> None:
    paths = _write_slices(tmp_path, [1_000, 2_000, 3_000])
    source = TransformInputSlice(
        DatasetId.new_seeded(b"readings"),
        "readings",
        Vocab(),
        pq.read_schema(paths[0]),
        tuple(paths),
        (0, 5_999),
    )
    frame = input_frame(transform_session(), source, "out")
    assert frame.rdd.getNumPartitions() == 1
    assert [r.offset for r in frame.select("offset").collect()] == list(range(6_000))


def test_a_large_slice_is_read_in_parallel_partitions_in_offset_order(
    spark, tmp_path: Path
) -> None:
    paths = _write_slices(
        tmp_path, [1_000, 2_400_000, 1_000], row_group_size=200_000, compression="none"
    )
    large = paths[1].stat().st_size
    assert large > 2 * INPUT_SPLIT_BYTES, large
    query = "SELECT event_time, k, value FROM readings WHERE value > 1.0"
    request = request_from_json(json.dumps(_spec(paths, (500, 2_401_499), query, tmp_path / "out")))
    frame = input_frame(transform_session(), request.inputs[0], "out")
    assert frame.rdd.getNumPartitions() == 2 + -(-large // INPUT_SPLIT_BYTES)

    result = execute_transform(request)
    assert result.new_data is not None
    source = pa.concat_tables([pq.read_table(p) for p in paths])
    source = source.filter(
        pc.and_(pc.greater_equal(source["offset"], 500), pc.less_equal(source["offset"], 2_401_499))
    )
    expected = source.filter(pc.greater(source["value"], 1.0))
    written = pq.read_table(result.new_data.path)
    assert written["offset"].to_pylist() == list(range(expected.num_rows))
    assert written["value"].equals(expected["value"]) and written["k"].equals(expected["k"])
