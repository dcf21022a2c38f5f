"""The tag-flow rewrite on its own (no engine): constructs it refuses name themselves and their
place in one line; the SQL it writes for the constructs it covers."""

from __future__ import annotations

import pytest

from protocol.model import SqlQueryStep
from verifier.provenance.dialects import DATAFUSION, SPARK, TagDialect
from verifier.provenance.errors import UnsupportedProvenanceError
from verifier.provenance.rewrite import InputTable, tag_transform
from verifier.provenance.witness import parse_tags

TRADES = InputTable(
    "alice/trades",
    ("offset", "op", "system_time", "event_time", "symbol", "price"),
    "offset",
    (0, 7),
)
RATES = InputTable(
    "rates", ("offset", "op", "system_time", "event_time", "symbol", "rate"), "offset", (0, 1)
)


def _rewrite(query: str, dialect: TagDialect = DATAFUSION) -> list[str]:
    steps = tag_transform([SqlQueryStep(query=query)], [TRADES, RATES], dialect).steps
    return [step.query for step in steps]


@pytest.mark.parametrize(
    ("dialect", "query", "message"),
    [
        (
            DATAFUSION,
            'SELECT event_time, my_udf(price) AS p FROM "alice/trades"',
            "provenance not supported for function my_udf() (a user-defined or unknown "
            "function: whether it maps, aggregates or generates rows cannot be told) in query "
            "(at line 1, column 20)",
        ),
        (
            SPARK,
            "SELECT event_time, n FROM `alice/trades`\nLATERAL VIEW explode(array(1, 2)) x AS n",
            "provenance not supported for LATERAL in query (at line 2, column 1)",
        ),
        (
            DATAFUSION,
            'SELECT t.event_time FROM "alice/trades" t CROSS JOIN LATERAL '
            "(SELECT r.rate FROM rates r WHERE r.symbol = t.symbol) x",
            "provenance not supported for LATERAL in query (at line 1, column 54)",
        ),
        (
            DATAFUSION,
            "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
            "SELECT * FROM r",
            "provenance not supported for a recursive CTE in query (at line 1, column 6)",
        ),
        (
            DATAFUSION,
            'SELECT event_time FROM "alice/trades" WHERE price > (SELECT max(rate) FROM rates)',
            "provenance not supported for a subquery inside an expression in query "
            "(at line 1, column 53)",
        ),
        (
            DATAFUSION,
            'SELECT symbol FROM "alice/trades" UNION SELECT symbol FROM rates',
            "provenance not supported for UNION without ALL in query (at line 1, column 35)",
        ),
        (
            SPARK,
            "SELECT event_time, symbol FROM `alice/trades` "
            "WHERE symbol IN (SELECT symbol FROM rates)",
            "provenance not supported for a subquery inside an expression in query "
            "(at line 1, column 63)",
        ),
    ],
)
def test_unsupported_constructs_are_one_clear_line(
    dialect: TagDialect, query: str, message: str
) -> None:
    with pytest.raises(UnsupportedProvenanceError) as caught:
        _rewrite(query, dialect)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_inputs_are_tagged_with_their_number_and_offset_within_the_interval() -> None:
    trades, rates, _ = _rewrite('SELECT event_time FROM "alice/trades"')
    assert trades == (
        'SELECT *, concat(\'0:\', CAST("offset" AS VARCHAR)) AS "__odf_prov" '
        'FROM "__odf_raw_0" WHERE "offset" BETWEEN 0 AND 7'
    )
    assert "'1:'" in rates and "BETWEEN 0 AND 1" in rates


