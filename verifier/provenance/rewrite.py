"""Rewrites a transform's SQL so every output row carries the tags of the input rows behind it.

Each input becomes a view of its transaction's rows plus a tag column (``TAG``, the row's
``"k:offset"``); each query step is parsed with sqlglot in the engine's dialect, its stars and
columns qualified, and every SELECT gets one more column, its rows' witnesses:

* projection and filter carry the tag of the row they read; a join joins its sides' tags (a left
  join's missing side adds none); each branch of a ``UNION ALL`` keeps its own;
* ``GROUP BY`` (and aggregates without it) collect the tags of every row of the group;
  ``SELECT DISTINCT`` becomes the same ``GROUP BY`` over its columns;
* a window function adds the tags of the rows of its frame (the whole partition for functions
  that look ahead or count the partition).

Anything else (``LATERAL``, generators, recursive CTEs, subqueries inside expressions, functions
sqlglot does not know, ...) is refused with its line and column: a missing rule is an error,
never a guess. Where-provenance (which input column an output column is a plain copy of) is
read off the qualified query.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from protocol.model import SqlQueryStep
from verifier.provenance.dialects import TAG, TagDialect
from verifier.provenance.errors import UnsupportedProvenanceError


@dataclass(frozen=True, slots=True)
class InputTable:
    """One input of the transaction as the rewrite sees it."""

    alias: str
    """The name queries read it by."""
    columns: tuple[str, ...]
    offset_column: str
    interval: tuple[int, int] | None
    """The closed offset interval the transaction read (``None``: no rows)."""


@dataclass(frozen=True, slots=True)
class TaggedTransform:
    """The rewritten transform: steps to run over :func:`raw_table` ``k`` for each input ``k``."""

    steps: tuple[SqlQueryStep, ...]
    origins: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Output column -> (input number, input column) it is a plain copy or rename of."""
    frames: tuple[tuple[SqlQueryStep, ...], ...] = ()
    """For window ``n`` of a frame reference ``w<n>:<partition>:<first>:<last>`` in a tag, the
    steps whose result lists the rows its frames are cut from (``tag, part, pos``)."""
    focused: bool = False
    """The last step was narrowed to the focused row's group or window partition."""
    group_rows: tuple[tuple[int, dict[str, str]], ...] | None = None
    """Set when the last step lists the input rows of the focused row's group instead of output
    rows: per source of its GROUP BY, the input number and result column -> input column."""


def raw_table(number: int) -> str:
    """The table name the rows of input ``number`` are registered under."""
    return f"__odf_raw_{number}"


def tag_transform(
    steps: Sequence[SqlQueryStep],
    inputs: Sequence[InputTable],
    dialect: TagDialect,
    focus: Mapping[str, Any] | None = None,
) -> TaggedTransform:
    """The transform's steps rewritten to carry tags, preceded by one tagging step per input.

    ``focus`` (an output row's values by column) narrows a last step that is a ``GROUP BY`` of
    columns it outputs to that row's group: the other groups' tags are never built. Only the
    rows of that group are then in the result. When that ``GROUP BY`` reads inputs directly,
    the step lists the group's input rows themselves (``group_rows``): they are its witnesses,
    and the answer needs no second read of the inputs to cut them out."""
    return _Rewriter(dialect, inputs).run(steps, focus)


