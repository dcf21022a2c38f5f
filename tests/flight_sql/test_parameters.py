"""Numbering ``?`` placeholders, and the parameter schema of DataFusion's own plans."""

from __future__ import annotations

import pyarrow as pa
import pytest
from datafusion import SessionContext

from odfd.flight_sql.parameters import MixedPlaceholdersError, numbered, parameter_schema
from verifier.engine.datafusion.placeholders import placeholder_types


def test_question_marks_are_numbered_outside_literals_names_and_comments() -> None:
    sql = "select '?', \"a?\", 'it''s ?' from t /* ? */ where x = ? and y < ? -- ?\n and z = ?"
    assert numbered(sql) == (
        "select '?', \"a?\", 'it''s ?' from t /* ? */ where x = $1 and y < $2 -- ?\n and z = $3"
    )


def test_sql_without_question_marks_is_unchanged() -> None:
    sql = "select $2, $1 from t where note = '?'"
    assert numbered(sql) is sql


def test_mixing_the_two_kinds_is_refused() -> None:
    with pytest.raises(MixedPlaceholdersError):
        numbered("select 1 where ? = $1")


@pytest.fixture(scope="module")
def ctx() -> SessionContext:
    ctx = SessionContext()
    ctx.from_arrow(pa.table({"seq": pa.array([1], pa.int64()), "s": ["a"], "p": [2.5]}), name="t")
    return ctx


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select s from t", []),
        ("select s from t where seq in ($1, $2)", [pa.int64(), pa.int64()]),
        ("select s from t order by seq + $1 limit 5", [pa.int64()]),
        ("select count(*) from t group by s having count(*) > $1", [pa.int64()]),
        (
            "select a.s from t a join t b on a.seq = b.seq + $1 where a.s like $2",
            [pa.int64(), pa.utf8()],
        ),
        ("select case when p > $1 then $2 else s end from t", [pa.float64(), pa.null()]),
        ("select $3", [pa.null(), pa.null(), pa.null()]),  # every number up to the highest
    ],
)
def test_parameter_schema_types_what_the_engine_inferred(
    ctx: SessionContext, sql: str, expected: list[pa.DataType]
) -> None:
    schema = parameter_schema(sql, placeholder_types(ctx.sql(sql).logical_plan()))
    assert schema == pa.schema([(f"${n}", t) for n, t in enumerate(expected, start=1)])