def test_joins_merge_both_sides_and_groups_collect_every_row() -> None:
    *_, joined = _rewrite(
        'SELECT t.event_time, r.rate FROM "alice/trades" t LEFT JOIN rates r ON t.symbol = r.symbol'
    )
    assert 'concat_ws(\',\', "t"."__odf_prov", "r"."__odf_prov")' in joined
    *_, grouped = _rewrite(
        'SELECT max(event_time) AS event_time, symbol FROM "alice/trades" GROUP BY symbol'
    )
    assert 'string_agg("alice/trades"."__odf_prov", \',\')' in grouped
    *_, spark_grouped = _rewrite("SELECT DISTINCT symbol FROM `alice/trades`", SPARK)
    assert "concat_ws(',', collect_list(`alice/trades`.`__odf_prov`))" in spark_grouped
    assert "GROUP BY `alice/trades`.`symbol`" in spark_grouped


def test_window_frames_become_positions_in_their_partition() -> None:
    query = (
        "SELECT event_time, lead(price) OVER (PARTITION BY symbol ORDER BY event_time) AS nxt, "
        "sum(price) OVER (PARTITION BY symbol ORDER BY event_time "
        'ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS pair FROM "alice/trades"'
    )
    tagged = tag_transform([SqlQueryStep(query=query)], [TRADES, RATES], DATAFUSION)
    main = tagged.steps[-1].query
    partition = 'dense_rank() OVER (ORDER BY "alice/trades"."symbol")'
    position = (
        'row_number() OVER (PARTITION BY "alice/trades"."symbol" '
        'ORDER BY "alice/trades"."event_time")'
    )
    # LEAD looks ahead: the whole partition; a framed SUM: one row back to the current one
    whole = 'count(*) OVER (PARTITION BY "alice/trades"."symbol")'
    assert f"concat('w0:', CAST({partition} AS VARCHAR), ':', CAST(1 AS VARCHAR), ':', " in main
    assert f"CAST({whole} AS VARCHAR))" in main
    assert f"concat('w1:', CAST({partition} AS VARCHAR), ':', CAST({position} + -1 AS" in main
    # each window's rows, with their partition and position, come from a side query
    assert len(tagged.frames) == 2
    assert tagged.frames[1][-1].query == (
        f'SELECT "alice/trades"."__odf_prov" AS "tag", {partition} AS "part", {position} AS "pos" '
        'FROM "__odf_in_0" AS "alice/trades"'
    )


def test_windows_below_the_top_select_collect_every_frame() -> None:
    *_, nested = _rewrite(
        "SELECT * FROM (SELECT event_time, sum(price) OVER (PARTITION BY symbol) AS s "
        'FROM "alice/trades") x'
    )
    assert (
        'array_to_string(array_agg("alice/trades"."__odf_prov") OVER '
        '(PARTITION BY "alice/trades"."symbol"), \',\')'
    ) in nested


def test_where_provenance_follows_renames_through_steps_and_subqueries() -> None:
    steps = [
        SqlQueryStep(
            alias="renamed", query='SELECT event_time, symbol AS ticker, price FROM "alice/trades"'
        ),
        SqlQueryStep(
            query="SELECT s.event_time, s.ticker AS name, s.price * 2 AS doubled "
            "FROM (SELECT * FROM renamed) s"
        ),
    ]
    origins = tag_transform(steps, [TRADES, RATES], DATAFUSION).origins
    assert origins == {"event_time": (0, "event_time"), "name": (0, "symbol")}


def test_tags_parse_into_sorted_offsets_per_input() -> None:
    assert parse_tags("0:3,1:7,0:1,0:3") == {0: (1, 3), 1: (7,)}
    assert parse_tags("") == {} and parse_tags(None) == {}