class _Rewriter:
    def __init__(self, dialect: TagDialect, inputs: Sequence[InputTable]) -> None:
        self.d = dialect
        self.inputs = inputs
        self.names: dict[str, str] = {}
        """Name a query uses (normalised) -> the view holding it here."""
        self.schemas: dict[str, dict[str, str]] = {}
        self.input_of: dict[str, int] = {}
        self.view_origins: dict[str, dict[str, tuple[int, str]]] = {}
        self.out: list[SqlQueryStep] = []
        self.frames: list[tuple[SqlQueryStep, ...]] = []
        self.focused = False

    def key(self, name: str) -> str:
        return name.lower() if self.d.case_insensitive else name

    def run(
        self, steps: Sequence[SqlQueryStep], focus: Mapping[str, Any] | None = None
    ) -> TaggedTransform:
        out = self.out
        for number, table in enumerate(self.inputs):
            view = f"__odf_in_{number}"
            self.names[self.key(table.alias)] = view
            self.schemas[view] = {c: "TEXT" for c in table.columns}
            self.input_of[view] = number
            out.append(SqlQueryStep(alias=view, query=self._tagging(number, table)))
        origins: dict[str, tuple[int, str]] = {}
        group_rows = None
        for number, step in enumerate(steps, start=1):
            where = "query" if len(steps) == 1 else f"query step {number}"
            last = focus if number == len(steps) else None
            tree, columns, origins = self._step(step.query, where, last)
            if last is not None and isinstance(tree, exp.Select) and _focus_group(tree, last):
                self.focused = True
                group_rows = self._list_group_rows(tree)
            alias = None
            if step.alias:
                alias = f"__odf_step_{number}"
                self.names[self.key(step.alias)] = alias
                self.schemas[alias] = {c: "TEXT" for c in columns}
                self.view_origins[alias] = origins
            out.append(SqlQueryStep(alias=alias, query=self.d.render(tree)))
        return TaggedTransform(tuple(out), origins, tuple(self.frames), self.focused, group_rows)

    def _list_group_rows(self, select: exp.Select) -> tuple[tuple[int, dict[str, str]], ...] | None:
        """Turns a focused ``GROUP BY`` whose sources are all inputs into the listing of its
        group's rows (every column of each source, before aggregating): the rows its aggregates
        read, i.e. the witnesses its collected tags would name. ``None`` (and ``select`` kept)
        for other sources (subqueries, CTEs, earlier steps), whose rows are not input rows."""
        sources = _sources(select)
        numbers = []
        for source in sources:
            if not isinstance(source, exp.Table) or source.name not in self.input_of:
                return None
            numbers.append(self.input_of[source.name])
        listing: list[tuple[int, dict[str, str]]] = []
        projections: list[exp.Expr] = []
        for position, (source, number) in enumerate(zip(sources, numbers, strict=True)):
            names: dict[str, str] = {}
            for column in self.inputs[number].columns:
                name = f"__odf_w{position}_{len(names)}"
                names[name] = column
                value = exp.column(column, table=source.alias_or_name, quoted=True)
                projections.append(exp.alias_(value, name, quoted=True))
            listing.append((number, names))
        for clause in ("group", "having", "order", "distinct"):
            select.set(clause, None)
        select.set("expressions", projections)
        return tuple(listing)

    def _tagging(self, number: int, table: InputTable) -> str:
        offset = exp.column(table.offset_column, quoted=True)
        if table.interval is None:
            condition: exp.Expression = exp.false()
        else:
            condition = exp.Between(
                this=offset,
                low=exp.Literal.number(table.interval[0]),
                high=exp.Literal.number(table.interval[1]),
            )
        select = (
            exp.select(exp.Star(), exp.alias_(self.d.input_tag(number, table.offset_column), TAG))
            .from_(exp.to_identifier(raw_table(number)))
            .where(condition)
        )
        return self.d.render(select)

    def _step(
        self, sql: str, where: str, focus: Mapping[str, Any] | None = None
    ) -> tuple[exp.Expr, list[str], dict[str, tuple[int, str]]]:
        """The step parsed, qualified and tagged; with ``focus``, a top-level window SELECT is
        narrowed to the focused row's partition first (its frame side queries with it)."""
        try:
            tree = self.d.parse(sql)
        except ParseError as err:
            raise UnsupportedProvenanceError(
                f"provenance not supported for {where}: sqlglot cannot parse it "
                f"({_first_line(err)})"
            ) from err
        _refuse_unsupported(tree, sql, where, self.d)
        self._rename_tables(tree)
        try:
            qualified = qualify(
                tree,
                dialect=self.d.dialect,
                schema=MappingSchema(dict[str, object](self.schemas), dialect=self.d.dialect),
                quote_identifiers=True,
                identify=True,
                validate_qualify_columns=True,
            )
        except (OptimizeError, ValueError) as err:
            raise UnsupportedProvenanceError(
                f"provenance not supported for {where}: its columns cannot be resolved "
                f"({_first_line(err)})"
            ) from err
        if not isinstance(qualified, exp.Query):
            raise UnsupportedProvenanceError(
                f"provenance not supported for {where}: it is not a query"
            )
        columns = list(qualified.named_selects)
        origins = self._origins(qualified, {})
        rewritten = qualified.copy()
        if focus is not None and _focus_partition(rewritten, focus):
            self.focused = True
        self._tag_query(rewritten, sql, where, top=True)
        return rewritten, columns, origins

    def _rename_tables(self, tree: exp.Expr) -> None:
        """Points table references at the views here, keeping the name as the table's alias."""
        ctes = {self.key(c.alias) for c in tree.find_all(exp.CTE)}
        for table in list(tree.find_all(exp.Table)):
            name = ".".join(p.name for p in table.parts)
            if len(table.parts) == 1 and self.key(name) in ctes:
                continue
            view = self.names.get(self.key(name))
            if view is None:
                continue  # qualify reports the unknown table
            alias = table.alias or table.name
            table.set("catalog", None)
            table.set("db", None)
            table.set("this", exp.to_identifier(view))
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))

    # --- where-provenance -------------------------------------------------------------------

    def _origins(self, query: exp.Expr, ctes: dict[str, exp.Expr]) -> dict[str, tuple[int, str]]:
        ctes = {**ctes, **{c.alias: c.this for c in getattr(query, "ctes", [])}}
        if isinstance(query, exp.Subquery):
            return self._origins(query.this, ctes)
        if not isinstance(query, exp.Select):
            return {}  # a UNION's columns come from several places
        sources: dict[str, exp.Expression] = {}
        for source in _sources(query):
            sources[source.alias_or_name] = source
        origins: dict[str, tuple[int, str]] = {}
        for projection in query.expressions:
            value = projection.unalias()
            if not isinstance(value, exp.Column) or value.table not in sources:
                continue
            found = self._origin_of(sources[value.table], value.name, ctes)
            if found is not None:
                origins[projection.alias_or_name] = found
        return origins

    def _origin_of(
        self, source: exp.Expr, column: str, ctes: dict[str, exp.Expr]
    ) -> tuple[int, str] | None:
        if isinstance(source, exp.Subquery):
            return self._origins(source.this, ctes).get(column)
        if not isinstance(source, exp.Table):
            return None
        name = source.name
        if name in ctes:
            return self._origins(ctes[name], ctes).get(column)
        if name in self.input_of:
            number = self.input_of[name]
            for real in self.inputs[number].columns:
                if self.key(real) == self.key(column):
                    return number, real
            return None
        return self.view_origins.get(name, {}).get(column)

    # --- tag flow ---------------------------------------------------------------------------

    def _tag_query(self, query: exp.Expr, sql: str, where: str, top: bool = False) -> None:
        for cte in getattr(query, "ctes", []):
            self._tag_query(cte.this, sql, where)
        if isinstance(query, exp.Subquery):
            self._tag_query(query.this, sql, where)
        elif isinstance(query, exp.Union):
            self._tag_query(query.left, sql, where)
            self._tag_query(query.right, sql, where)
        elif isinstance(query, exp.Select):
            self._tag_select(query, sql, where, top)
        else:
            raise _unsupported(query, sql, where, type(query).__name__.upper())

    def _tag_select(self, select: exp.Select, sql: str, where: str, top: bool) -> None:
        sources = _sources(select)
        if not sources:
            raise _unsupported(select, sql, where, "a SELECT without FROM")
        for source in sources:
            if isinstance(source, exp.Subquery):
                self._tag_query(source.this, sql, where)
            elif not isinstance(source, exp.Table):
                raise _unsupported(source, sql, where, f"{source.key.upper()} in FROM")
        row_tag = self.d.merge(
            [exp.column(TAG, table=s.alias_or_name, quoted=True) for s in sources]
        )
        windows = [w for p in select.expressions for w in p.find_all(exp.Window)]
        aggregate = _is_aggregate(select)
        distinct = select.args.get("distinct")
        if distinct is not None:
            if distinct.args.get("on") is not None:
                raise _unsupported(distinct, sql, where, "DISTINCT ON")
            if aggregate or windows:
                raise _unsupported(distinct, sql, where, "DISTINCT over aggregates or windows")
            select.set("distinct", None)
            select.group_by(*(p.unalias().copy() for p in select.expressions), copy=False)
            aggregate = True
        if aggregate:
            if windows:
                raise _unsupported(windows[0], sql, where, "a window function over a GROUP BY")
            tag = self.d.collect(row_tag)
        elif windows:
            frames = [_frame(w, sql, where) for w in windows]
            unique = list({self.d.render(f): f for f in frames}.values())
            if top and all(_bounds(f) is not None for f in unique):
                refs = [self._frame_reference(select, row_tag, f) for f in unique]
            else:  # every row's frame in full: quadratic in the partition size, but general
                refs = [self.d.collect_over(row_tag.copy(), f) for f in unique]
            tag = self.d.merge([row_tag, *refs])
        else:
            tag = row_tag
        select.select(exp.alias_(tag, TAG, quoted=True), copy=False)

    def _frame_reference(
        self, select: exp.Select, row_tag: exp.Expression, frame: exp.Window
    ) -> exp.Expression:
        """``'w<n>:' || partition || ':' || first || ':' || last`` for each row: its frame as
        positions in its partition, resolved against a side query that lists every row of the
        window's input with its tag, partition and position (linear, unlike collecting every
        row's frame). Only for a step's top-level SELECT, whose input the side query can read."""
        number = len(self.frames)
        bounds = _bounds(frame)
        assert bounds is not None
        partition = [p.copy() for p in frame.args.get("partition_by") or []]
        order = frame.args.get("order")

        def over(function: exp.Expression, ordered: bool) -> exp.Window:
            return exp.Window(
                this=function,
                partition_by=[p.copy() for p in partition],
                order=order.copy() if ordered and order is not None else None,
                over="OVER",
            )

        if partition:
            part: exp.Expression = exp.Window(
                this=exp.Anonymous(this="dense_rank", expressions=[]),
                order=exp.Order(expressions=[exp.Ordered(this=p.copy()) for p in partition]),
                over="OVER",
            )
        else:
            part = exp.Literal.number(0)
        position = over(exp.Anonymous(this="row_number", expressions=[]), ordered=True)
        count_all = over(exp.Count(this=exp.Star()), ordered=False)
        count_peers = over(exp.Count(this=exp.Star()), ordered=True)
        first, last = bounds
        ends = {
            "first": exp.Literal.number(1),
            "all": count_all,
            "peers": count_peers,
        }

        def end(bound: tuple[str, int]) -> exp.Expression:
            kind, shift = bound
            if kind in ends:
                return ends[kind].copy()
            base = position.copy()
            if shift == 0:
                return base
            return exp.Add(this=base, expression=exp.Literal.number(shift))

        text = exp.DataType.build(self.d.string_type)
        reference = exp.Anonymous(
            this="concat",
            expressions=[
                exp.Literal.string(f"w{number}:"),
                exp.Cast(this=part.copy(), to=text),
                exp.Literal.string(":"),
                exp.Cast(this=end(first), to=text),
                exp.Literal.string(":"),
                exp.Cast(this=end(last), to=text),
            ],
        )
        side = select.copy()
        for clause in ("order", "limit", "offset"):
            side.set(clause, None)
        side.set(
            "expressions",
            [
                exp.alias_(row_tag.copy(), "tag", quoted=True),
                exp.alias_(part.copy(), "part", quoted=True),
                exp.alias_(position.copy(), "pos", quoted=True),
            ],
        )
        self.frames.append((*self.out, SqlQueryStep(query=self.d.render(side))))
        return reference


