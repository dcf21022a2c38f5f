"""The audit trail of local writes: ``odfd add``, ``ingest``, ``reset`` and ``delete`` are
recorded in the catalog as the workspace's ``admin`` account with the OS user who ran them;
``odfd log --who`` attributes each block to its write and ``--writes`` lists the trail, a deleted
dataset's too."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest

from tests.cli.helpers import run

DATASET = "test.root.url-csv"


def _trail(capsys: pytest.CaptureFixture[str], root: Path, dataset: str) -> list[dict[str, str]]:
    code, out, err = run(capsys, "log", dataset, "--writes", "-o", "json", "--root", str(root))
    assert code == 0, err
    trail: list[dict[str, str]] = json.loads(out)
    return trail


def test_local_writes_are_recorded_with_the_account_and_os_user(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ("--root", str(workspace_root))
    via = f"cli:{getpass.getuser()}"
    code, out, err = run(capsys, "log", DATASET, "--who", *ws)
    assert code == 0, err
    # The template workspace was made by `odfd add` in this process: each block is that add's.
    assert out.count(f"[admin by add via {via}, ") == len(out.splitlines()) > 2

    blocks = run(capsys, "log", DATASET, "-o", "json", *ws)[1]
    second = json.loads(blocks)[-2]["hash"]
    code, _, err = run(capsys, "-y", "reset", DATASET, second, *ws)
    assert code == 0, err
    code, _, err = run(capsys, "-y", "delete", "--recursive", DATASET, *ws)
    assert code == 0, err

    trail = _trail(capsys, workspace_root, DATASET)
    assert [(w["action"], w["account"], w["via"]) for w in trail] == [
        ("add", "admin", via),
        ("reset", "admin", via),
        ("delete", "admin", via),
    ]
    assert trail[1]["newHead"] == second and trail[1]["oldHead"] == trail[0]["newHead"]
    assert trail[2]["oldHead"] == second and trail[2]["newHead"] is None


def test_blocks_written_before_the_trail_began_are_said_to_be_unknown(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    with sqlite3.connect(workspace_root / "catalog.sqlite") as db:
        db.execute("DELETE FROM write_log")
    code, out, err = run(capsys, "log", DATASET, "--who", "--root", str(workspace_root))
    assert code == 0, err
    assert all("[unknown: before the audit trail]" in line for line in out.splitlines())


def test_each_write_is_one_line_of_the_audit_log(
    workspace_root: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="odfd.audit")
    code, out, err = run(capsys, "log", DATASET, "-o", "json", "--root", str(workspace_root))
    head, first = json.loads(out)[0]["hash"], json.loads(out)[-1]["hash"]
    assert run(capsys, "-y", "reset", DATASET, first, "--root", str(workspace_root))[0] == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "odfd.audit"]
    assert lines == [
        f"write: reset {DATASET} by admin via cli:{getpass.getuser()} (head {head} -> {first})"
    ]
