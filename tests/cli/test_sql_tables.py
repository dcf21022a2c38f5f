"""Which datasets ``odfd sql`` registers: the tables the query reads, read by parsing it in the
engine's dialect (``odfd.app.query_tables``), not every alias its text happens to hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odfd.app.node import open_node
from odfd.app.query import query_inputs
from odfd.app.query_tables import read_aliases

ALIASES = ("match.scores", "scores", "Scores", "my-data", "a", "alice/x-y", "b")


@pytest.mark.parametrize(
    ("dialect", "sql", "read"),
    [
        # quoted, with a dot or a slash and hyphen, in each dialect's quotes
        ("datafusion", 'SELECT * FROM "match.scores"', ["match.scores"]),
        (
            "spark",
            "SELECT * FROM `match.scores` JOIN `alice/x-y` USING (a)",
            ["match.scores", "alice/x-y"],
        ),
        ("datafusion", 'SELECT * FROM "my-data"', ["my-data"]),
        # dotted parts name the same table
        ("datafusion", "SELECT * FROM match.scores", ["match.scores"]),
        # DataFusion compares names exactly, Spark whatever the case
        ("datafusion", 'SELECT * FROM "Scores"', ["Scores"]),
        ("datafusion", "SELECT * FROM scores", ["scores"]),
        ("spark", "SELECT * FROM SCORES", ["scores", "Scores"]),
        # a WITH name shadows the dataset of that name, in its scope only
        (
            "datafusion",
            'WITH scores AS (SELECT * FROM "my-data") SELECT * FROM scores',
            ["my-data"],
        ),
        ("spark", "WITH Scores AS (SELECT 1) SELECT * FROM scores", []),
        (
            "datafusion",
            "SELECT * FROM (WITH b AS (SELECT 1) SELECT * FROM b) AS q JOIN b ON true",
            ["b"],
        ),
        # names in strings, columns and table aliases are no tables
        ("datafusion", "SELECT 'scores' AS a, b.x FROM \"alice/x-y\" AS b", ["alice/x-y"]),
        # subqueries and several statements
        ("datafusion", "SELECT * FROM a WHERE x IN (SELECT y FROM b)", ["a", "b"]),
        ("datafusion", "SELECT 1; SELECT * FROM scores", ["scores"]),
        ("datafusion", "SELECT 1", []),
    ],
)
def test_the_tables_a_query_reads(dialect: str, sql: str, read: list[str]) -> None:
    assert read_aliases(sql, dialect, ALIASES) == [a for a in ALIASES if a in read]


@pytest.mark.parametrize(
    "sql",
    ["SELECT * FROM my-data", "SELEC * FROM scores", 'SELECT * FROM "scores'],
)
def test_a_query_that_does_not_parse_keeps_every_alias_its_text_holds(sql: str) -> None:
    """The engine then reports the query's own error, not a missing table."""
    in_text = [a for a in ALIASES if a.lower() in sql.lower()]
    assert read_aliases(sql, "datafusion", ALIASES) == in_text


def test_an_unknown_dialect_keeps_every_alias_its_text_holds() -> None:
    assert read_aliases('SELECT * FROM "b"', "klingon", ALIASES) == ["b"]


def test_no_alias_in_the_text_needs_no_parse() -> None:
    assert read_aliases("SELECT * FROM nowhere", "datafusion", ["elsewhere"]) == []


def test_a_plain_query_over_datasets_does_not_import_sqlglot() -> None:
    """The everyday ``odfd sql`` pays no parser import (issue 30's ≤1.05x of the CLI baseline)."""
    script = (
        "import sys\n"
        "from odfd.app.query_tables import read_aliases\n"
        'read = read_aliases(\'SELECT a, count(*) FROM scores JOIN "my-data" USING (a) '
        "WHERE a > 1 GROUP BY a', 'datafusion', ['scores', 'my-data', 'other'])\n"
        "assert read == ['scores', 'my-data'], read\n"
        "assert 'sqlglot' not in sys.modules, 'sqlglot imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize(
    ("dialect", "sql", "read"),
    [
        # functions, comments, table functions, case and strings: the parser decides
        ("datafusion", "SELECT extract(year FROM a) FROM b", ["b"]),
        ("datafusion", "SELECT * FROM b -- FROM a", ["b"]),
        ("spark", "SELECT * FROM b JOIN a(1)", ["a", "b"]),
        ("datafusion", "SELECT * FROM SCORES", []),
        ("spark", 'SELECT * FROM b WHERE x = "a"', ["b"]),
    ],
)
def test_the_cheap_pass_leaves_what_it_cannot_tell_to_the_parser(
    dialect: str, sql: str, read: list[str]
) -> None:
    assert read_aliases(sql, dialect, ALIASES) == [a for a in ALIASES if a in read]


async def test_sql_registers_only_the_datasets_the_query_reads(workspace_root: Path) -> None:
    """Aliases with dots and hyphens that prefix each other, and one in a string literal."""
    sql = (
        "SELECT 'test.deriv.summary' AS label, * FROM \"test.root.files-glob\" "
        'JOIN "test.root.files-by-time" USING (id)'
    )
    async with await open_node(workspace_root) as node:
        inputs = await query_inputs(node, sql)
    assert sorted(view.alias for view in inputs.views) == [
        "test.root.files-by-time",
        "test.root.files-glob",
    ]
