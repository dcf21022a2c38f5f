"""Which of the node's datasets a SQL query reads: the tables its ``FROM``/``JOIN`` clauses name,
read by parsing the query in the SQL dialect of the engine that runs it.

A table name is a dataset's alias when the two are equal, compared as the dialect compares table
names (Spark whatever the case; DataFusion, as odfd runs it, exactly). A name may be quoted
(``"alice/scores"``, ```match.scores```) or spelled as dotted parts (``match.scores``); a name a
``WITH`` clause defines in scope is that subquery, not a dataset. A name may carry the session's
catalog and schema (``odf.odf."match.scores"``, as Flight SQL lists tables) in DataFusion. When
the query cannot be parsed, every candidate is kept: the engine then reports the query's real
error.

sqlglot is imported only when there is something to decide: not when no dataset's alias appears in
the query's text, nor when a plain ``SELECT`` names every alias its text holds right after a
top-level ``FROM`` or ``JOIN`` (then every one is read whatever a parse says), so the everyday
``odfd sql`` does not pay for it.
"""

from __future__ import annotations

import re
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
    if _all_plainly_read(sql, sql_dialect, candidates):
        return candidates
    dialect = _dialect(sql_dialect)
    tables = None if dialect is None else referenced_tables(sql, dialect)
    if dialect is None or tables is None:
        return candidates
    fold = dialect.case_insensitive
    names = _unqualified(tables, sql_dialect)
    return [alias for alias in candidates if (alias.lower() if fold else alias) in names]


_QUALIFIERS = {"datafusion": ("odf.odf.", "odf.")}
"""The catalog and schema prefixes a table name may carry in each dialect's session (DataFusion
runs with catalog ``odf``, schema ``odf``, as Flight SQL lists them): ``odf.odf."a/b"`` and
``odf."a/b"`` name the dataset ``a/b``."""


def _unqualified(names: Iterable[str], sql_dialect: str) -> set[str]:
    """``names`` and, of each that starts with the session's catalog or schema, the name
    without it (the qualifier compared whatever its case, as an unquoted one is read)."""
    found = set(names)
    for name in names:
        for prefix in _QUALIFIERS.get(sql_dialect, ()):
            if name.lower().startswith(prefix):
                found.add(name[len(prefix) :])
    return found


_LEXICAL = {"spark": ("`", True), "datafusion": ('"', False)}
"""Of each dialect the cheap pass reads: its identifier quote, and whether it folds the case of
table names."""

_TOKEN = re.compile(
    r"""(?P<space>\s+)|(?P<string>'[^']*')|(?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`)"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>[0-9]+(?:\.[0-9]+)?)"""
    r"""|(?P<symbol>[(),;.*=<>!+%|-])"""
)


def _all_plainly_read(sql: str, sql_dialect: str, candidates: list[str]) -> bool:
    """Whether ``sql`` is one plain ``SELECT`` (no ``WITH``, no comment) whose top-level ``FROM``
    and ``JOIN`` clauses name every candidate: each is then read whatever a full parse says (and
    kept if it cannot parse), so the answer needs no sqlglot. ``False`` means: ask the parser."""
    lexical = _LEXICAL.get(sql_dialect)
    if lexical is None:
        return False
    quote, fold = lexical
    tokens = _tokens(sql, quote)
    if not tokens or tokens[0] != ("word", "SELECT"):
        return False
    if ("word", "WITH") in tokens or ("symbol", ";") in tokens[:-1]:
        return False
    originals = _tokens(sql, quote, keywords=False) or []
    wanted = {alias.lower() if fold else alias for alias in candidates}
    named: set[str] = set()
    depth = 0
    for at, token in enumerate(tokens):
        if token[0] == "symbol" and token[1] in "()":
            depth += 1 if token[1] == "(" else -1
        elif depth == 0 and token in (("word", "FROM"), ("word", "JOIN")):
            name = _table_name(originals, at + 1, quote)
            if name is not None:
                named.add(name.lower() if fold else name)
    return wanted <= _unqualified(named, sql_dialect)


def _tokens(sql: str, quote: str, keywords: bool = True) -> list[tuple[str, str]] | None:
    """``sql`` as (kind, text) tokens, spaces dropped, words uppercase with ``keywords``; ``None`` for text
    this small lexer does not fully understand (comments, escapes, the other dialect's quotes)."""
    tokens: list[tuple[str, str]] = []
    at = 0
    while at < len(sql):
        match = _TOKEN.match(sql, at)
        if match is None or (match.lastgroup == "quoted" and match.group()[0] != quote):
            return None
        text = match.group()
        if match.lastgroup == "string" and "\\" in text:
            return None
        if match.lastgroup == "symbol" and sql.startswith(("--", "/*"), at):
            return None
        if keywords and match.lastgroup == "word":
            text = text.upper()
        if match.lastgroup != "space":
            tokens.append((str(match.lastgroup), text))
        at = match.end()
    return tokens


def _table_name(tokens: list[tuple[str, str]], at: int, quote: str) -> str | None:
    """The dotted table name that starts at ``tokens[at]`` when it plainly is one (not a table
    function or a subquery), as a parse would join its parts; else ``None``."""
    parts: list[str] = []
    while at < len(tokens) and tokens[at][0] in ("word", "quoted"):
        kind, text = tokens[at]
        parts.append(text[1:-1].replace(quote * 2, quote) if kind == "quoted" else text)
        at += 1
        if at < len(tokens) and tokens[at] == ("symbol", "."):
            at += 1
        else:
            break
    else:
        return None
    following = tokens[at] if at < len(tokens) else None
    if following is not None and following[0] == "symbol" and following[1] not in ",);":
        return None
    return ".".join(parts)


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
