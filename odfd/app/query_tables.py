"""Which of the node's datasets a SQL query reads: the tables its ``FROM``/``JOIN`` clauses name,
read by parsing the query in the SQL dialect of the engine that runs it.

A table name is a dataset's alias when the two are equal, compared as the dialect compares table
names (Spark whatever the case; DataFusion, as odfd runs it, exactly). A name may be quoted
(``"alice/scores"``, ```match.scores```) or spelled as dotted parts (``match.scores``); a name a
``WITH`` clause defines in scope is that subquery, not a dataset. When the query cannot be parsed,
every candidate is kept: the engine then reports the query's real error.

sqlglot is imported only when there is something to decide (a dataset's alias appears in the
query's text), so ``odfd sql`` over no dataset never pays for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlglot import exp

    from verifier.provenance.dialects import TagDialect


def read_aliases(sql: str, sql_dialect: str, aliases: Iterable[str]) -> list[str]:
    """Those of ``aliases`` that ``sql`` reads as tables, in the engine's dialect
    (``Engine.sql_dialect``); when it cannot be parsed, all of them that its text holds (a
    registration too many costs little; one too few fails the query)."""
    candidates = [alias for alias in aliases if alias.lower() in sql.lower()]
    if not candidates:
        return []  # nothing to decide: no parse, no sqlglot import
    dialect = _dialect(sql_dialect)
    tables = None if dialect is None else referenced_tables(sql, dialect)
    if dialect is None or tables is None:
        return candidates
    fold = dialect.case_insensitive
    return [alias for alias in candidates if (alias.lower() if fold else alias) in tables]


def referenced_tables(sql: str, dialect: TagDialect) -> frozenset[str] | None:
    """The table names ``sql`` reads (each a dotted path of its parts as written, lowercase in a
    case-insensitive dialect), or ``None`` when ``sql`` cannot be parsed in ``dialect``."""
    import sqlglot
    from sqlglot.errors import SqlglotError
    from sqlglot.optimizer.scope import traverse_scope

    try:
        statements = [s for s in sqlglot.parse(sql, dialect=dialect.dialect) if s is not None]
        names = {
            _name(table)
            for statement in statements
            for scope in traverse_scope(statement)
            for table in scope.tables
            if not _names_a_cte(table, scope.cte_sources, dialect.case_insensitive)
        }
    except (SqlglotError, RecursionError):
        return None
    return frozenset(n.lower() for n in names) if dialect.case_insensitive else frozenset(names)


def _dialect(sql_dialect: str) -> TagDialect | None:
    """sqlglot's knowledge of the engine's dialect; ``None`` for one it lacks (parsing in
    another dialect could miss tables)."""
    from verifier.provenance.dialects import tag_dialect
    from verifier.provenance.errors import UnsupportedProvenanceError

    try:
        return tag_dialect(sql_dialect)
    except UnsupportedProvenanceError:
        return None


def _name(table: exp.Table) -> str:
    return ".".join(part.name for part in table.parts)


def _names_a_cte(table: exp.Table, ctes: Iterable[str], fold: bool) -> bool:
    """Whether ``table`` is a ``WITH`` name in scope (a qualified name never is)."""
    if len(table.parts) != 1:
        return False
    if fold:
        return table.name.lower() in {cte.lower() for cte in ctes}
    return table.name in ctes
