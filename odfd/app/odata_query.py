"""What an OData request asks of a collection (``$select``, ``$filter``, ``$orderby``, ``$skip``,
``$top``, ``$inlinecount``, or one entry by key, or a count) and the SQL that answers it over a
dataset's table.

The model is typed so that nothing a client writes reaches the SQL as text: column names are
checked against the dataset's schema and quoted, literals are re-rendered from parsed values.
The HTTP layer parses the URL into this model (``odfd.server.odata.query_options``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.errors import OdfdError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

DEFAULT_TOP = 100
"""Entries a collection answers without ``$top``: the reference's default page."""
KEY_ALIAS = "__id__"
"""The column that carries each entry's key (the dataset's offset) beside what was selected."""


class ODataError(OdfdError):
    """An OData request this node cannot answer; the message names what was wrong."""


class BadODataRequestError(ODataError):
    """Malformed options, an unknown column or a key that is not an offset (400)."""


class UnknownPropertyError(BadODataRequestError):
    """An option names a column the entity does not have (``option`` is ``$filter``,
    ``$select`` or ``$orderby``)."""

    def __init__(self, option: str, name: str, known: Collection[str]) -> None:
        self.option = option
        self.name = name
        self.known = ", ".join(known)
        super().__init__(f"{option}: no property {name!r} (the entity has {self.known})")


class UnsupportedODataError(ODataError):
    """A valid OData feature this node does not implement (501)."""


class ODataNotFoundError(ODataError):
    """No such collection or entry for this caller (404)."""


Scalar = str | int | float | bool | dt.datetime | dt.date | None


@dataclass(frozen=True, slots=True)
class Column:
    name: str


@dataclass(frozen=True, slots=True)
class Value:
    value: Scalar


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    """One of ``eq ne lt gt le ge``."""
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class In:
    item: Expr
    choices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True)
class Logical:
    op: str
    """``and`` or ``or``."""
    left: Expr
    right: Expr


Expr = Column | Value | Compare | In | Not | Logical

_SQL_OPS = {"eq": "=", "ne": "<>", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}


@dataclass(frozen=True, slots=True)
class QueryOptions:
    """A collection request's system query options (defaults: everything, 100 entries)."""

    select: tuple[str, ...] = ()
    filter: Expr | None = None
    order_by: tuple[tuple[str, bool], ...] = ()
    """``(column, ascending)`` pairs."""
    skip: int = 0
    top: int | None = None
    inline_count: bool = False
    """``$inlinecount=allpages``: the feed also says how many entries ``$filter`` matches."""

    def paged(self, matching: int) -> int:
        """Of ``matching`` entries, how many ``$skip`` and ``$top`` leave (``/$count``)."""
        left = max(matching - self.skip, 0)
        return left if self.top is None else min(left, self.top)


def collection_sql(
    options: QueryOptions,
    table: str,
    columns: Collection[str],
    offset: str,
    key: int | None,
    quote: Callable[[str], str],
    page: int = DEFAULT_TOP,
) -> str:
    """The query answering ``options`` (or, with ``key``, the one entry of that offset: the
    other options than ``$select`` are ignored, as the reference does) over ``table`` of
    ``columns``; rows in offset order unless ``$orderby`` says otherwise (then by offset among
    equals). Without ``$top``: a page of ``page`` rows and one more, if there is one."""
    selected = [_column(name, columns, "$select") for name in options.select]
    listed = ", ".join(quote(name) for name in selected) if selected else "*"
    sql = f"SELECT {listed}, {quote(offset)} AS {quote(KEY_ALIAS)} FROM {quote(table)}"
    if key is not None:
        return f"{sql} WHERE {quote(offset)} = {key}"
    if options.filter is not None:
        sql += f" WHERE {_expr(options.filter, columns, quote)}"
    order = [
        f"{quote(_column(name, columns, '$orderby'))} {'ASC' if ascending else 'DESC'} NULLS FIRST"
        for name, ascending in options.order_by
    ]
    order.append(f"{quote(offset)} ASC")  # ties in offset order: pages never overlap
    # Without $top, one row past the page tells whether a next page exists.
    top = page + 1 if options.top is None else options.top
    return f"{sql} ORDER BY {', '.join(order)} LIMIT {top} OFFSET {options.skip}"


def count_sql(
    options: QueryOptions, table: str, columns: Collection[str], quote: Callable[[str], str]
) -> str:
    """The query counting the rows of ``table`` that ``$filter`` matches."""
    sql = f"SELECT COUNT(*) AS {quote('count')} FROM {quote(table)}"
    if options.filter is not None:
        sql += f" WHERE {_expr(options.filter, columns, quote)}"
    return sql


def _column(name: str, columns: Collection[str], option: str) -> str:
    if name not in columns:
        raise UnknownPropertyError(option, name, columns)
    return name


def _expr(expr: Expr, columns: Collection[str], quote: Callable[[str], str]) -> str:
    match expr:
        case Column(name):
            return quote(_column(name, columns, "$filter"))
        case Value(value):
            return _literal(value)
        case Compare(op, left, Value(None)) | Compare(op, Value(None), left) if op in ("eq", "ne"):
            return f"({_expr(left, columns, quote)} IS {'' if op == 'eq' else 'NOT '}NULL)"
        case Compare(op, left, right):
            sql_op = _SQL_OPS[op]
            return f"({_expr(left, columns, quote)} {sql_op} {_expr(right, columns, quote)})"
        case In(item, choices):
            listed = ", ".join(_expr(choice, columns, quote) for choice in choices)
            return f"({_expr(item, columns, quote)} IN ({listed}))"
        case Not(operand):
            return f"(NOT {_expr(operand, columns, quote)})"
        case Logical(op, left, right):
            return f"({_expr(left, columns, quote)} {op.upper()} {_expr(right, columns, quote)})"
    raise AssertionError(expr)


def _literal(value: Scalar) -> str:
    """A parsed literal written back as SQL (strings quoted with ``'`` doubled)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dt.datetime):
        utc = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return f"TIMESTAMP '{utc.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return "'" + value.replace("'", "''") + "'"
