"""The dataset commands end to end: init, add, list, log, rename, delete, import, repair."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from odfd.cli.main import main

MANIFESTS = Path(__file__).parents[1] / "storage" / "manifests"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = tmp_path / "ws"
    code, out, _ = run(capsys, "init", "--root", str(ws))
    assert code == 0 and "Initialized" in out
    code, _, err = run(capsys, "add", "--root", str(ws), str(MANIFESTS))
    assert code == 0, err
    assert err.count("Added: ") == 11
    return ws


def test_list_table_and_json(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "--root", str(root))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["Name", "Kind", "Blocks", "Head", "Updated"]
    assert any(line.startswith("test.deriv.summary ") and " Derivative " in line for line in lines)
    code, out, _ = run(capsys, "list", "--root", str(root), "--output", "json")
    rows = {row["alias"]: row for row in json.loads(out)}
    assert len(rows) == 11
    assert rows["test.root.url-csv"]["kind"] == "Root" and rows["test.root.url-csv"]["blocks"] == 6
    assert rows["test.root.url-csv"]["id"].startswith("did:odf:fed01")


def test_log_yaml_hashes_back_to_the_block_names(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "log", "--root", str(root), "test.root.url-csv", "-o", "yaml")
    assert code == 0
    documents = [d for d in out.split("---\n") if d.strip()]
    assert len(documents) == 6
    sequence = []
    for n, document in enumerate(documents):
        block_line = re.search(r"^# Block: (\S+)$", document, re.M)
        assert block_line is not None
        expected = block_line[1]
        file = tmp_path / f"block{n}.yaml"
        file.write_text(document)
        code, hashed, err = run(capsys, "block", "hash", str(file))
        assert code == 0, err
        assert hashed.strip().splitlines()[-1] == expected
        assert (root / "datasets").rglob(f"blocks/{expected}")
        number = re.search(r"sequenceNumber: (\d+)", document)
        assert number is not None
        sequence.append(int(number[1]))
    assert sequence == [5, 4, 3, 2, 1, 0]


def test_log_json_and_filter(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "log",
        "--root",
        str(root),
        "test.root.url-csv",
        "--output",
        "json",
        "--filter",
        "SetInfo,source",
    )
    entries = json.loads(out)
    kinds = [e["block"]["content"]["event"]["kind"] for e in entries]
    assert kinds == ["SetInfo", "SetVocab", "SetPollingSource", "Seed"]
    assert all(re.fullmatch(r"f1620[0-9a-f]{64}", e["hash"]) for e in entries)
    code, out, _ = run(
        capsys, "log", "--root", str(root), "test.root.url-csv", "--limit", "2", "-o", "yaml"
    )
    assert out.count("# Block: ") == 2


def test_rename_delete_and_errors(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "rename", "--root", str(root), "test.root.ethereum", "eth")
    assert code == 0
    code, _, err = run(capsys, "log", "--root", str(root), "test.root.ethereum")
    assert code == 1 and err.startswith("error: dataset test.root.ethereum is not in the workspace")
    code, _, err = run(capsys, "delete", "--root", str(root), "test.root.url-csv")
    assert code == 1 and "is an input of" in err
    code, _, err = run(capsys, "delete", "--root", str(root), "-y", "eth")
    assert code == 0 and "Deleted: eth" in err
    code, out, _ = run(capsys, "list", "--root", str(root), "--output", "json")
    assert "eth" not in {row["alias"] for row in json.loads(out)}
    code, _, err = run(capsys, "add", "--root", str(root), str(MANIFESTS / "root-mqtt-legacy.yaml"))
    assert code == 0 and "Skipped: test.root.mqtt: already exists" in err


def test_add_with_name_and_account(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(tmp_path / "ws")
    run(capsys, "init", "--root", ws)
    code, _, err = run(
        capsys, "add", "--root", ws, "--name", "renamed", str(MANIFESTS / "root-ethereum.yaml")
    )
    assert code == 0 and "Added: renamed" in err
    code, _, err = run(
        capsys,
        "add",
        "--root",
        ws,
        "--account",
        "alice",
        str(MANIFESTS / "root-container-parquet.yaml"),
    )
    assert code == 0 and "Added: alice/test.root.container" in err


def test_import_and_repair(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "list", "--root", str(root), "--output", "json")
    rows = {row["alias"]: row for row in json.loads(out)}
    folder = root / "datasets" / rows["test.root.mqtt"]["id"].removeprefix("did:odf:")
    other = tmp_path / "other"
    run(capsys, "init", "--root", str(other))
    code, _, err = run(capsys, "import", "--root", str(other), str(folder))
    assert (
        code == 0 and "Imported: test.root.mqtt" in err and "3 blocks" in err
    )  # Seed, SetPollingSource, SetAttachments
    code, _, err = run(capsys, "import", "--root", str(other), str(tmp_path))
    assert code == 1 and "is not a dataset folder" in err

    (root / "catalog.sqlite").unlink()
    for suffix in ("-wal", "-shm"):
        (root / f"catalog.sqlite{suffix}").unlink(missing_ok=True)
    code, out, _ = run(capsys, "repair", "--root", str(root))
    assert code == 0 and out.count("Registered: ") == 11
    _, out, _ = run(capsys, "list", "--root", str(root), "--output", "json")
    after = {row["alias"]: row for row in json.loads(out)}
    assert {a: (r["id"], r["head"], r["blocks"]) for a, r in after.items()} == {
        a: (r["id"], r["head"], r["blocks"]) for a, r in rows.items()
    }


def test_commands_need_a_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "list", "--root", str(tmp_path / "none"))
    assert code == 1 and "run `odfd init`" in err
