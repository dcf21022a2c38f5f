"""Two ingests into one dataset at once: the one that loses the race for the head retries once.

A real race: both ingests read the same head, run their Spark work concurrently on the session
and commit by compare-and-swap; whichever commits second finds the head moved and is run again
on top of the winner, so both files' records land and exactly one retry happens.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odfd.coordinator.ingest import ingest_push
from odfd.coordinator.retry import retry_lost_race
from odfd.ingest.errors import IngestError
from storage.errors import RefCasError
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.pipeline.conftest import create, rows, write

READ = """        kind: Csv
        header: true
        schema:
          fields:
            - name: event_time
              type: timestamp
            - name: id
              type: int64"""


@pytest.mark.spark
async def test_the_loser_of_two_concurrent_ingests_retries_once_and_both_land(
    workspace: Workspace, tmp_path: Path
) -> None:
    dataset = await create(workspace, root_snapshot("race", READ))
    run_dir = workspace.root / "run"
    big = write(
        tmp_path / "big.csv",
        "event_time,id\n" + "".join(f"2024-01-01T00:00:00Z,{i}\n" for i in range(20_000)),
    )
    small = write(tmp_path / "small.csv", "event_time,id\n2024-01-02T00:00:00Z,-1\n")
    lost: list[RefCasError] = []
    attempts = 0

    async def ingest(path: Path) -> None:
        async def attempt() -> object:
            nonlocal attempts
            attempts += 1
            return await ingest_push(workspace, dataset, path)

        await retry_lost_race(attempt, lost.append)

    first = asyncio.create_task(ingest(big))
    # The first ingest has read the head once its transaction folder exists.
    while not (run_dir.is_dir() and any(run_dir.iterdir())):  # noqa: ASYNC110 (a folder, no event)
        await asyncio.sleep(0.005)
    await asyncio.gather(first, ingest(small))

    assert len(lost) == 1 and attempts == 3
    assert "another write won" in str(lost[0])
    ids = [i for (i,) in await rows(dataset, "id")]
    assert sorted(ids) == [-1, *range(20_000)]
    assert [o for (o,) in await rows(dataset, "offset")] == list(range(20_001))


async def test_a_second_loss_is_reported_as_it_is() -> None:
    calls = 0

    async def always_loses() -> None:
        nonlocal calls
        calls += 1
        raise RefCasError("ref refs/head", None, None)

    with pytest.raises(RefCasError, match="another write won"):
        await retry_lost_race(always_loses, lambda _: None)
    assert calls == 2

    async def fails_otherwise() -> None:
        raise IngestError("bad input")

    with pytest.raises(IngestError):  # only a lost race is retried
        await retry_lost_race(fails_otherwise, lambda _: pytest.fail("retried"))
