"""Pushing the same file again to a Ledger or Snapshot dataset is answered without an engine.

The first push of a file of only duplicates must run the read and the merge (only the engine
knows the rows); once a file is known to add nothing at the current head, the same bytes get the
answer from their hash.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, rows, write

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
MEMO = "no new records (this file added nothing at this head before)"
READ = """        kind: Csv
        header: true
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: id
              type: int64
            - name: value
              type: string"""
LEDGER = """        kind: Ledger
        primaryKey:
          - id"""
SNAPSHOT = """        kind: Snapshot
        primaryKey:
          - id"""


async def test_a_ledger_answers_a_repeated_file_from_its_hash(
    workspace: Workspace, tmp_path: Path
) -> None:
    dataset = await create(workspace, root_snapshot("ledger", READ, LEDGER))
    first = write(tmp_path / "1.csv", "event_time,id,value\n2024-01-01T00:00:00Z,1,a\n")
    dupes = write(tmp_path / "2.csv", "event_time,id,value\n2024-01-02T00:00:00Z,1,z\n")
    assert not (await ingest_push(workspace, dataset, first, engines=TEST_ENGINES)).up_to_date
    assert (await ingest_push(workspace, dataset, first, engines=TEST_ENGINES)).reason == MEMO
    outcome = await ingest_push(
        workspace, dataset, dupes, engines=TEST_ENGINES
    )  # new bytes: the engine decides
    assert outcome.up_to_date and outcome.reason == "no new records"
    assert (await ingest_push(workspace, dataset, dupes, engines=TEST_ENGINES)).reason == MEMO

    assert (
        await ingest_push(workspace, dataset, first, engines=TEST_ENGINES)
    ).reason == MEMO  # both remembered
    assert await rows(dataset, "id", "value") == [(1, "a")]

    # In a new process the repeated file starts no engine at all.
    result = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-c",
            "from odfd.cli.main import main\n"
            f"code = main(['ingest', '--root', {str(workspace.root)!r}, 'ledger', {str(first)!r}])\n"
            "from verifier.engine.spark import session\n"
            "print(code, session.is_running())\n",
        ],
        capture_output=True,
        cwd=REPO,
        env=dict(os.environ),
        timeout=120,
        check=True,
    )
    assert result.stdout.decode().split() == ["0", "False"]
    assert f"Skipped: ledger: {first}: {MEMO}" in result.stderr.decode()


async def test_a_snapshot_answers_the_file_it_was_just_set_to(
    workspace: Workspace, tmp_path: Path
) -> None:
    dataset = await create(workspace, root_snapshot("snap", READ, SNAPSHOT))
    state = write(tmp_path / "s.csv", "event_time,id,value\n2024-01-01T00:00:00Z,1,a\n")
    changed = write(tmp_path / "t.csv", "event_time,id,value\n2024-01-01T00:00:00Z,1,b\n")
    assert not (await ingest_push(workspace, dataset, state, engines=TEST_ENGINES)).up_to_date
    assert (await ingest_push(workspace, dataset, state, engines=TEST_ENGINES)).reason == MEMO
    assert (
        await ingest_push(workspace, dataset, changed, engines=TEST_ENGINES)
    ).num_records == 2  # -C, +C
