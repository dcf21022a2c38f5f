"""A prepared statement's placeholders: ``?`` as JDBC and ODBC tools write them, numbered for
DataFusion (which binds only ``$1``, ``$2``...), and the parameter schema Flight SQL announces.

The schema has one field per placeholder, named as DataFusion numbers it (``$1``...), in order,
typed as the engine inferred it from where the placeholder stands (``seq = $1``: ``seq``'s type)
and ``null`` where nothing says (``SELECT $1``): the protocol's "unknown" type, so a client binds
what it has and the engine casts it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pyarrow as pa

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


def parameter_schema(sql: str, types: Mapping[str, pa.DataType]) -> pa.Schema:
    """The parameters of ``sql`` (already :func:`numbered`): one field per ``$n`` up to the
    highest the SQL names, typed as ``types`` (placeholder -> the type the engine inferred)."""
    highest = max(
        (int(token.group("number")) for token in _TOKENS.finditer(sql) if token.group("number")),
        default=0,
    )
    return pa.schema(
        [pa.field(f"${n}", types.get(f"${n}", pa.null())) for n in range(1, highest + 1)]
    )
