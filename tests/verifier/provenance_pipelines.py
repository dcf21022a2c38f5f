"""Pipelines the provenance tests trace: two root datasets with hand-written rows and one
derivative per construct (two levels), plus derivatives of derivatives (three levels).

Roots are committed straight through the storage API (their ``AddData`` blocks carry a source
state, as an ingest writes them), derivatives are run by the coordinator in the engine under
test, so every block is exactly what ``odfd pull`` records.

Rows of ``trades`` (offset: symbol, price; event times 1..8 s after T), in two blocks 0-3, 4-7::

    0: A 10   1: B 20   2: A 11   3: B 19   |   4: A 12   5: A 13   6: B 21   7: C 5

``rates``: ``0: A 2.0``, ``1: B 3.0`` (one block).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odfd.coordinator.transform import update_derivative
from protocol import arrow_schema
from protocol.codec import yaml as odf_yaml
from protocol.hashing import logical_hash, physical_hash_file
from protocol.model import (
    AddData,
    DataSlice,
    OffsetInterval,
    SetDataSchema,
    SourceState,
    Timestamp,
)
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES

T = 1_700_000_000_000
SYSTEM_TIME = Timestamp.of(2024, 3, 1)
MS_UTC = pa.timestamp("ms", tz="UTC")

TRADES = [("A", 10.0), ("B", 20.0), ("A", 11.0), ("B", 19.0), ("A", 12.0), ("A", 13.0)]
TRADES += [("B", 21.0), ("C", 5.0)]
RATES = [("A", 2.0), ("B", 3.0)]

_ROOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: upload
      read:
        kind: NdJson
        schema:
          fields:
            - name: event_time
              type: {{kind: Timestamp, unit: Millisecond, timezone: UTC}}
            - name: symbol
              type: {{kind: String}}
            - name: {value}
              type: {{kind: Float64}}
      merge:
        kind: Append
"""


def _derivative(
    name: str, inputs: list[str], engine: str, steps: list[tuple[str | None, str]]
) -> str:
    refs = "".join(f"\n        - datasetRef: {ref}" for ref in inputs)
    queries = ""
    for alias, query in steps:
        queries += "\n          - " + (f"alias: {alias}\n            " if alias else "")
        queries += f"query: {json.dumps(query)}"
    return f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:{refs}
      transform:
        kind: Sql
        engine: {engine}
        queries:{queries}
