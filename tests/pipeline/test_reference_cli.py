"""The CLI as the reference's end-to-end tests use it (kamu-cli
``src/e2e/app/cli/repo-tests/src/commands/``), run in-process against a real workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline.test_cli import root, run  # noqa: F401  (the workspace fixture)

pytestmark = pytest.mark.spark

POPULATION = """\
kind: DatasetSnapshot
version: 1
content:
  name: population
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: NdJson
        schema:
          fields:
{fields}
      merge:
{merge}
"""
FIELD = "            - {{name: {name}, type: {{kind: {kind}}}}}"


def manifest(tmp_path: Path, name: str, fields: list[tuple[str, str]], merge: str) -> Path:
    text = POPULATION.format(
        fields="\n".join(FIELD.format(name=n, kind=k) for n, k in fields),
        merge="\n".join(f"        {line}" for line in merge.splitlines()),
    )
    path = tmp_path / name
    path.write_text(text)
    return path


def records(out: str) -> list[dict]:
    """``sql --output json`` rows (one JSON array)."""
    return json.loads(out)


def last_slice(workspace_root: Path) -> Path:
    files = sorted((workspace_root / "datasets").glob("*/data/*"), key=lambda p: p.stat().st_mtime)
    return files[-1]


def test_ingest_input_format_and_event_time(
    root: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Restates test_ingest_command.rs ``test_push_ingest_from_file_ledger`` and
    ``test_push_ingest_from_file_snapshot_with_event_time``: an NdJson source takes a CSV file
    with ``--input-format csv`` (its schema names the columns, no header), every column it
    declares is REQUIRED, and ``--event-time`` fills the event time."""
    ledger = manifest(
        tmp_path,
        "ledger.yaml",
        [("event_time", "Timestamp"), ("city", "String"), ("population", "Int64")],
        "kind: Ledger\nprimaryKey: [event_time, city]",
    )
    assert run(capsys, "add", str(ledger))[0] == 0
    data = tmp_path / "data.csv"
    data.write_text("2020-01-01,A,1000\n2020-01-01,B,2000\n2020-01-01,C,3000\n")
    code, _, err = run(capsys, "ingest", "population", "--input-format", "csv", str(data))
    assert code == 0, err
    schema = pq.ParquetFile(last_slice(root)).metadata.schema
    assert [schema.column(i).max_definition_level for i in range(len(schema))] == [0] * 6
    assert pq.read_table(last_slice(root)).column("city").to_pylist() == ["A", "B", "C"]

    assert run(capsys, "delete", "-y", "population")[0] == 0
    snapshot = manifest(
        tmp_path,
        "snapshot.yaml",
        [("city", "String"), ("population", "Int64")],
        "kind: Snapshot\nprimaryKey: [city]",
    )
    assert run(capsys, "add", str(snapshot))[0] == 0
    data.write_text("A,1000\nB,2000\nC,3000")
    code, _, err = run(
        capsys,
        "ingest",
        "population",
        "--input-format",
        "csv",
        "--event-time",
        "2050-01-01T00:00:00Z",
        str(data),
    )
    assert code == 0, err
    times = pq.read_table(last_slice(root)).column("event_time").to_pylist()
    assert {t.isoformat() for t in times} == {"2050-01-01T00:00:00+00:00"}


def test_add_refuses_duplicate_inputs_and_reports_a_repeated_name(
    root: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Restates test_add_command.rs ``test_add_with_duplicate_dependencies`` (nothing is added)
    and ``test_add_with_circular_dependency`` (the second manifest naming ``plain`` is skipped
    as already existing, not dropped silently)."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: plain\n  kind: Root\n  metadata: []\n"
    )
    derivative = """\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
{inputs}
      transform: {{kind: Sql, engine: spark, query: SELECT * FROM plain}}
"""
    dupes = tmp_path / "with-duplicates.yaml"
    dupes.write_text(
        derivative.format(
            name="with-duplicates",
            inputs="        - datasetRef: plain\n        - datasetRef: plain",
        )
    )
    code, _, err = run(capsys, "add", str(plain), str(dupes))
    assert code != 0
    assert "Failed to add dataset with-duplicates" in err and "duplicate inputs" in err
    code, out, _ = run(capsys, "list", "--output", "json")
    assert json.loads(out) == []

    commented = tmp_path / "commented.yaml"
    commented.write_text(derivative.format(name="plain", inputs="        - datasetRef: plain"))
    code, _, err = run(capsys, "add", str(plain), str(commented))
    assert code == 0
    assert "Added: plain" in err and "Skipped: plain: already exists" in err
    code, out, _ = run(capsys, "list", "--output", "json")
    assert [d["alias"] for d in json.loads(out)] == ["plain"]


