"""The SQL dialects provenance rewrites: how each parses and prints, and how tags combine.

An engine names the dialect its queries are written in (``Engine.sql_dialect``);
:func:`tag_dialect` gives provenance's knowledge of it. A tag is a string ``"k:offset"`` naming
row ``offset`` of input ``k`` of the transaction; a row's tag column holds its witnesses as such
strings joined by commas. Both dialects skip nulls in ``concat_ws``, so a left join's missing
side adds nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.dialects.postgres import Postgres
from sqlglot.dialects.spark import Spark

from verifier.provenance.errors import UnsupportedProvenanceError

#: The column each rewritten relation carries its rows' witnesses in.
TAG = "__odf_prov"


class DataFusionSql(Postgres):
    """DataFusion's SQL as odfd runs it: Postgres-like, identifiers case-sensitive (odfd turns
    DataFusion's identifier normalisation off, as the reference does)."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


@dataclass(frozen=True, slots=True)
class TagDialect(ABC):
    """One SQL dialect and its SQL for building and combining tags."""

    name: str
    """The dialect's name, as engines give it (``Engine.sql_dialect``)."""
    dialect: type[Dialect]
    string_type: str
    scalar_functions: frozenset[str]
    """Functions sqlglot does not know that are plain scalar built-ins of this dialect (any other
    unknown function could be an aggregate or a generator, so the rewrite refuses it)."""
    case_insensitive: bool
    """Whether a name matches a table or column whatever its case (else only exactly)."""

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

    @abstractmethod
    def collect(self, tag: exp.Expression) -> exp.Expression:
        """The witnesses of a group: those of every row in it."""

    @abstractmethod
    def collect_over(self, tag: exp.Expression, window: exp.Window) -> exp.Expression:
        """The witnesses of a window function's frame (``window`` without its function)."""


class _SparkTags(TagDialect):
    __slots__ = ()

    def collect(self, tag: exp.Expression) -> exp.Expression:
        return _call("concat_ws", exp.Literal.string(","), _call("collect_list", tag))

    def collect_over(self, tag: exp.Expression, window: exp.Window) -> exp.Expression:
        window.set("this", _call("collect_list", tag))
        return _call("concat_ws", exp.Literal.string(","), window)


class _DataFusionTags(TagDialect):
    __slots__ = ()

    def collect(self, tag: exp.Expression) -> exp.Expression:
        return _call("string_agg", tag, exp.Literal.string(","))

    def collect_over(self, tag: exp.Expression, window: exp.Window) -> exp.Expression:
        window.set("this", _call("array_agg", tag))
        return _call("array_to_string", window, exp.Literal.string(","))


SPARK = _SparkTags(
    name="spark",
    dialect=Spark,
    string_type="STRING",
    scalar_functions=frozenset(),
    case_insensitive=True,
)

DATAFUSION = _DataFusionTags(
    name="datafusion",
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
            # the reference's JSON functions (verifier.engine.datafusion.json_functions)
            "json_get",
            "json_get_str",
            "json_get_int",
            "json_get_float",
            "json_get_bool",
            "json_get_json",
            "json_as_text",
            "json_length",
            "json_contains",
        }
    ),
    case_insensitive=False,
)

_DIALECTS = {tags.name: tags for tags in (SPARK, DATAFUSION)}


def tag_dialect(sql_dialect: str) -> TagDialect:
    """Provenance's knowledge of the SQL dialect an engine names (``Engine.sql_dialect``)."""
    found = _DIALECTS.get(sql_dialect)
    if found is None:
        raise UnsupportedProvenanceError(
            f"provenance cannot rewrite queries in the {sql_dialect} dialect "
            f"(it knows {', '.join(sorted(_DIALECTS))})"
        )
    return found
