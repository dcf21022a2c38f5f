"""``odfd ingest``, ``pull``, ``tail`` and ``sql`` run in-process against a real workspace."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfd.cli.main import main
from protocol.model import Timestamp
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_SPARK_CONFIG

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    assert main(["init", "--root", str(workspace)]) == 0
    with open(workspace / "config.toml", "a") as config:
        config.write(TEST_SPARK_CONFIG)
    monkeypatch.setenv("ODFD_HOME", str(workspace))
    monkeypatch.chdir(tmp_path)
    return workspace


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_leaderboard_end_to_end(
    root: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(capsys, "add", str(EXAMPLES / "leaderboard"))[0] == 0
    data = EXAMPLES / "leaderboard" / "data"
    code, _, err = run(
        capsys, "ingest", "match.scores", str(data / "1.ndjson"), str(data / "2.ndjson")
    )
    assert code == 0 and "match.scores: " in err and "4 record(s)" in err and "3 record(s)" in err

    code, _, err = run(capsys, "pull", "match.leaderboard")
    assert code == 0 and "Updated: match.leaderboard: 6 new record(s)" in err
    code, _, err = run(capsys, "pull", "--recursive", "match.leaderboard")
    assert code == 0 and "Skipped: match.scores: no polling source" in err
    assert "Skipped: match.leaderboard: up to date (no new input data)" in err

    code, out, _ = run(capsys, "tail", "match.leaderboard", "-n", "2", "--output", "json")
    assert code == 0
    assert [(r["offset"], r["player"], r["place"], r["match_time"]) for r in json.loads(out)] == [
        (4, "erin", 2, "2024-05-02T18:00:00Z"),
        (5, "alice", 3, "2024-05-02T18:00:00Z"),
    ]
    code, out, _ = run(capsys, "tail", "match.leaderboard", "-n", "1")
    assert code == 0 and "| alice  |" in out and out.endswith("1 row\n")

    query = 'SELECT player, count(*) AS podiums FROM "match.leaderboard" GROUP BY player ORDER BY podiums DESC, player'
    podiums = ["player,podiums", "alice,2", "carol,2", "bob,1", "erin,1"]
    code, out, _ = run(capsys, "sql", query, "--output", "csv")  # DataFusion by default
    assert code == 0 and out.splitlines() == podiums
    spark_query = query.replace('"match.leaderboard"', "`match.leaderboard`")
    code, out, _ = run(capsys, "sql", spark_query, "--engine", "spark", "--output", "csv")
    assert code == 0 and out.splitlines() == podiums

    first_block, first_time = asyncio.run(_head_of(root, "match.leaderboard"))
    assert run(capsys, "ingest", "match.scores", str(data / "3.ndjson"))[0] == 0
    assert run(capsys, "pull", "match.leaderboard")[0] == 0
    count = 'SELECT count(*) AS n, max(match_id) AS last_match FROM "match.leaderboard"'
    code, out, _ = run(capsys, "sql", count, "--output", "json")
    assert code == 0 and json.loads(out) == [{"n": 9, "last_match": 3}]
    # AS OF a block: the query sees what the node knew when that block was the head
    code, out, _ = run(capsys, "sql", count, "--output", "json", "--as-of", str(first_block))
    assert code == 0 and json.loads(out) == [{"n": 6, "last_match": 2}]
    code, out, _ = run(capsys, "sql", count, "--output", "json", "--as-of", first_time.to_rfc3339())
    assert code == 0 and json.loads(out) == [{"n": 6, "last_match": 2}]
    code, _, err = run(
        capsys, "sql", count, "--as-of", "2000-01-02T00:00:00Z"
    )  # before the dataset existed
    assert code == 1 and "'odf.odf.match.leaderboard' not found" in err

    target = tmp_path / "board.parquet"
    code, _, _ = run(
        capsys,
        "sql",
        'SELECT * FROM "match.leaderboard"',
        "--output",
        "parquet",
        "--output-path",
        str(target),
    )
    assert code == 0 and pq.read_table(target).num_rows == 9
    code, _, err = run(capsys, "sql", 'SELECT nope FROM "match.leaderboard"')
    assert code == 1 and err.startswith(
        "error: query is invalid: Schema error: No field named nope"
    )
    code, _, err = run(capsys, "sql", "SELECT nope FROM `match.leaderboard`", "--engine", "spark")
    assert code == 1 and err.startswith("error: query is invalid: [UNRESOLVED_COLUMN")


async def _head_of(root: Path, alias: str) -> tuple[object, Timestamp]:
    async with await Workspace.open(root) as workspace:
        chain = (await workspace.get_dataset(alias)).chain
        head = await chain.head()
        assert head is not None
        return head, (await chain.get_block(head)).system_time


def test_malformed_input_fails_with_a_message_and_changes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(capsys, "add", str(EXAMPLES / "currency-conversion" / "trades.us.yaml"))[0] == 0
    head = next((root / "datasets").glob("*/refs/head")).read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "trade_id,event_time,symbol,quantity,price\nx-1,2024-03-01T10:00:00Z,AAPL,ten,1.0\n"
    )
    code, _, err = run(capsys, "ingest", "trades.us", str(bad))
    assert code == 1
    assert err.strip() == (
        f"error: {bad}: malformed row 1 (line 2), column 'quantity': value 'ten' is not a valid BIGINT"
    )
    assert next((root / "datasets").glob("*/refs/head")).read_text() == head


def test_pull_polling_source_and_set_watermark(
    root: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rates = tmp_path / "examples" / "currency-conversion" / "data" / "rates"
    shutil.copytree(EXAMPLES / "currency-conversion" / "data" / "rates", rates)
    assert run(capsys, "add", str(EXAMPLES / "currency-conversion" / "fx.rates.yaml"))[0] == 0
    code, _, err = run(capsys, "pull", "fx.rates")
    assert code == 0 and "Updated: fx.rates: 6 new record(s) in 3 block(s)" in err
    code, _, err = run(capsys, "pull", "fx.rates")
    assert code == 0 and "Skipped: fx.rates: up to date" in err
    code, _, err = run(capsys, "pull", "fx.rates", "--set-watermark", "2024-03-08T00:00:00Z")
    assert code == 0 and "watermark set to 2024-03-08T00:00:00Z" in err
    code, _, err = run(capsys, "pull", "fx.rates", "--set-watermark", "2024-03-07T00:00:00Z")
    assert code == 0 and "up to date (the watermark is already 2024-03-08T00:00:00Z)" in err
    code, _, err = run(capsys, "pull", "nope")
    assert code == 1 and "nope" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_ingest_and_pull_draw_a_status_line_only_on_a_terminal(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "-q", "add", str(EXAMPLES / "leaderboard"))[0] == 0
    data = EXAMPLES / "leaderboard" / "data"
    terminal, captured = _Terminal(), sys.stderr
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["ingest", "match.scores", str(data / "1.ndjson")]) == 0
    assert main(["pull", "match.leaderboard"]) == 0
    text = terminal.getvalue()
    assert "\r| ingest match.scores: " in text and "1.ndjson · " in text
    assert "\r| pull match.leaderboard · " in text
    # each line is blanked before the result is printed
    assert re.search(r"\r +\rIngested: match\.scores: ", text)
    assert re.search(r"\r +\rUpdated: match\.leaderboard: ", text)

    monkeypatch.setattr("sys.stderr", captured)
    code, _, err = run(capsys, "ingest", "match.scores", str(data / "2.ndjson"))
    assert code == 0 and "\r" not in err and err.startswith("Ingested: match.scores: ")
