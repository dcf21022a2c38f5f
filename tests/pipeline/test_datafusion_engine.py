"""The DataFusion engine on its own: the ODF engine contract, determinism, clear errors.

Input slices are written by the engine's own output path from Arrow tables, so these tests start
no JVM; one test compares DataFusion with Spark on the same query (session ``spark`` fixture).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.identity import DatasetId
from protocol.model import SqlQueryStep, Timestamp, TransformSql, Watermark
from verifier.engine.columns import Vocab
from verifier.engine.contract import QueryTable, TransformInputSlice, TransformRequest
from verifier.engine.datafusion.engine import DataFusionEngine
from verifier.engine.errors import (
    EngineNotAvailableError,
    InvalidQueryError,
    NonDeterministicQueryError,
    QueryExecutionError,
)
from verifier.engine.output import TIMESTAMP_MS_UTC, write_batches
from verifier.engine.registry import Engines

T0 = Timestamp.of(2024, 1, 1)
SYSTEM_TIME = Timestamp.of(2024, 3, 1)
TRADES_ID = DatasetId.new_seeded(b"trades")
RATES_ID = DatasetId.new_seeded(b"rates")
ENGINE = DataFusionEngine()


def _slice(path: Path, table: pa.Table, start: int) -> tuple[pa.Schema, Path]:
    schema, written = write_batches(
        table.schema,
        iter(table.to_batches()),
        vocab=Vocab(),
        start_offset=start,
        system_time=T0,
        out_path=path,
    )
    assert written is not None
    return schema, written.path


def _times(*seconds: int) -> pa.Array:
    return pa.array([1_700_000_000_000 + s * 1000 for s in seconds], TIMESTAMP_MS_UTC)


@pytest.fixture(scope="module")
def trades(tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    """Two slices of trades (offsets 0-3 and 4-7) of the input alias ``alice/trades``."""
    folder = tmp_path_factory.mktemp("trades")
    first = pa.table(
        {
            "event_time": _times(1, 2, 3, 4),
            "symbol": ["A", "B", "A", "B"],
            "price": [10.0, 20.0, 11.0, 19.0],
        }
    )
    second = pa.table(
        {
            "event_time": _times(5, 6, 7, 8),
            "symbol": ["A", "A", "B", "C"],
            "price": [12.0, 13.0, 21.0, 5.0],
        }
    )
    schema, one = _slice(folder / "one.parquet", first, 0)
    _, two = _slice(folder / "two.parquet", second, 4)
    return TransformInputSlice(TRADES_ID, "alice/trades", Vocab(), schema, (one, two), (0, 7))


@pytest.fixture(scope="module")
def rates(tmp_path_factory: pytest.TempPathFactory) -> TransformInputSlice:
    folder = tmp_path_factory.mktemp("rates")
    table = pa.table({"event_time": _times(0, 0), "symbol": ["A", "B"], "rate": [2.0, 3.0]})
    schema, path = _slice(folder / "rates.parquet", table, 0)
    return TransformInputSlice(RATES_ID, "bob.rates", Vocab(), schema, (path,), (0, 1))


def _request(
    tmp_path: Path, queries: list[tuple[str | None, str]], inputs, out: str = "out", **kw
) -> TransformRequest:
    steps = tuple(SqlQueryStep(alias=alias, query=query) for alias, query in queries)
    return TransformRequest(
        dataset_alias="carol/report",
        transform=TransformSql(engine="datafusion", queries=steps),
        vocab=Vocab(),
        system_time=SYSTEM_TIME,
        next_offset=kw.pop("next_offset", 0),
        inputs=tuple(inputs),
        prev_checkpoint=None,
        out_dir=tmp_path / out,
        **kw,
    )


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def test_map_query_gets_system_columns_in_the_reference_order(trades, tmp_path: Path) -> None:
    interval = dataclasses.replace(trades, offset_interval=(2, 5))
    query = 'SELECT symbol, price * 2 AS doubled, event_time FROM "alice/trades"'
    result = ENGINE.run_transform(_request(tmp_path, [(None, query)], [interval], next_offset=10))

    assert result.schema.names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "symbol",
        "doubled",
    ]
    assert result.schema.field("system_time").type == TIMESTAMP_MS_UTC
    assert result.new_checkpoint is None  # like the reference's DataFusion engine
    written = result.new_data
    assert written is not None and (written.offset_start, written.offset_end) == (10, 13)
    rows = _rows(written.path)
    # only offsets 2..5 of the input, in offset order across its two slice files
    assert [(r["offset"], r["op"], r["symbol"], r["doubled"]) for r in rows] == [
        (10, 0, "A", 22.0),
        (11, 0, "B", 38.0),
        (12, 0, "A", 24.0),
        (13, 0, "A", 26.0),
    ]
    assert {r["system_time"] for r in rows} == {SYSTEM_TIME.to_datetime()}
    assert pq.read_schema(written.path) == result.schema


def test_window_join_aggregate_steps_are_deterministic(trades, rates, tmp_path: Path) -> None:
    queries = [
        (
            "priced",
            'SELECT t.event_time, t.symbol, t.price * r.rate AS value FROM "alice/trades" t '
            'JOIN "bob.rates" r ON t.symbol = r.symbol',
        ),
        (
            "ranked",
            "SELECT *, row_number() OVER (PARTITION BY symbol ORDER BY event_time) AS n, "
            "sum(value) OVER (PARTITION BY symbol ORDER BY event_time) AS running FROM priced",
        ),
        (
            None,
            "SELECT max(event_time) AS event_time, symbol, count(*) AS trades, "
            "max(running) AS total, max(n) AS last_n FROM ranked GROUP BY symbol ORDER BY symbol",
        ),
    ]
    request = _request(tmp_path, queries, [trades, rates])
    first = ENGINE.run_transform(request)
    again = ENGINE.run_transform(dataclasses.replace(request, out_dir=tmp_path / "again"))

    assert first.new_data is not None and again.new_data is not None
    assert first.new_data.logical_hash == again.new_data.logical_hash
    rows = _rows(first.new_data.path)
    assert [(r["symbol"], r["trades"], r["total"], r["last_n"]) for r in rows] == [
        ("A", 4, 2.0 * (10 + 11 + 12 + 13), 4),
        ("B", 3, 3.0 * (20 + 19 + 21), 3),
    ]


def test_union_all_of_inputs_keeps_input_order(trades, rates, tmp_path: Path) -> None:
    query = (
        'SELECT event_time, symbol FROM "bob.rates" UNION ALL '
        'SELECT event_time, symbol FROM "alice/trades"'
    )
    result = ENGINE.run_transform(_request(tmp_path, [(None, query)], [trades, rates]))
    assert result.new_data is not None
    symbols = [r["symbol"] for r in _rows(result.new_data.path)]
    assert symbols == ["A", "B", "A", "B", "A", "B", "A", "A", "B", "C"]


def test_no_new_input_gives_no_slice_but_a_schema(trades, tmp_path: Path) -> None:
    idle = dataclasses.replace(trades, offset_interval=None, data_paths=())
    result = ENGINE.run_transform(
        _request(tmp_path, [(None, 'SELECT event_time, price FROM "alice/trades"')], [idle])
    )
    assert result.new_data is None
    assert result.schema.names == ["offset", "op", "system_time", "event_time", "price"]


def test_watermark_is_the_lowest_of_the_inputs_latest(trades, rates, tmp_path: Path) -> None:
    def marks(*days: int) -> tuple[Watermark, ...]:
        return tuple(Watermark(system_time=T0, event_time=Timestamp.of(2024, 1, d)) for d in days)

    query = 'SELECT event_time FROM "alice/trades"'
    inputs = [
        dataclasses.replace(trades, explicit_watermarks=marks(3, 9)),
        dataclasses.replace(rates, explicit_watermarks=marks(5)),
    ]
    result = ENGINE.run_transform(_request(tmp_path, [(None, query)], inputs))
    assert result.new_watermark == Timestamp.of(2024, 1, 5)
    # inputs that declared nothing do not hold it back; it never moves backwards
    inputs = [trades, dataclasses.replace(rates, explicit_watermarks=marks(2))]
    request = _request(
        tmp_path, [(None, query)], inputs, "b", prev_watermark=Timestamp.of(2024, 1, 4)
    )
    assert ENGINE.run_transform(request).new_watermark == Timestamp.of(2024, 1, 4)


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ('SELEC event_time FROM "alice/trades"', InvalidQueryError, "query is invalid: SQL error"),
        ("SELECT event_time FROM nowhere", InvalidQueryError, "nowhere.*not found"),
        ('SELECT "offset", event_time FROM "alice/trades"', InvalidQueryError, "column 'offset'"),
        ('SELECT symbol FROM "alice/trades"', InvalidQueryError, "no event time column"),
        ('SELECT symbol AS event_time FROM "alice/trades"', InvalidQueryError, "timestamp or a"),
        (
            'SELECT 1 AS op, event_time FROM "alice/trades"',
            InvalidQueryError,
            "'op' must be int32 .*found int64",
        ),
        (
            'SELECT random() AS r, event_time FROM "alice/trades"',
            NonDeterministicQueryError,
            "random",
        ),
        ("SELECT now() AS event_time", NonDeterministicQueryError, "now"),
        (
            'SELECT event_time, count(*) AS n FROM (SELECT * FROM "alice/trades" UNION ALL '
            'SELECT * FROM "alice/trades") GROUP BY event_time',
            NonDeterministicQueryError,
            "UNION ALL",
        ),
        (
            'SELECT event_time, CAST(symbol AS INT) AS n FROM "alice/trades"',
            QueryExecutionError,
            "Cannot cast string 'A'",
        ),
    ],
)
def test_bad_queries_fail_with_one_clear_line(
    trades, tmp_path: Path, query: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        ENGINE.run_transform(_request(tmp_path, [(None, query)], [trades]))
    text = str(caught.value)
    assert text.startswith("carol/report: ") and "\n" not in text
    assert not (tmp_path / "out" / "data.parquet").exists()


def test_engines_are_chosen_by_name_case_insensitively() -> None:
    engines = Engines()
    assert engines.named("DataFusion").name == "datafusion"
    with pytest.raises(EngineNotAvailableError, match="engine 'flink', which odfd cannot run") as e:
        engines.named("flink", "bob/flinky")
    assert e.value.engine == "flink" and str(e.value).startswith("bob/flinky: ")


def test_raw_query_reads_files_as_one_table_with_schema_evolution(trades, tmp_path: Path) -> None:
    wider = trades.schema.append(pa.field("venue", pa.string()))
    table = QueryTable("com.example/trades", trades.data_paths, wider)
    result = ENGINE.query(
        [SqlQueryStep(query='SELECT count(*) AS n, count(venue) AS v FROM "com.example/trades"')],
        [table],
    )
    assert result.to_pylist() == [{"n": 8, "v": 0}]


@pytest.mark.spark
def test_datafusion_and_spark_agree_on_a_join(spark, trades, rates, tmp_path: Path) -> None:
    from tests.fixtures.spark import TEST_ENGINES

    query = (
        "SELECT t.event_time, t.symbol, t.price * r.rate AS value FROM {trades} t "
        "JOIN {rates} r ON t.symbol = r.symbol"
    )
    ours = ENGINE.run_transform(
        _request(
            tmp_path,
            [(None, query.format(trades='"alice/trades"', rates='"bob.rates"'))],
            [trades, rates],
            "df",
        )
    )
    request = _request(
        tmp_path,
        [(None, query.format(trades="`alice/trades`", rates="`bob.rates`"))],
        [trades, rates],
        "spark",
    )
    request = dataclasses.replace(
        request, transform=dataclasses.replace(request.transform, engine="spark")
    )
    theirs = TEST_ENGINES.named("spark").run_transform(request)
    assert ours.new_data is not None and theirs.new_data is not None
    # the same columns and types; DataFusion's plan proves `symbol` and `value` non-null where
    # Spark's slices keep every data column optional
    assert [(f.name, f.type) for f in ours.schema] == [(f.name, f.type) for f in theirs.schema]

    def records(path: Path) -> list[tuple]:
        return sorted(tuple(v for k, v in r.items() if k != "offset") for r in _rows(path))

    # the same records; each engine orders a join's output its own way
    assert records(ours.new_data.path) == records(theirs.new_data.path)
