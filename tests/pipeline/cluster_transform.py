"""Runs one transform transaction on a Spark master of the caller's choice, in its own process.

Used by ``test_cluster_determinism`` to execute the same request on ``local-cluster`` (separate
executor JVMs fetching shuffle blocks from each other) as the test session runs locally. Takes a
JSON request on the command line and prints the output slice's logical hash.
Usage: ``python -m tests.pipeline.cluster_transform MASTER REQUEST_JSON``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

from protocol.identity import DatasetId
from protocol.model import SqlQueryStep, Timestamp, TransformSql
from verifier.engine.columns import Vocab
from verifier.engine.contract import TransformInputSlice, TransformRequest
from verifier.engine.spark import session
from verifier.engine.spark.settings import SparkSettings
from verifier.engine.spark.transform import execute_transform


def request_from_json(text: str) -> TransformRequest:
    spec = json.loads(text)
    paths = tuple(Path(p) for p in spec["paths"])
    source = TransformInputSlice(
        DatasetId.new_seeded(spec["seed"].encode()),
        spec["alias"],
        Vocab(),
        pq.read_schema(paths[0]),
        paths,
        tuple(spec["interval"]),
    )
    return TransformRequest(
        dataset_alias="out",
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=spec["query"]),)),
        vocab=Vocab(),
        system_time=Timestamp.parse_rfc3339(spec["system_time"]),
        next_offset=0,
        inputs=(source,),
        prev_checkpoint=None,
        out_dir=Path(spec["out_dir"]),
    )


def main(master: str, request_json: str) -> None:
    session.configure(
        SparkSettings(master=master, driver_memory="1g", app_name="odfd-cluster-test")
    )
    try:
        result = execute_transform(request_from_json(request_json))
    finally:
        session.stop()
    assert result.new_data is not None
    print(result.new_data.logical_hash)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
