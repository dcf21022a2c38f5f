"""Two ingests into one dataset at once: the one that loses the race for the head retries once.

A real race: both ingests read the same head, run their Spark work concurrently on the session
and commit by compare-and-swap; whichever commits second finds the head moved and is run again
on top of the winner, so both files' records land and exactly one retry happens.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from odfd.cli.main import main
from odfd.coordinator.ingest import ingest_push, set_watermark
from odfd.coordinator.retry import retry_lost_race
from odfd.ingest.errors import IngestError
from protocol.model import Timestamp
from storage.errors import RefCasError
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
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
            return await ingest_push(workspace, dataset, path, engines=TEST_ENGINES)

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


@pytest.mark.spark
def test_odfd_ingest_says_it_lost_the_race_and_ingests_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``odfd ingest`` loses to a watermark moved while its Spark work runs, and says so."""
    root = str(tmp_path / "ws")
    manifest = write(tmp_path / "race.yaml", root_snapshot("race", READ))
    assert main(["-q", "init", "--root", root]) == 0
    with open(tmp_path / "ws" / "config.toml", "a") as config:
        config.write(TEST_SPARK_CONFIG)
    assert main(["-q", "add", "--root", root, str(manifest)]) == 0
    big = write(
        tmp_path / "big.csv",
        "event_time,id\n" + "".join(f"2024-01-01T00:00:00Z,{i}\n" for i in range(20_000)),
    )
    run_dir = tmp_path / "ws" / "run"
    codes: list[int] = []
    loser = threading.Thread(
        target=lambda: codes.append(main(["ingest", "--root", root, "race", str(big)]))
    )
    capsys.readouterr()
    loser.start()
    deadline = time.monotonic() + 120
    while not (run_dir.is_dir() and any(run_dir.iterdir())):  # it has read the head
        assert loser.is_alive() and time.monotonic() < deadline, capsys.readouterr().err
        time.sleep(0.005)

    async def winner() -> None:
        async with await Workspace.open(tmp_path / "ws") as workspace:
            dataset = await workspace.get_dataset("race")
            outcome = await set_watermark(dataset, Timestamp.of(2030, 1, 1))
            assert not outcome.up_to_date

    asyncio.run(winner())
    loser.join()
    err = capsys.readouterr().err
    assert codes == [0], err
    assert f"Retrying: race: {big}: another write moved its head to " in err
    assert "first; ingesting again on top of it" in err
    assert f"Ingested: race: {big}: 20000 record(s)" in err