def _bounds(frame: exp.Window) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """A frame's first and last row as (kind, shift): kind ``first`` (the partition's first row),
    ``all`` (its last), ``peers`` (the current row's last peer) or ``row`` (the current row's
    position plus shift); ``None`` for frames a position cannot express (RANGE with offsets)."""
    spec = frame.args.get("spec")
    ordered = frame.args.get("order") is not None
    if spec is None:
        return ("first", 0), (("peers", 0) if ordered else ("all", 0))
    kind = str(spec.args.get("kind") or "").upper()

    def side(value: object, direction: object) -> tuple[str, int] | None:
        text = str(value or "").upper()
        way = str(direction or "").upper()
        if text == "UNBOUNDED":
            return ("first", 0) if way == "PRECEDING" else ("all", 0)
        if text == "CURRENT ROW":
            return ("row", 0) if kind == "ROWS" else None
        if kind != "ROWS" or not text.isdigit():
            return None
        return ("row", -int(text) if way == "PRECEDING" else int(text))

    start = side(spec.args.get("start"), spec.args.get("start_side"))
    end = side(spec.args.get("end"), spec.args.get("end_side"))
    if kind == "RANGE" and str(spec.args.get("end") or "").upper() == "CURRENT ROW":
        end = ("peers", 0) if ordered else ("all", 0)
    if start is None or end is None:
        return None
    return start, end


