"""A prepared statement's placeholders: ``?`` as JDBC and ODBC tools write them, numbered for
DataFusion (which binds only ``$1``, ``$2``...), and the parameter schema Flight SQL announces.

The schema has one field per placeholder, named as DataFusion numbers it (``$1``...), in order,
typed as the engine inferred it from where the placeholder stands (``seq = $1``: ``seq``'s type)
and ``null`` where nothing says (``SELECT $1``): the protocol's "unknown" type, so a client binds
what it has and the engine casts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from datafusion.common import RexType

_TOKENS = re.compile(
    r"""
      '(?:[^']|'')*'?          # a string literal ('' escapes a quote)
    | "(?:[^"]|"")*"?          # a quoted identifier
    | --[^\n]*                 # a line comment
    | /\*.*?(?:\*/|$)          # a block comment
    | \$(?P<number>\d+)        # a numbered placeholder
    | (?P<question>\?)         # a positional placeholder
    | [^'"\-/$?]+ | .          # anything else
    """,
    re.VERBOSE | re.DOTALL,
)

_NODE_EXPRESSIONS = (
    "projections",
    "predicate",
    "group_by_exprs",
    "aggregate_exprs",
    "sort_exprs",
    "on",
    "filter",
    "window_exprs",
    "skip",
    "fetch",
)
"""The accessors of DataFusion's plan nodes that hold expressions (a node lacks most)."""


_BRANCHES = (RexType.Call, RexType.Alias)


class MixedPlaceholdersError(ValueError):
    """A query uses both ``?`` and ``$n`` placeholders, which cannot be numbered together."""


def numbered(sql: str) -> str:
    """``sql`` with each ``?`` placeholder (outside literals, quoted names and comments) as
    ``$1``, ``$2``... in order; ``sql`` itself when it has none. Raises
    :class:`MixedPlaceholdersError`."""
    pieces: list[str] = []
    count = 0
    dollars = False
    for token in _TOKENS.finditer(sql):
        if token.group("question"):
            count += 1
            pieces.append(f"${count}")
        else:
            dollars = dollars or token.group("number") is not None
            pieces.append(token.group(0))
    if not count:
        return sql
    if dollars:
        raise MixedPlaceholdersError(
            "the query mixes '?' and '$n' placeholders; use one kind (parameters bind in order)"
        )
    return "".join(pieces)


def parameter_schema(sql: str, plan: Any) -> pa.Schema:
    """The parameters of ``sql`` (already :func:`numbered`) as planned in DataFusion's logical
    ``plan``: one field per ``$n`` up to the highest the SQL names."""
    highest = max(
        (int(token.group("number")) for token in _TOKENS.finditer(sql) if token.group("number")),
        default=0,
    )
    if not highest:
        return pa.schema([])
    types: dict[str, pa.DataType] = {}
    for expression in _plan_expressions(plan):
        _collect(expression, types)
    return pa.schema(
        [pa.field(f"${n}", types.get(f"${n}", pa.null())) for n in range(1, highest + 1)]
    )


def _plan_expressions(plan: Any) -> Iterator[Any]:
    pending = [plan]
    while pending:
        node = pending.pop()
        pending.extend(node.inputs())
        variant = node.to_variant()
        for accessor in _NODE_EXPRESSIONS:
            method = getattr(variant, accessor, None)
            if method is None:
                continue
            try:
                held = method()
            except Exception:  # noqa: BLE001  # an accessor this node does not answer
                continue
            yield from _flatten(held)


def _flatten(held: Any) -> Iterator[Any]:
    if held is None:
        return
    if isinstance(held, list | tuple):
        for item in held:
            yield from _flatten(item)
    elif hasattr(held, "variant_name"):
        yield held
    elif hasattr(held, "expr"):  # a sort expression
        yield from _flatten(held.expr())


def _collect(expression: Any, types: dict[str, pa.DataType]) -> None:
    """Placeholders under ``expression`` and the types the engine gave them."""
    pending = [expression]
    while pending:
        current = pending.pop()
        if current.variant_name() == "Placeholder":
            placeholder = current.to_variant()
            field = placeholder.field()
            if field is not None and field.type != pa.null():
                types.setdefault(placeholder.id(), field.type)
            continue
        if current.rex_type() not in _BRANCHES:  # a column or a literal: a leaf
            continue
        try:
            pending.extend(current.rex_call_operands())
        except Exception:  # noqa: BLE001  # a kind of call whose operands are not offered
            continue
