"""``odfd provenance`` end to end in-process: the tree says each answer was checked by
re-execution, ``-o json`` carries the same, ``--where`` and ``--depth`` select, and mistakes are
one line (exit code 1)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from odfd.cli.main import main
from tests.verifier.provenance_pipelines import build


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("provenance-cli") / "ws"
    asyncio.run(build(root, "datafusion", ["grouped", "top", "filt", "subq"]))
    return root


def _run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["provenance", *argv, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_tree_shows_witnesses_ingests_and_the_check(capsys, root: Path) -> None:
    code, out, err = _run(capsys, root, "top", "--where", "leader = 'B'")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("top offset 1 (block #")
    assert "leader=B, total=60.0" in lines[0] and "checked by re-execution" in lines[0]
    assert "leader ← grouped.symbol" in lines[1]
    assert lines[2].startswith("└─ grouped offset 1 (block #") and "n=3" in lines[2]
    trades = [line for line in lines if "trades offset" in line]
    assert [line.split("trades offset ")[1].split()[0] for line in trades] == ["1", "3", "6"]
    assert sum("ingested: push source 'upload', state odf/etag trades-" in ln for ln in lines) == 3
    assert "1 row(s) traced, each checked by re-execution" in err


def test_json_and_depth(capsys, root: Path) -> None:
    code, out, _ = _run(capsys, root, "filt", "--offset", "0", "2", "-o", "json", "--depth", "1")
    assert code == 0
    rows = json.loads(out)
    assert [(r["offset"], r["checked"]) for r in rows] == [(0, True), (2, True)]
    assert rows[0]["columns"] == {
        "event_time": "trades.event_time",
        "ticker": "trades.symbol",
        "price": "trades.price",
    }
    # filt keeps price > 12: B 20 (offset 1), B 19 (3), A 13 (5), B 21 (6)
    assert [[w["offset"] for w in r["inputs"]] for r in rows] == [[1], [5]]
    assert rows[0]["inputs"][0]["ingest"]["sourceState"]["value"] == "trades-0.ndjson"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["filt", "--offset", "4"], "error: filt has no row at offset 4 (its rows run 0..3)"),
        (["trades", "--offset", "0"], "error: trades is a root dataset: its rows were ingested"),
        (
            ["subq", "--offset", "0"],
            "error: subq: provenance not supported for a subquery inside an expression in query "
            "(at line 1, column 55)",
        ),
        (["filt", "--where", "nonsense >"], "error: --where: "),
    ],
)
def test_mistakes_are_one_line(capsys, root: Path, argv: list[str], message: str) -> None:
    code, out, err = _run(capsys, root, *argv)
    assert code == 1 and out == ""
    assert err.startswith(message), err
    assert err.count("\n") == 1
