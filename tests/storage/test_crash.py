"""Kill a writer with SIGKILL at many points; the dataset must always reopen at a valid head."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.model import AddData, SetDataSchema, SetInfo
from storage.chain import validate_chain
from storage.dataset import Dataset
from storage.layout import object_name
from tests.storage.crash_writer import BATCH

KILLS = 20
REPO = Path(__file__).resolve().parents[2]


def _start_writer(root: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.crash_writer", str(root)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        pytest.fail(f"writer did not start: {line!r}")
    return proc


def _objects_match_their_names(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.name.startswith("."):
            continue  # staging file of an interrupted write: never visible as an object
        digest = hashlib.sha3_256(entry.read_bytes()).hexdigest()
        assert entry.name == "f1620" + digest, f"{entry} does not hash to its name"


@pytest.mark.slow
async def test_sigkill_at_random_points_never_leaves_a_broken_dataset(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    rng = random.Random(1234)
    last_sequence = -1
    sequences = []
    for _ in range(KILLS):
        proc = _start_writer(root)
        await asyncio.sleep(rng.uniform(0.0, 0.35))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        dataset = Dataset.open_local(root)
        head = await dataset.chain.head()
        assert head is not None
        assert (root / "blocks" / object_name(head)).is_file(), "refs/head names a missing block"
        state = await validate_chain(
            dataset.chain, data=dataset.data, checkpoints=dataset.checkpoints
        )
        assert state.head == head
        # Rounds append BATCH SetInfo blocks with one head move, then one AddData: the head is
        # only ever at the end of a batch or of a data commit, never inside an append.
        event = (await dataset.chain.get_block(head)).event
        if isinstance(event, SetInfo):
            assert event.description.endswith(f"item {BATCH - 1}"), event.description
        else:
            assert isinstance(event, (AddData, SetDataSchema)), event
        assert state.sequence_number >= last_sequence
        last_sequence = state.sequence_number
        sequences.append(state.sequence_number)
        _objects_match_their_names(root / "blocks")
        _objects_match_their_names(root / "data")
    assert len(set(sequences)) > KILLS // 3, f"the writer made too little progress: {sequences}"
