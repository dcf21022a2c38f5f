"""A workspace built once per test session by the real pipeline (Spark), copied by each test.

It holds what an honest node produces:

- ``cities``: a root dataset with a Snapshot merge, pushed three times, so its slices carry
  appends, retractions and corrections; ``cities.thousands`` passes them through a derivative
  (the ``op`` column survives the transform), one transaction per push;
- ``orders``: a root dataset pushed twice; ``orders.located`` joins it with ``cities`` (two
  inputs; its last transaction reads new records of only one of them);
- ``ticks``: a root dataset with one record per push, five pushes, and ``ticks.scaled``, a
  derivative updated after every push (many small transactions).

System times come from a fixed clock, so the workspace is the same on every run.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.transform import update_derivative
from protocol.codec import yaml as odf_yaml
from protocol.model import Timestamp
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG

CREATED_AT = Timestamp.of(2024, 1, 1)

MANIFESTS = "---\n".join(
    [
        root_snapshot(
            "cities",
            """
        kind: Csv
        header: true
        schema:
          fields:
            - name: city
              type: string
            - name: population
              type: int64
    """,
            """
        kind: Snapshot
        primaryKey:
          - city
    """,
        ),
        root_snapshot(
            "orders",
            """
        kind: NdJson
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: order_id
              type: string
            - name: city
              type: string
            - name: amount
              type: float64
    """,
        ),
        root_snapshot(
            "ticks",
            """
        kind: NdJson
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: n
              type: int64
    """,
        ),
        """\
kind: DatasetSnapshot
version: 1
content:
  name: cities.thousands
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: cities
      transform:
        kind: Sql
        engine: spark
        query: |
          SELECT op, event_time, city, population, round(population / 1000.0, 1) AS thousands
          FROM cities
---
kind: DatasetSnapshot
version: 1
content:
  name: orders.located
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: orders
        - datasetRef: cities
      transform:
        kind: Sql
        engine: spark
        queries:
          - alias: current_cities
            query: SELECT city, population FROM cities WHERE op IN (0, 3)
          - query: |
              SELECT o.event_time, o.order_id, o.city, o.amount, c.population
              FROM orders AS o LEFT JOIN current_cities AS c ON o.city = c.city
---
kind: DatasetSnapshot
version: 1
content:
  name: ticks.scaled
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: ticks
      transform:
        kind: Sql
        engine: spark
        query: SELECT event_time, n, n * 10 AS scaled FROM ticks
""",
    ]
)

CITIES = [
    "city,population\nlyon,516000\nnice,342000\nparis,2145000\n",
    "city,population\nlyon,522000\nparis,2145000\nlille,236000\n",  # a correction, a retraction, an append
    "city,population\nlyon,522000\nparis,2102000\nnice,348000\n",
]
ORDERS = [
    '{"event_time": "2024-02-01T10:00:00Z", "order_id": "o1", "city": "lyon", "amount": 12.5}\n'
    '{"event_time": "2024-02-01T11:00:00Z", "order_id": "o2", "city": "paris", "amount": 7.25}\n'
    '{"event_time": "2024-02-01T12:00:00Z", "order_id": "o3", "city": "nowhere", "amount": 1.0}\n',
    '{"event_time": "2024-02-02T09:30:00Z", "order_id": "o4", "city": "lille", "amount": 99.0}\n'
    '{"event_time": "2024-02-02T10:00:00Z", "order_id": "o5", "city": "lyon", "amount": 3.5}\n',
]
TICKS = 5

DERIVATIVES = ("cities.thousands", "orders.located", "ticks.scaled")
EXECUTE_TRANSFORMS = {"cities.thousands": 3, "orders.located": 3, "ticks.scaled": TICKS}


def clock() -> Callable[[], Timestamp]:
    minutes = iter(range(1, 10_000))
    return lambda: Timestamp.of(2024, 3, 1, *divmod(next(minutes), 60))


async def build(root: Path, files: Path) -> None:
    now = clock()
    async with await Workspace.init(root) as workspace:
        workspace.layout.config_path.write_text(
            workspace.layout.config_path.read_text() + TEST_SPARK_CONFIG
        )
        for snapshot in odf_yaml.load_snapshots(
            MANIFESTS.encode(), source="verifier test manifests"
        ):
            await workspace.create_from_snapshot(snapshot, system_time=CREATED_AT)
        datasets = {
            alias: await workspace.get_dataset(alias)
            for alias in ("cities", "orders", "ticks", *DERIVATIVES)
        }

        async def push(alias: str, name: str, text: str, day: int) -> None:
            path = files / name
            path.write_text(text)
            await ingest_push(
                workspace,
                datasets[alias],
                path,
                event_time=Timestamp.of(2024, 2, day),
                system_time=now(),
                engines=TEST_ENGINES,
            )

        async def transform(alias: str) -> None:
            outcome = await update_derivative(
                workspace, datasets[alias], system_time=now(), engines=TEST_ENGINES
            )
            assert not outcome.up_to_date, outcome.reason

        for day, cities in enumerate(CITIES, start=1):
            await push("cities", f"cities-{day}.csv", cities, day)
            if day <= len(ORDERS):
                await push("orders", f"orders-{day}.ndjson", ORDERS[day - 1], day)
            await transform("cities.thousands")
            await transform("orders.located")
        for n in range(TICKS):
            await push(
                "ticks",
                f"ticks-{n}.ndjson",
                f'{{"event_time": "2024-02-0{n + 1}T00:00:00Z", "n": {n}}}\n',
                n + 1,
            )
            await transform("ticks.scaled")


@pytest.fixture(scope="session")
def pipeline_template(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace above, built once (about twenty Spark transactions)."""
    base = tmp_path_factory.mktemp("verifier-pipeline")
    (base / "files").mkdir()
    asyncio.run(build(base / "ws", base / "files"))
    return base / "ws"


@pytest.fixture
async def pipeline_workspace(pipeline_template: Path, tmp_path: Path) -> AsyncIterator[Workspace]:
    """A private copy of the pipeline workspace, free to tamper with."""
    root = tmp_path / "ws"
    shutil.copytree(pipeline_template, root)
    async with await Workspace.open(root) as workspace:
        yield workspace