def _focus_group(tree: exp.Expr, focus: Mapping[str, Any]) -> bool:
    """Adds ``key = value`` for each GROUP BY key of ``tree`` to its WHERE, when every key is
    output as a column whose value ``focus`` gives as a plain literal (and no LIMIT picks
    groups); filtering on group keys leaves that group's rows, hence its aggregates, intact.
    Whether it did."""
    if not isinstance(tree, exp.Select) or tree.args.get("limit") or tree.args.get("offset"):
        return False
    group = tree.args.get("group")
    if group is None or not group.expressions:
        return False
    if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals", "all")):
        return False  # several groupings: a row's group is not its keys' rows
    conditions = [_key_condition(tree, key, focus) for key in group.expressions]
    if any(c is None for c in conditions):
        return False
    for condition in conditions:
        tree.where(condition, copy=False)
    return True


def _focus_partition(tree: exp.Expr, focus: Mapping[str, Any]) -> bool:
    """Adds ``key = value`` to the WHERE of a SELECT computing window functions, for each key
    that every one of its windows partitions by and that is output as a column ``focus`` gives
    a plain literal for (and no LIMIT picks rows): WHERE applies before windows, and a window's
    values over a partition depend on that partition's rows only, so the row's partition (its
    values, positions and frames) stays intact. Whether it added any."""
    if not isinstance(tree, exp.Select) or tree.args.get("limit") or tree.args.get("offset"):
        return False
    windows = [w for p in tree.expressions for w in p.find_all(exp.Window)]
    if not windows:
        return False
    keys = list(windows[0].args.get("partition_by") or [])
    for window in windows[1:]:
        keys = [k for k in keys if k in (window.args.get("partition_by") or [])]
    conditions = [c for c in (_key_condition(tree, k, focus) for k in keys) if c is not None]
    for condition in conditions:
        tree.where(condition, copy=False)
    return bool(conditions)


