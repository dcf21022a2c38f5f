"""``odfd sql`` over a dataset whose alias has a dot or capitals, written without its double
quotes (the first query many users type): the error says how to write it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage.workspace import Workspace
from tests.cli.helpers import run
from tests.verifier.builders import root_with_slices

HINT = 'did you mean "match.Scores"? (dataset names go in double quotes)'


@pytest.fixture
def root(tmp_path: Path) -> Path:
    async def build() -> None:
        async with await Workspace.init(tmp_path / "ws") as workspace:
            await root_with_slices(workspace, "match.Scores", [[1, 2]])

    asyncio.run(build())
    return tmp_path / "ws"


@pytest.mark.parametrize(
    ("table", "read_as"),
    [
        ("match.Scores", "odf.match.Scores"),  # schema `match`, table `Scores`
        ('"match.scores"', "odf.odf.match.scores"),  # names are case-sensitive
    ],
)
def test_an_alias_written_unquoted_or_in_another_case_is_named_in_the_error(
    capsys: pytest.CaptureFixture[str], root: Path, table: str, read_as: str
) -> None:
    code, out, err = run(capsys, "sql", f"select count(*) from {table}", "--root", str(root))
    assert (code, out) == (1, "")
    assert err.strip() == (
        f"error: query is invalid: Error during planning: table '{read_as}' not found; {HINT}"
    )


def test_an_unknown_name_or_the_right_one_gives_no_hint(
    capsys: pytest.CaptureFixture[str], root: Path
) -> None:
    code, _, err = run(capsys, "sql", "select * from nope", "--root", str(root))
    assert code == 1 and "table 'odf.odf.nope' not found" in err and "did you mean" not in err
    code, out, _ = run(
        capsys, "sql", 'select count(*) as n from "match.Scores"', "-o", "csv", "--root", str(root)
    )
    assert (code, out) == (0, "n\n2\n")


@pytest.mark.parametrize("table", ['odf.odf."match.Scores"', 'odf."match.Scores"'])
def test_a_name_with_catalog_and_schema_reads_the_dataset(
    capsys: pytest.CaptureFixture[str], root: Path, table: str
) -> None:
    """The names Flight SQL lists (catalog ``odf``, schema ``odf``) work in ``odfd sql`` too."""
    code, out, err = run(
        capsys, "sql", f"select count(*) as n from {table}", "-o", "csv", "--root", str(root)
    )
    assert (code, out, err) == (0, "n\n2\n", "")


@pytest.mark.parametrize(
    ("table", "read_as"),
    [
        ('kamu.kamu."match.Scores"', "kamu.kamu.match.Scores"),
        ('kamu."match.Scores"', "odf.kamu.match.Scores"),  # kamu's schema in odfd's catalog
    ],
)
def test_kamus_catalog_and_schema_are_named_odfds(
    capsys: pytest.CaptureFixture[str], root: Path, table: str, read_as: str
) -> None:
    """A query written for kamu-cli (``kamu.kamu."x"``) was ``table … not found`` alone; now
    the alias and odfd's own prefix, as Flight SQL says it."""
    code, out, err = run(capsys, "sql", f"select count(*) from {table}", "--root", str(root))
    assert (code, out) == (1, "")
    assert err.strip() == (
        f"error: query is invalid: Error during planning: table '{read_as}' not found; the "
        "datasets are tables of catalog odf, schema odf (kamu-cli's are both named kamu); did "
        'you mean "match.Scores"? (or odf.odf."match.Scores")'
    )
    code, _, err = run(capsys, "sql", "select * from kamu.kamu.nope", "--root", str(root))
    assert code == 1 and "did you mean" not in err