def test_sql_over_a_dataset_without_data_returns_no_rows(
    root: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Restates test_sql_command.rs ``test_sql_command``: a dataset just added answers
    ``SELECT *`` with an empty table, not an error."""
    path = manifest(tmp_path, "p.yaml", [("city", "String")], "kind: Append")
    assert run(capsys, "add", str(path))[0] == 0
    code, out, err = run(capsys, "sql", "SELECT * FROM population", "--output", "json")
    assert code == 0, err
    assert records(out) == []


PLAYER_SCORES = """\
kind: DatasetSnapshot
version: 1
content:
  name: player-scores
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: NdJson
        schema:
          fields:
            - {name: match_time, type: Timestamp}
            - {name: match_id, type: Int64}
            - {name: player_id, type: String}
            - {name: score, type: Int64}
      merge:
        kind: Ledger
        primaryKey: [match_id, player_id]
    - kind: SetVocab
      eventTimeColumn: match_time
"""
LEADERBOARD = """\
kind: DatasetSnapshot
version: 1
content:
  name: leaderboard
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: player-scores
          alias: player_scores
      transform:
        kind: Sql
        engine: datafusion
        queries:
          - query: |
              SELECT ROW_NUMBER() OVER (PARTITION BY 1 ORDER BY score DESC) AS place,
                     match_time,
                     match_id,
                     player_id,
                     score
              FROM player_scores
              LIMIT 2
    - kind: SetVocab
      eventTimeColumn: match_time
"""


def test_pull_reset_derivative(
    root: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Restates test_pull_command.rs ``test_pull_reset_derivative``: the DataFusion leaderboard
    over a Ledger of player scores writes every column REQUIRED (``place``, a ``ROW_NUMBER()``,
    as UInt64), in its Parquet file and in its ``SetDataSchema``; after the input is compacted
    to metadata only and given new data, ``--reset-derivatives-on-diverged-input`` starts the
    leaderboard again from that data, with the same schema."""
    (tmp_path / "scores.yaml").write_text(PLAYER_SCORES)
    (tmp_path / "leaderboard.yaml").write_text(LEADERBOARD)
    assert (
        run(capsys, "add", str(tmp_path / "scores.yaml"), str(tmp_path / "leaderboard.yaml"))[0]
        == 0
    )
    chunk = tmp_path / "1.ndjson"
    chunk.write_text(
        '{"match_time": "2000-01-01", "match_id": 1, "player_id": "Alice", "score": 100}\n'
        '{"match_time": "2000-01-01", "match_id": 1, "player_id": "Bob", "score": 80}\n'
    )
    assert run(capsys, "ingest", "player-scores", str(chunk))[0] == 0
    code, _, err = run(capsys, "pull", "leaderboard")
    assert code == 0, err

    expected_columns = [
        ("offset", "int64"),
        ("op", "int32"),
        ("system_time", "timestamp[ms, tz=UTC]"),
        ("match_time", "timestamp[ms, tz=UTC]"),
        ("place", "uint64"),
        ("match_id", "int64"),
        ("player_id", "string"),
        ("score", "int64"),
    ]

    def check_last_slice(rows: list[tuple]) -> None:
        path = last_slice(root)
        parquet = pq.ParquetFile(path).metadata.schema
        assert [parquet.column(i).max_definition_level for i in range(len(parquet))] == [0] * 8
        schema = pq.read_schema(path)
        assert [(f.name, str(f.type)) for f in schema] == expected_columns
        table = pq.read_table(path)
        assert [
            (
                r["offset"],
                r["op"],
                r["match_time"].date().isoformat(),
                r["place"],
                r["match_id"],
                r["player_id"],
                r["score"],
            )
            for r in table.to_pylist()
        ] == rows
        code, out, _ = run(capsys, "inspect", "schema", "leaderboard", "--output-format", "json")
        assert code == 0
        declared = json.loads(out)["arrow"]
        assert [(f["name"], f["nullable"]) for f in declared] == [
            (n, False) for n, _ in expected_columns
        ]

    check_last_slice(
        [(0, 0, "2000-01-01", 1, 1, "Alice", 100), (1, 0, "2000-01-01", 2, 1, "Bob", 80)]
    )

    code, _, err = run(
        capsys, "--yes", "compact", "--hard", "--keep-metadata-only", "player-scores"
    )
    assert code == 0, err
    # the reference fails this pull ("Failed to update 1 dataset(s)"); odfd finds no new input
    # data and commits nothing, so the leaderboard is the same
    code, _, err = run(capsys, "pull", "leaderboard")
    assert "up to date" in err
    chunk.write_text(
        '{"match_time": "2000-01-02", "match_id": 2, "player_id": "Alice", "score": 70}\n'
        '{"match_time": "2000-01-02", "match_id": 2, "player_id": "Charlie", "score": 90}\n'
    )
    assert run(capsys, "ingest", "player-scores", str(chunk))[0] == 0
    code, _, err = run(capsys, "pull", "leaderboard", "--reset-derivatives-on-diverged-input")
    assert code == 0, err
    check_last_slice(
        [(0, 0, "2000-01-02", 1, 2, "Charlie", 90), (1, 0, "2000-01-02", 2, 2, "Alice", 70)]
    )
