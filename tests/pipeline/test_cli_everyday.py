"""The everyday CLI on real data in Spark: text that is not UTF-8, every output format of ``tail``,
``list --wide``, the ``log`` summary, and ``sql`` with scripts, piped statements and the shell."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from odfd.cli.main import main
from tests.cli.helpers import fingerprint, run
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_SPARK_CONFIG

pytestmark = pytest.mark.spark

CSV_READ = """\
kind: Csv
header: true
schema:
  fields:
    - name: city
      type: string
    - name: score
      type: int64
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, spark: object) -> Path:
    """One workspace for the module (ingests are the slow part): ``scores`` holds a file that
    is not UTF-8, read as ISO-8859-1, then a second file."""
    work = tmp_path_factory.mktemp("everyday")
    workspace = work / "ws"
    assert main(["init", "--root", str(workspace)]) == 0
    with open(workspace / "config.toml", "a") as config:
        config.write(TEST_SPARK_CONFIG)
    for name, read in (("strict", CSV_READ), ("scores", CSV_READ + "encoding: ISO-8859-1\n")):
        manifest = work / f"{name}.yaml"
        manifest.write_text(root_snapshot(name, read))
        assert main(["-q", "add", "--root", str(workspace), str(manifest)]) == 0
    first, second = work / "1.csv", work / "2.csv"
    first.write_bytes(b"city,score\nOslo,1\nCaf\xe9 town,2\n")
    second.write_text("city,score\nLima,3\n")
    assert main(["-q", "ingest", "--root", str(workspace), "scores", str(first), str(second)]) == 0
    return workspace


def test_text_that_is_not_utf8_is_refused_unless_its_encoding_is_named(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = root.parent / "1.csv"
    before = fingerprint(root / "datasets")
    code, _, err = run(capsys, "ingest", "--root", str(root), "strict", str(data))
    assert code == 1
    assert err.strip() == (
        f"error: {data}: line 3 (row 2), byte offset 21: byte(s) e9 are not valid UTF-8; if the "
        "file uses another encoding, name it in the source's read step (e.g. `encoding: "
        "ISO-8859-1`)"
    )
    assert fingerprint(root / "datasets") == before
    # the dataset whose source names the encoding took the same file, decoded
    code, out, _ = run(capsys, "tail", "--root", str(root), "scores", "-o", "ndjson")
    assert [json.loads(line)["city"] for line in out.splitlines()] == ["Oslo", "Café town", "Lima"]


def test_tail_list_and_log_in_every_format(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(root))
    code, out, _ = run(capsys, "tail", *ws, "scores", "-o", "json")
    rows = json.loads(out)
    assert code == 0 and [(r["offset"], r["city"], r["score"]) for r in rows] == [
        (0, "Oslo", 1),
        (1, "Café town", 2),
        (2, "Lima", 3),
    ]
    _, out, _ = run(capsys, "tail", *ws, "scores", "-n", "1", "-s", "1", "-o", "ndjson")
    assert [json.loads(line)["city"] for line in out.splitlines()] == ["Café town"]
    _, out, _ = run(capsys, "tail", *ws, "scores", "-n", "2", "-o", "csv")
    lines = out.splitlines()
    assert len(lines) == 3 and "city,score" in lines[0]
    assert lines[1].endswith("Café town,2") and lines[2].endswith("Lima,3")
    _, out, _ = run(capsys, "tail", *ws, "scores", "-n", "1", "-o", "yaml")
    assert "city: Lima" in out and "score: 3" in out and out.startswith("- ")
    target = tmp_path / "tail.parquet"
    assert run(capsys, "tail", *ws, "scores", "-o", "parquet", "--output-path", str(target))[0] == 0
    assert pq.read_table(target).column("city").to_pylist() == ["Oslo", "Café town", "Lima"]

    _, out, _ = run(capsys, "list", *ws, "--wide", "-o", "json")
    wide = {row["alias"]: row for row in json.loads(out)}
    assert wide["scores"]["records"] == 3 and wide["scores"]["size"] > 0
    assert wide["scores"]["blocks"] == 5 and wide["strict"]["records"] == 0
    _, out, _ = run(capsys, "list", *ws, "-w")
    assert out.splitlines()[0].split() == [
        "Name",
        "Kind",
        "Blocks",
        "Records",
        "Size",
        "Watermark",
        "Head",
        "Updated",
    ]

    code, out, _ = run(capsys, "log", *ws, "scores")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 5
    assert lines[0].startswith("#4 ") and "AddData" in lines[0] and "records 2..2" in lines[0]
    assert "records 0..1" in lines[1] and "SetDataSchema" in lines[2]
    assert lines[-1].startswith("#0 ") and "Seed" in lines[-1] and "Root dataset" in lines[-1]
    _, out, _ = run(capsys, "log", *ws, "scores", "-o", "ndjson", "--filter", "data")
    numbers = [json.loads(line)["block"]["content"]["sequenceNumber"] for line in out.splitlines()]
    assert numbers == [4, 3]


def test_sql_scripts_piped_statements_and_the_shell(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = ("--root", str(root))
    script = tmp_path / "report.sql"
    script.write_text(
        "-- two statements; the ; inside the literal does not end one\n"
        "SELECT count(*) AS n FROM scores;\n"
        "SELECT city FROM scores WHERE city <> 'a;b' ORDER BY city;\n"
    )
    code, out, err = run(capsys, "sql", *ws, "--script", str(script), "-o", "ndjson")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"n": 3},
        {"city": "Café town"},
        {"city": "Lima"},
        {"city": "Oslo"},
    ]

    monkeypatch.setattr(sys, "stdin", io.StringIO("SELECT max(score) AS top\nFROM scores;"))
    code, out, _ = run(capsys, "sql", *ws, "-o", "json")
    assert code == 0 and json.loads(out) == [{"top": 3}]

    code, out, _ = run(capsys, "sql", *ws, "-c", "SELECT 1 AS one", "-o", "csv")
    assert code == 0 and out.splitlines() == ["one", "1"]
