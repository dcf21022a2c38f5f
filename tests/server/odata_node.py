"""One node for the OData tests, served by the real server on loopback as ``odfd serve`` serves
it (transfer protocols and the query API, which OData reads through), on a thread of its own.

Its datasets, built with the storage API (no Spark): the reference's test dataset ``foo.bar``
(three cities, every block written at 2050-01-01T12:00:00Z, so the reference's expected XML
applies byte for byte), ``alice/weather`` under an account with nulls, floats, booleans, dates
and a decimal column (a type OData is not given), a private ``secret.nums``, and
``alice/empty``, created without data."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from odfd.app.node import Node
from odfd.config import NodeConfig, ServerConfig
from odfd.server.app import running
from odfd.server.query_api import query_api_mount
from protocol.identity import DatasetAliasPattern
from protocol.model import DatasetKind, SetVocab, Timestamp
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.verifier.builders import MS, root_with_slices, root_with_table

SYSTEM_TIME = Timestamp.of(2050, 1, 1, 12)
EVENT_TIME = Timestamp.of(2020, 1, 1)
READ_TOKEN = "odata-reader"
PRIVATE = "secret.nums"
SERVER = ServerConfig(
    port=0,
    private=(DatasetAliasPattern.parse(PRIVATE),),
    read_tokens=frozenset({READ_TOKEN}),
    query_max_rows=1000,
)


def foo_bar() -> pa.Table:
    """The reference's ``foo.bar``: ``date,city,population`` of three cities."""
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", MS, nullable=False),
            pa.field("date", MS, nullable=False),
            pa.field("city", pa.utf8(), nullable=False),
            pa.field("population", pa.int64(), nullable=False),
        ]
    )
    return pa.table(
        [
            pa.array([0, 1, 2], pa.int64()),
            pa.array([0, 0, 0], pa.int32()),
            pa.array([SYSTEM_TIME.epoch_millis] * 3, pa.int64()).cast(MS),
            pa.array([EVENT_TIME.epoch_millis] * 3, pa.int64()).cast(MS),
            pa.array(["A", "B", "C"]),
            pa.array([1000, 2000, 3000], pa.int64()),
        ],
        schema=schema,
    )


def weather() -> pa.Table:
    """Values of the other supported types, nulls among them, and a decimal column."""
    count = 150
    millis = SYSTEM_TIME.epoch_millis
    return pa.table(
        {
            "offset": pa.array(range(count), pa.int64()),
            "op": pa.array([0] * count, pa.int32()),
            "system_time": pa.array([millis] * count, pa.int64()).cast(MS),
            "event_time": pa.array([millis - i * 1000 for i in range(count)], pa.int64()).cast(MS),
            "station": pa.array([None if i == 1 else f"st-{i % 3}" for i in range(count)]),
            "temp": pa.array([None if i == 2 else i / 4 - 10 for i in range(count)], pa.float64()),
            "ok": pa.array([i % 2 == 0 for i in range(count)]),
            "day": pa.array([18_262 + i for i in range(count)], pa.date32()),
            "reading": pa.array([Decimal(i) / 100 for i in range(count)], pa.decimal128(10, 2)),
        }
    )


async def add_datasets(workspace: Workspace) -> None:
    await root_with_table(
        workspace,
        "foo.bar",
        foo_bar(),
        events=[SetVocab(event_time_column="date")],
        system_time=SYSTEM_TIME,
    )
    await root_with_table(workspace, "alice/weather", weather(), system_time=SYSTEM_TIME)
    await root_with_slices(workspace, PRIVATE, [[7, 8]])
    await workspace.create_dataset("alice/empty", DatasetKind.ROOT, system_time=SYSTEM_TIME)


@dataclass
class Served:
    url: str
    root: Path
    node: Node


def serve(root: Path, server: ServerConfig = SERVER) -> Iterator[Served]:
    """The node (served with ``server``) on a thread of its own until the generator is
    closed."""

    async def run_node(publish: Publish[Served], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            await add_datasets(workspace)
            node = Node(workspace, NodeConfig(server=server))
            async with running(workspace, server, mounts=[query_api_mount(node)]) as running_:
                publish(Served(running_.url.rstrip("/"), root, node))
                await stop.wait()

    with serve_in_thread("odata-node", run_node) as served:
        yield served