"""


def _q(engine: str, name: str) -> str:
    return f"`{name}`" if engine == "spark" else f'"{name}"'


def derivatives(engine: str) -> dict[str, tuple[list[str], list[tuple[str | None, str]]]]:
    """Name -> (inputs, query steps), in creation order (level 3 reads level 2)."""
    t, r = _q(engine, "trades"), _q(engine, "rates")
    return {
        "proj": (["trades"], [(None, f"SELECT event_time, symbol, price * 2 AS doubled FROM {t}")]),
        "filt": (
            ["trades"],
            [(None, f"SELECT event_time, symbol AS ticker, price FROM {t} WHERE price > 12")],
        ),
        "inner": (
            ["trades", "rates"],
            [
                (
                    None,
                    f"SELECT t.event_time, t.symbol, t.price * r.rate AS value FROM {t} t "
                    f"JOIN {r} r ON t.symbol = r.symbol",
                )
            ],
        ),
        "left": (
            ["trades", "rates"],
            [
                (
                    None,
                    f"SELECT t.event_time, t.symbol, t.price, r.rate FROM {t} t "
                    f"LEFT JOIN {r} r ON t.symbol = r.symbol",
                )
            ],
        ),
        "unioned": (
            ["trades", "rates"],
            [
                (
                    None,
                    f"SELECT event_time, symbol FROM {t} WHERE price < 11 "
                    f"UNION ALL SELECT event_time, symbol FROM {r}",
                )
            ],
        ),
        "grouped": (
            ["trades"],
            [
                (
                    None,
                    f"SELECT max(event_time) AS event_time, symbol, sum(price) AS total, "
                    f"count(*) AS n FROM {t} GROUP BY symbol",
                )
            ],
        ),
        "distinct": (
            ["trades"],
            [
                (
                    None,
                    f"SELECT DISTINCT symbol, CAST(min_ts AS TIMESTAMP) AS event_time FROM "
                    f"(SELECT symbol, '2024-01-01 00:00:00' AS min_ts FROM {t}) s",
                )
            ],
        ),
        "windowed": (
            ["trades"],
            [
                (
                    None,
                    f"SELECT event_time, symbol, price, sum(price) OVER (PARTITION BY symbol "
                    f"ORDER BY event_time) AS running, row_number() OVER (PARTITION BY symbol "
                    f"ORDER BY event_time) AS n, avg(price) OVER (PARTITION BY symbol ORDER BY "
                    f"event_time ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS pair FROM {t}",
                )
            ],
        ),
        "steps": (
            ["trades", "rates"],
            [
                (
                    "priced",
                    f"SELECT t.event_time, t.symbol, t.price * r.rate AS value FROM {t} t "
                    f"JOIN {r} r ON t.symbol = r.symbol",
                ),
                (
                    "ranked",
                    "SELECT event_time, symbol, value, rank() OVER (PARTITION BY symbol "
                    "ORDER BY value DESC) AS place FROM priced",
                ),
                (None, "SELECT event_time, symbol, value FROM ranked WHERE place = 1"),
            ],
        ),
        "nested": (
            ["trades"],
            [
                (
                    None,
                    "SELECT event_time, symbol, price, s FROM (SELECT event_time, symbol, price, "
                    f"sum(price) OVER (PARTITION BY symbol) AS s FROM {t}) x WHERE s > 50",
                )
            ],
        ),
        # several constructs in one transform (Spark's tests run few transforms): a left join, a
        # window over it, then a filter, a GROUP BY and a DISTINCT under one UNION ALL
        "combo": (
            ["trades", "rates"],
            [
                (
                    "j",
                    f"SELECT t.event_time, t.symbol, t.price, r.rate FROM {t} t "
                    f"LEFT JOIN {r} r ON t.symbol = r.symbol",
                ),
                (
                    "w",
                    "SELECT event_time, symbol, price, rate, sum(price) OVER (PARTITION BY symbol "
                    "ORDER BY event_time) AS running FROM j",
                ),
                (
                    None,
                    "SELECT event_time, symbol, 'row' AS kind, running AS value FROM w "
                    "WHERE price > 12 "
                    "UNION ALL SELECT max(event_time) AS event_time, symbol, 'group' AS kind, "
                    "sum(price) AS value FROM j GROUP BY symbol "
                    "UNION ALL SELECT DISTINCT CAST('2024-01-01 00:00:00' AS TIMESTAMP) AS "
                    f"event_time, symbol, 'distinct' AS kind, CAST(0 AS DOUBLE) AS value FROM {t}",
                ),
            ],
        ),
        "combo.top": (
            ["combo", "rates"],
            [
                (
                    None,
                    f"SELECT c.event_time, c.symbol, c.value * r.rate AS scaled "
                    f"FROM {_q(engine, 'combo')} c JOIN {r} r ON c.symbol = r.symbol "
                    "WHERE c.kind = 'group'",
                )
            ],
        ),
        # a construct the rewrite refuses (a subquery inside an expression)
        "subq": (
            ["trades", "rates"],
            [
                (
                    None,
                    f"SELECT event_time, symbol FROM {t} WHERE price > "
                    f"(SELECT max(rate) * 6 FROM {r})",
                )
            ],
        ),
        # level 3: derivatives of derivatives
        "top": (
            ["grouped"],
            [
                (
                    None,
                    f"SELECT event_time, symbol AS leader, total FROM {_q(engine, 'grouped')} "
                    "WHERE total > 40",
                )
            ],
        ),
        "joined.totals": (
            ["inner", "grouped"],
            [
                (
                    None,
                    f"SELECT i.event_time, i.symbol, i.value, g.n FROM {_q(engine, 'inner')} i "
                    f"JOIN {_q(engine, 'grouped')} g ON i.symbol = g.symbol WHERE i.value > 60",
                )
            ],
        ),
    }


async def _root(
    workspace: Workspace, name: str, value: str, rows: list, blocks: list, staging: Path
) -> None:
    snapshot = odf_yaml.load_snapshot(_ROOT.format(name=name, value=value).encode(), source=name)
    dataset = await workspace.create_from_snapshot(snapshot, system_time=Timestamp.of(2024, 1, 1))
    for number, (start, end) in enumerate(blocks):
        await append_rows(dataset, value, rows[start:end], staging, number)


async def append_rows(dataset: Dataset, value: str, part: list, staging: Path, number: int) -> None:
    """Commits ``part`` ((symbol, value) pairs) as the root's next AddData block, as upload
    ``number`` of the dataset."""
    state = await dataset.chain.state()
    offset = 0 if state.last_offset is None else state.last_offset + 1
    name = await dataset.alias()
    table = pa.table(
        {
            "offset": pa.array(range(offset, offset + len(part)), pa.int64()),
            "op": pa.array([0] * len(part), pa.int32()),
            "system_time": pa.array([T] * len(part), pa.int64()).cast(MS_UTC),
            "event_time": pa.array(
                [T + (offset + i + 1) * 1000 for i in range(len(part))], pa.int64()
            ).cast(MS_UTC),
            "symbol": [s for s, _ in part],
            value: [v for _, v in part],
        }
    )
    path = staging / f"{name}-{number}.parquet"
    pq.write_table(table, path)
    if state.schema is None:
        schema = arrow_schema.strip_encoding(arrow_schema.schema_from_arrow(table.schema))
        await dataset.commit_event(
            SetDataSchema(schema=schema), expected_head=state.head, system_time=SYSTEM_TIME
        )
        state = await dataset.chain.state()
    event = AddData(
        prev_offset=state.last_offset,
        new_data=DataSlice(
            logical_hash=logical_hash(table),
            physical_hash=physical_hash_file(path),
            offset_interval=OffsetInterval(start=offset, end=offset + len(part) - 1),
            size=path.stat().st_size,
        ),
        new_source_state=SourceState(
            source_name="upload", kind="odf/etag", value=f"{name}-{number}.ndjson"
        ),
    )
    await dataset.commit_data(
        event, data_file=path, expected_head=state.head, system_time=SYSTEM_TIME
    )


async def build(root: Path, engine: str, names: list[str] | None = None) -> None:
    """A workspace at ``root`` with both roots and the derivatives ``names`` (default: all),
    each run once in ``engine``."""
    staging = root.parent / f"{root.name}-staging"
    staging.mkdir(parents=True, exist_ok=True)
    async with await Workspace.init(root) as workspace:
        await _root(workspace, "trades", "price", TRADES, [(0, 4), (4, 8)], staging)
        await _root(workspace, "rates", "rate", RATES, [(0, 2)], staging)
        for name, (inputs, steps) in derivatives(engine).items():
            if names is not None and name not in names:
                continue
            text = _derivative(name, inputs, engine, steps)
            dataset = await workspace.create_from_snapshot(
                odf_yaml.load_snapshot(text.encode(), source=name),
                system_time=Timestamp.of(2024, 1, 1),
            )
            outcome = await update_derivative(
                workspace, dataset, system_time=SYSTEM_TIME, engines=TEST_ENGINES
            )
            assert not outcome.up_to_date, (name, outcome.reason)
