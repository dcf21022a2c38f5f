"""One node for the Flight SQL tests: a workspace with DataFusion-readable datasets (built with
the storage API, no Spark), served in this process by the real server on loopback, on a thread
of its own running the node's event loop, as ``odfd sql server`` runs it.

Two servers share the node: ``url`` with the default query time limit and ``strict_url`` whose
queries may keep the engine busy for one second. The service they call records the queries it
has open, so tests can see that a query a client abandoned was stopped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from odfd.app.node import Node as OdfdNode
from odfd.config import NodeConfig, ServerConfig
from odfd.flight_sql import endpoint
from odfd.flight_sql.service import PlannedQuery, QueryStream, Subject, TableInfo
from odfd.flight_sql.workspace_queries import CatalogVersion, NodeQueries, token_resolver
from protocol.identity import DatasetAliasPattern
from protocol.model import SetVocab, Timestamp
from storage.workspace import Workspace
from tests.fixtures.threaded_node import Publish, serve_in_thread
from tests.verifier.builders import MS, root_with_slices, root_with_table

READ_TOKEN = "reader-secret-token"
ADMIN_TOKEN = "admin-secret-token"
STRICT_TIME_LIMIT = 1.0
BIG_ROWS = 100_000

T0 = Timestamp.of(2020, 1, 29)


def cases_table() -> pa.Table:
    """Records shaped as the reference client's test dataset (COVID-19 case details)."""
    rows = 4
    return pa.table(
        {
            "offset": pa.array(range(rows), pa.int64()),
            "op": pa.array([0] * rows, pa.int32()),
            "system_time": pa.array([T0.epoch_millis] * rows, pa.int64()).cast(MS),
            "reported_date": pa.array(
                [T0.epoch_millis + day * 86_400_000 for day in range(rows)], pa.int64()
            ).cast(MS),
            "id": pa.array(range(1, rows + 1), pa.int64()),
            "gender": pa.array(["M", "F", None, "F"], pa.utf8()),
            "age_group": pa.array(["40s", "30s", "90+", None], pa.utf8()),
            "location": pa.array(["Out of Canada", "Vancouver", "Fraser", "Interior"], pa.utf8()),
        }
    )


class OpenQueries:
    """The node's service, with the queries it has open counted (what a test can observe of a
    query the server stopped)."""

    def __init__(self, service: NodeQueries) -> None:
        self._service = service
        self.open: set[int] = set()
        self.changed = threading.Condition()

    async def tables(self, subject: Subject) -> Sequence[TableInfo]:
        return await self._service.tables(subject)

    async def plan(
        self, subject: Subject, sql: str, parameters: Mapping[str, Any] | None = None
    ) -> PlannedQuery:
        return await self._service.plan(subject, sql, parameters)

    async def execute(
        self,
        subject: Subject,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        time_limit: float,
        planned: PlannedQuery | None = None,
    ) -> QueryStream:
        stream = await self._service.execute(
            subject, sql, parameters, time_limit=time_limit, planned=planned
        )
        self._opened(id(stream))
        return _Closing(stream, lambda: self._closed(id(stream)))

    def wait_all_closed(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: not self.open, timeout)

    def _opened(self, key: int) -> None:
        with self.changed:
            self.open.add(key)

    def _closed(self, key: int) -> None:
        with self.changed:
            self.open.discard(key)
            self.changed.notify_all()


@dataclass
class _Closing:
    stream: QueryStream
    on_close: object
    closed: bool = field(default=False)

    @property
    def schema(self) -> pa.Schema:
        return self.stream.schema

    async def next_batch(self) -> pa.RecordBatch | None:
        return await self.stream.next_batch()

    async def close(self) -> None:
        await self.stream.close()
        if not self.closed:
            self.closed = True
            self.on_close()  # type: ignore[operator]


@dataclass
class Node:
    url: str
    strict_url: str
    root: Path
    queries: OpenQueries


@pytest.fixture(scope="package")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("flight-sql") / "ws"

    async def serve(publish: Publish[Node], stop: asyncio.Event) -> None:
        async with await Workspace.init(root) as workspace:
            await root_with_slices(workspace, "nums", [[1, 2, 3], [4, 5]])
            await root_with_slices(workspace, "secret.nums", [[7, 8]])
            await root_with_table(
                workspace,
                "kamu/covid19.cases",
                cases_table(),
                events=[SetVocab(event_time_column="reported_date")],
                system_time=T0,
                row_group_size=8192,
            )
            await root_with_slices(workspace, "big", [list(range(BIG_ROWS))], row_group_size=8192)
            config = NodeConfig(
                server=ServerConfig(
                    private=(DatasetAliasPattern.parse("secret.%"),),
                    read_tokens=frozenset({READ_TOKEN}),
                    admin_tokens=frozenset({ADMIN_TOKEN}),
                )
            )
            queries = OpenQueries(NodeQueries(OdfdNode(workspace, config)))
            resolve = token_resolver(workspace, config.server)
            version = await CatalogVersion.open(workspace, lambda: config.server)
            main = await endpoint.start(
                queries, address="127.0.0.1", port=0, resolve=resolve, version=version
            )
            strict = await endpoint.start(
                queries,
                address="127.0.0.1",
                port=0,
                resolve=resolve,
                time_limit=STRICT_TIME_LIMIT,
                version=version,
            )
            publish(Node(main.url, strict.url, root, queries))
            try:
                await stop.wait()
            finally:
                await main.stop()
                await strict.stop()
                await version.close()

    with serve_in_thread("flight-sql-node", serve) as node:
        yield node
