"""Cost of writing a query answer's data as the reference's JSON, as a ratio to pyarrow writing
the same rows as CSV (the text writer pyarrow has), both timed in this one run (CPU time, best
of ``--repeat``), so machine speed and load cancel out.

The rows look like an ODF dataset's: offset, op, system and event times (ms, UTC), a city name,
a population and a price. Printed per layout (JsonAoS, JsonSoA, JsonAoA), with and without a
proof (a proof also writes and hashes the canonical form). The end-to-end target of issue 38
(answer <= 1.5x of executing the query plus writing the JSON) is measured against a running
node by ``scripts/bench_api.py``; this isolates the renderer.

    python scripts/bench_query_render.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import io
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as csv

from protocol.query import DataFormat, QueryRequest, QueryResponseWriter, ResponseSigner


def dataset_rows(rows: int) -> pa.Table:
    rng = np.random.default_rng(1)
    start = 1_577_880_000_000
    cities = np.array(["Vancouver", "Seattle", "Portland", "Kyiv", "Zürich"])
    return pa.table(
        {
            "offset": pa.array(np.arange(rows, dtype=np.int64)),
            "op": pa.array(np.zeros(rows, dtype=np.int32)),
            "system_time": pa.array(np.full(rows, start), pa.timestamp("ms", "UTC")),
            "event_time": pa.array(start + np.arange(rows) * 1000, pa.timestamp("ms", "UTC")),
            "city": pa.array(cities[rng.integers(0, len(cities), rows)]),
            "population": pa.array(rng.integers(0, 10**7, rows), pa.uint64()),
            "price": pa.array(np.round(rng.uniform(0, 5000, rows), 2)),
        }
    )


def best_cpu(action: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        action()
        best = min(best, time.process_time() - started)
    return best


def answer(table: pa.Table, data_format: DataFormat, proof: bool) -> int:
    include = ["proof"] if proof else []
    request = QueryRequest.from_json(
        {"query": "q", "dataFormat": data_format.value, "include": include}
    )
    signer = None
    if proof:
        from nacl.signing import SigningKey

        signer = ResponseSigner(SigningKey.generate())
    writer = QueryResponseWriter(
        request, datasets=[], schema=table.schema, signer=signer, soa_limit=10**10
    )
    return sum(len(chunk) for chunk in writer.chunks(table.to_batches(max_chunksize=65_536)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    table = dataset_rows(options.rows)
    baseline = best_cpu(lambda: csv.write_csv(table, io.BytesIO()), options.repeat)
    print(f"{options.rows} rows; pyarrow CSV: {baseline:.3f} s CPU")
    for data_format in DataFormat:
        for proof in (False, True):
            size = answer(table, data_format, proof)
            cost = best_cpu(functools.partial(answer, table, data_format, proof), options.repeat)
            label = f"{data_format.value}{' + proof' if proof else ''}"
            print(
                f"{label:<16} {cost:7.3f} s CPU  {cost / baseline:5.2f}x CSV  {size / 1e6:7.1f} MB"
            )


if __name__ == "__main__":
    main()
