"""Helpers for pipeline tests: datasets from inline manifests, reading slices."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.codec import yaml as odf_yaml
from protocol.model import AddData, ExecuteTransform, Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.workspace import object_path
from verifier.engine.inputs import all_slices

#: System time of datasets created by tests, before any system time the tests ingest at.
CREATED_AT = Timestamp.of(2000, 1, 1)


async def create(workspace: Workspace, manifest: str) -> Dataset:
    """Creates the dataset described by a DatasetSnapshot manifest (YAML text)."""
    snapshot = odf_yaml.load_snapshot(manifest.encode(), source="test manifest")
    return await workspace.create_from_snapshot(snapshot, system_time=CREATED_AT)


async def read_all(dataset: Dataset) -> pa.Table:
    """Every record of the dataset, oldest slice first."""
    paths = [object_path(dataset.data, h) for h in await all_slices(dataset)]
    return pa.concat_tables([pq.read_table(p) for p in paths]) if paths else pa.table({})


async def rows(dataset: Dataset, *columns: str) -> list[tuple]:
    table = await read_all(dataset)
    if table.num_rows == 0:
        return []
    return list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


async def data_events(dataset: Dataset) -> list[AddData | ExecuteTransform]:
    """The dataset's AddData/ExecuteTransform events, oldest first."""
    events = [
        b.event
        async for _, b in dataset.chain.iter_blocks()
        if isinstance(b.event, (AddData, ExecuteTransform))
    ]
    return events[::-1]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _spark_for_spark_tests(request: pytest.FixtureRequest) -> None:
    """Tests marked ``spark`` run on the shared test session, started with the test settings."""
    if request.node.get_closest_marker("spark") is not None:
        request.getfixturevalue("spark")


_PARQUET_NODE = re.compile(r"^\s*(required|optional|repeated) (?:group|\w+) field_id=-?\d+ (\w+)")


def parquet_repetition(path: Path) -> dict[str, str]:
    """Every node of the file's Parquet schema by dotted path (``ids.list.element``) and its
    repetition, as the Parquet schema printer shows them."""
    found: dict[str, str] = {}
    stack: list[str] = []
    printed = str(pq.ParquetFile(path).schema).splitlines()
    nodes = [line for line in printed if _PARQUET_NODE.match(line) or line.strip() == "}"]
    for line in nodes[1:-1]:  # within the root group
        if line.strip() == "}":
            stack.pop()
            continue
        match = _PARQUET_NODE.match(line)
        assert match, line
        repetition, name = match.groups()
        found[".".join([*stack, name])] = repetition.upper()
        if line.rstrip().endswith("{"):
            stack.append(name)
    return found
