"""The two SQL dialects provenance rewrites: how each parses and prints, and how tags combine.

A tag is a string ``"k:offset"`` naming row ``offset`` of input ``k`` of the transaction; a row's
tag column holds its witnesses as such strings joined by commas. Both engines skip nulls in
``concat_ws``, so a left join's missing side adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.dialects.postgres import Postgres
from sqlglot.dialects.spark import Spark

#: The column each rewritten relation carries its rows' witnesses in.
TAG = "__odf_prov"


class DataFusionSql(Postgres):
    """DataFusion's SQL as odfd runs it: Postgres-like, identifiers case-sensitive (odfd turns
    DataFusion's identifier normalisation off, as the reference does)."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


@dataclass(frozen=True, slots=True)
class TagDialect:
    """One engine's dialect and its SQL for building and combining tags."""

    engine: str
    dialect: type[Dialect]
    string_type: str
    scalar_functions: frozenset[str]
    """Functions sqlglot does not know that are plain scalar built-ins of this engine (any other
    unknown function could be an aggregate or a generator, so the rewrite refuses it)."""

    def parse(self, sql: str) -> exp.Expr:
        import sqlglot

        return sqlglot.parse_one(sql, dialect=self.dialect)

    def render(self, expression: exp.Expr) -> str:
        return expression.sql(dialect=self.dialect, normalize_functions="lower", identify=True)

    def input_tag(self, number: int, offset_column: str) -> exp.Expression:
        """The tag of an input row: ``'<number>:' || offset``."""
        offset = exp.Cast(
            this=exp.column(offset_column, quoted=True), to=exp.DataType.build(self.string_type)
        )
        return _call("concat", exp.Literal.string(f"{number}:"), offset)

    def merge(self, tags: list[exp.Expression]) -> exp.Expression:
        """The witnesses of a row built from several rows (a join): all of theirs."""
        if len(tags) == 1:
            return tags[0]
        return _call("concat_ws", exp.Literal.string(","), *tags)

    def collect(self, tag: exp.Expression) -> exp.Expression:
        """The witnesses of a group: those of every row in it."""
        if self.engine == "spark":
            return _call("concat_ws", exp.Literal.string(","), _call("collect_list", tag))
        return _call("string_agg", tag, exp.Literal.string(","))

    def collect_over(self, tag: exp.Expression, window: exp.Window) -> exp.Expression:
        """The witnesses of a window function's frame (``window`` without its function)."""
        if self.engine == "spark":
            window.set("this", _call("collect_list", tag))
            return _call("concat_ws", exp.Literal.string(","), window)
        window.set("this", _call("array_agg", tag))
        return _call("array_to_string", window, exp.Literal.string(","))


SPARK = TagDialect(
    engine="spark",
    dialect=Spark,
    string_type="STRING",
    scalar_functions=frozenset(),
)

DATAFUSION = TagDialect(
    engine="datafusion",
    dialect=DataFusionSql,
    string_type="VARCHAR",
    scalar_functions=frozenset(
        {
            "date_bin",
            "arrow_cast",
            "arrow_typeof",
            "to_timestamp_millis",
            "to_timestamp_micros",
            "to_timestamp_seconds",
            "date_part",
            "nanvl",
            "nvl2",
            "btrim",
            "starts_with",
            "ends_with",
        }
    ),
)


def tag_dialect(engine: str) -> TagDialect:
    """The dialect of the engine a transform names (``spark`` or ``datafusion``, any case)."""
    return SPARK if engine.lower() == "spark" else DATAFUSION