def test_one_row_of_an_aggregation_builds_only_its_groups_tags() -> None:
    query = 'SELECT max(event_time) AS event_time, symbol, sum(price) AS total FROM "alice/trades" GROUP BY symbol'
    steps = [SqlQueryStep(query=query)]
    focus = {"symbol": "B", "total": 60.0}
    # over a subquery: the group's tags, built for that group only
    nested = query.replace('"alice/trades"', '(SELECT * FROM "alice/trades") AS t')
    focused = tag_transform([SqlQueryStep(query=nested)], [TRADES, RATES], DATAFUSION, focus)
    assert focused.group_rows is None
    assert focused.steps[-1].query.endswith('WHERE "t"."symbol" = \'B\' GROUP BY "t"."symbol"'), (
        focused.steps[-1].query
    )
    # a key that is not output, or not a plain literal, leaves the query whole
    for other in ({"total": 60.0}, {"symbol": object()}):
        whole = tag_transform(steps, [TRADES, RATES], DATAFUSION, other)
        assert "WHERE" not in whole.steps[-1].query and whole.group_rows is None
    # so do several groupings (a ROLLUP row's group is not the rows of its keys' values)
    spark = query.replace('"alice/trades"', "`alice/trades`")
    listed = tag_transform([SqlQueryStep(query=spark)], [TRADES, RATES], SPARK, focus)
    assert listed.focused and listed.group_rows is not None
    rollup = spark.replace("GROUP BY symbol", "GROUP BY symbol WITH ROLLUP")
    whole = tag_transform([SqlQueryStep(query=rollup)], [TRADES, RATES], SPARK, focus)
    assert not whole.focused and "WHERE" not in whole.steps[-1].query


def test_one_row_of_an_aggregation_over_inputs_lists_its_groups_rows() -> None:
    """A focused GROUP BY reading inputs directly lists the group's input rows (its witnesses)
    instead of aggregating: every column of each side, named per side."""
    query = (
        'SELECT t.symbol, sum(t.price * r.rate) AS total FROM "alice/trades" AS t '
        "LEFT JOIN rates AS r ON t.symbol = r.symbol WHERE t.price > 1 "
        "GROUP BY t.symbol HAVING count(*) > 1 ORDER BY t.symbol"
    )
    focused = tag_transform(
        [SqlQueryStep(query=query)], [TRADES, RATES], DATAFUSION, {"symbol": "B"}
    )
    listed = [(f"__odf_w0_{j}", c) for j, c in enumerate(TRADES.columns)]
    listed += [(f"__odf_w1_{j}", c) for j, c in enumerate(RATES.columns)]
    assert focused.group_rows == ((0, dict(listed[:6])), (1, dict(listed[6:])))
    sides = ['"t"'] * 6 + ['"r"'] * 6
    columns = ", ".join(
        f'{side}."{column}" AS "{name}"' for side, (name, column) in zip(sides, listed, strict=True)
    )
    assert focused.steps[-1].query == (
        f'SELECT {columns} FROM "__odf_in_0" AS "t" LEFT JOIN "__odf_in_1" AS "r" '
        'ON "t"."symbol" = "r"."symbol" WHERE "t"."price" > 1 AND "t"."symbol" = \'B\''
    )


def test_one_row_of_a_window_query_keeps_only_its_partition() -> None:
    """WHERE runs before windows: a key every window partitions by, output with the row's value,
    narrows the query (and the frame side query) to that partition; a window over all rows, or
    a row whose key is not output, leaves it whole."""
    query = (
        "SELECT event_time, symbol, price, sum(price) OVER (PARTITION BY symbol ORDER BY "
        "event_time) AS running, lag(price) OVER (PARTITION BY symbol, price ORDER BY "
        'event_time) AS prev FROM "alice/trades"'
    )
    focus = {"symbol": "A", "price": 3.0}
    focused = tag_transform([SqlQueryStep(query=query)], [TRADES, RATES], DATAFUSION, focus)
    narrowed = ' FROM "__odf_in_0" AS "alice/trades" WHERE "alice/trades"."symbol" = \'A\''
    assert focused.focused and focused.group_rows is None
    assert focused.steps[-1].query.endswith(narrowed)
    assert [frame[-1].query.endswith(narrowed) for frame in focused.frames] == [True, True]
    over_all = query.replace("PARTITION BY symbol, price ", "")
    no_key = query.replace("SELECT event_time, symbol,", "SELECT event_time,")
    for other in (over_all, no_key):
        whole = tag_transform([SqlQueryStep(query=other)], [TRADES, RATES], DATAFUSION, focus)
        assert not whole.focused and "WHERE" not in whole.steps[-1].query