def _key_condition(
    select: exp.Select, key: exp.Expression, focus: Mapping[str, Any]
) -> exp.Expression | None:
    """``key = value`` (``key IS NULL``) when ``select`` outputs ``key`` as a column whose value
    ``focus`` gives as a plain literal."""
    names = [p.alias_or_name for p in select.expressions if p.unalias() == key]
    if not names or names[0] not in focus:
        return None
    value = focus[names[0]]
    if value is None:
        return exp.Is(this=key.copy(), expression=exp.Null())
    if isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value)):
        return exp.EQ(this=key.copy(), expression=exp.convert(value))
    return None


def _sources(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_") or select.args.get("from")
    sources = [from_.this] if from_ is not None else []
    sources.extend(join.this for join in select.args.get("joins") or [])
    return sources


def _is_aggregate(select: exp.Select) -> bool:
    if select.args.get("group") is not None or select.args.get("having") is not None:
        return True
    for projection in select.expressions:
        for agg in projection.find_all(exp.AggFunc):
            if not isinstance(agg.find_ancestor(exp.Window, exp.Select), exp.Window):
                return True  # an aggregate of this SELECT, not a windowed one
    return False


#: Window functions whose value depends on rows up to the current one (and its peers).
_UP_TO_CURRENT = (exp.RowNumber, exp.Rank, exp.DenseRank, exp.Lag)
#: Window functions that look ahead or count the partition (sqlglot files some as aggregates).
_WHOLE_PARTITION = (exp.Lead, exp.Ntile, exp.PercentRank, exp.CumeDist)
#: Window functions computed over the declared (or default) frame.
_FRAMED = (exp.AggFunc, exp.FirstValue, exp.LastValue, exp.NthValue)


def _frame(window: exp.Window, sql: str, where: str) -> exp.Window:
    """The window whose frame holds every row ``window``'s function reads, for collecting tags."""
    if window.args.get("alias") is not None and not window.args.get("partition_by"):
        raise _unsupported(window, sql, where, "a named WINDOW")
    function = window.this
    if isinstance(function, (exp.IgnoreNulls, exp.RespectNulls)):
        function = function.this
    spec = window.args.get("spec")
    if isinstance(function, _UP_TO_CURRENT):
        frame = None
    elif isinstance(function, _FRAMED) and not isinstance(function, _WHOLE_PARTITION):
        frame = spec.copy() if spec is not None else None
    else:  # LEAD, NTILE, PERCENT_RANK, CUME_DIST...: they see the whole partition
        frame = exp.WindowSpec(
            kind="ROWS",
            start="UNBOUNDED",
            start_side="PRECEDING",
            end="UNBOUNDED",
            end_side="FOLLOWING",
        )
    partition = [p.copy() for p in window.args.get("partition_by") or []]
    order = window.args.get("order")
    return exp.Window(
        partition_by=partition, order=order.copy() if order else None, spec=frame, over="OVER"
    )


#: Constructs the rewrite does not cover, by sqlglot node, and how an error names them.
_REFUSED: tuple[tuple[type[exp.Expression], str], ...] = (
    (exp.Lateral, "LATERAL"),
    (exp.Unnest, "UNNEST"),
    (exp.Explode, "a generator (EXPLODE)"),
    (exp.Inline, "a generator (INLINE)"),
    (exp.Pivot, "PIVOT"),
    (exp.TableSample, "TABLESAMPLE"),
    (exp.Intersect, "INTERSECT"),
    (exp.Except, "EXCEPT"),
    (exp.Exists, "a subquery inside an expression (EXISTS)"),
    (exp.Values, "VALUES"),
)

_KNOWN_GENERATORS = frozenset(
    {"explode", "explode_outer", "posexplode", "inline", "stack", "unnest"}
)


def _refuse_unsupported(tree: exp.Expr, sql: str, where: str, d: TagDialect) -> None:
    for cte in tree.find_all(exp.With):
        if cte.args.get("recursive"):
            raise _unsupported(cte, sql, where, "a recursive CTE", keyword="RECURSIVE")
    for node in tree.walk():
        for kind, what in _REFUSED:
            if isinstance(node, kind):
                raise _unsupported(node, sql, where, what, keyword=what.split()[-1].strip("()"))
        if isinstance(node, exp.Union) and node.args.get("distinct"):
            raise _unsupported(node, sql, where, "UNION without ALL", keyword="UNION")
        if isinstance(node, exp.Subquery) and not isinstance(
            node.parent, (exp.From, exp.Join, exp.Union, exp.Subquery)
        ):
            raise _unsupported(node, sql, where, "a subquery inside an expression", back="(")
        if isinstance(node, exp.Anonymous):
            name = str(node.this).lower()
            if name in _KNOWN_GENERATORS:
                raise _unsupported(node, sql, where, f"a generator ({name})")
            if name not in d.scalar_functions:
                raise _unsupported(
                    node,
                    sql,
                    where,
                    f"function {node.this}() (a user-defined or unknown function: whether it "
                    "maps, aggregates or generates rows cannot be told)",
                )


def _unsupported(
    node: exp.Expr,
    sql: str,
    where: str,
    what: str,
    keyword: str | None = None,
    back: str | None = None,
) -> UnsupportedProvenanceError:
    """The error for ``node``: placed at ``keyword`` if the query has it, else at the node's
    first token (or, with ``back``, at the last ``back`` before it: a subquery's parenthesis)."""
    position = _position(node, sql, keyword, back)
    at = f" (at line {position[0]}, column {position[1]})" if position else ""
    return UnsupportedProvenanceError(f"provenance not supported for {what} in {where}{at}")


def _position(
    node: exp.Expr, sql: str, keyword: str | None, back: str | None
) -> tuple[int, int] | None:
    start = None
    if keyword:
        found = sql.upper().find(keyword.upper())
        start = found if found >= 0 else None
    if start is None:
        starts = [int(c.meta["start"]) for c in node.walk() if c.meta and "start" in c.meta]
        if not starts:
            return None
        start = min(starts)
        if back is not None and sql.rfind(back, 0, start) >= 0:
            start = sql.rfind(back, 0, start)
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return line, column


def _first_line(err: Exception) -> str:
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
