"""Tasks sharing one ``Catalog`` (as the daemon's syncs and audits do): no statement of one task
joins another task's open transaction, a failed transaction takes only its own writes, and
concurrent writers all land."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from protocol.identity import DatasetId
from protocol.model import DatasetKind
from storage.catalog import Catalog
from storage.catalog.audit_records import AuditRecord
from storage.catalog.audits import AuditTable
from storage.catalog.mirrors import MirrorTable
from tests.storage.chain_builder import fake_hash

# How long a task gets to run a statement that must instead wait for another task's transaction.
# Waiting longer only slows the test; a wrong implementation lets the statement through at once.
BLOCKED_FOR = 0.2


class Abort(Exception):
    """Makes a test transaction roll back."""


@pytest.fixture
async def catalog(tmp_path: Path) -> AsyncIterator[Catalog]:
    async with await Catalog.open(tmp_path / "catalog.sqlite") as opened:
        yield opened


def _id(n: int) -> DatasetId:
    return DatasetId.new_seeded(n.to_bytes(4, "big"))


async def _assert_waits(task: asyncio.Task[Any], failure: str) -> None:
    """``task``, which is about to run a statement, must still be waiting after ``BLOCKED_FOR``."""
    done, _ = await asyncio.wait({task}, timeout=BLOCKED_FOR)
    assert task not in done, failure


@asynccontextmanager
async def _rolled_back(catalog: Catalog) -> AsyncIterator[None]:
    """A transaction of this task that the end of the block rolls back."""
    with pytest.raises(Abort):
        async with catalog.transaction():
            yield
            raise Abort


async def test_a_rolled_back_transaction_keeps_another_tasks_write(catalog: Catalog) -> None:
    a_wrote = asyncio.Event()

    async def writer_b() -> None:
        await a_wrote.wait()
        await catalog.add_remote("b", "https://b.example")

    b = asyncio.create_task(writer_b())
    async with _rolled_back(catalog):
        await catalog.add_remote("a", "https://a.example")
        a_wrote.set()
        await _assert_waits(b, "B wrote inside A's open transaction")
    await b
    assert await catalog.list_remotes() == [("b", "https://b.example")]
    assert not catalog.connection.in_transaction


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_other_tasks_read_only_committed_rows(catalog: Catalog, commit: bool) -> None:
    written = asyncio.Event()

    async def reader() -> DatasetId | None:
        await written.wait()
        record = await catalog.find_by_alias("new")
        return None if record is None else record.id

    read = asyncio.create_task(reader())
    async with catalog.transaction() if commit else _rolled_back(catalog):
        await catalog.add_dataset(_id(1), "new", DatasetKind.ROOT, None, None)
        assert await catalog.find_by_alias("new") is not None  # the owner sees its own write
        written.set()
        await _assert_waits(read, "a reader saw an open transaction")
    assert await read == (_id(1) if commit else None)


async def test_nested_transaction_is_a_savepoint(catalog: Catalog) -> None:
    async with asyncio.timeout(10):  # a non-reentrant lock would hang here
        async with catalog.transaction():
            await catalog.add_remote("outer", "https://outer.example")
            async with _rolled_back(catalog):
                await catalog.add_remote("inner", "https://inner.example")
            async with catalog.transaction():
                await catalog.add_dataset(_id(3), "kept", DatasetKind.ROOT, None, None)
                await catalog.set_remote_aliases(_id(3), "pull", ["https://kept.example"])
    assert await catalog.list_remotes() == [("outer", "https://outer.example")]
    assert await catalog.remote_aliases(_id(3), "pull") == ["https://kept.example"]


async def test_a_task_spawned_in_a_transaction_does_not_own_a_later_one(catalog: Catalog) -> None:
    go = asyncio.Event()

    async def late_writer() -> None:
        await go.wait()
        await catalog.add_remote("late", "https://late.example")

    async with catalog.transaction():
        spawned = asyncio.create_task(late_writer())  # inherits the context of this transaction
        await catalog.add_remote("first", "https://first.example")

    async with _rolled_back(catalog):
        await catalog.add_remote("doomed", "https://doomed.example")
        go.set()
        await _assert_waits(spawned, "a stale owner joined the transaction")
    await spawned
    assert [name for name, _ in await catalog.list_remotes()] == ["first", "late"]


async def test_a_cancelled_transaction_rolls_back_and_frees_the_connection(
    catalog: Catalog,
) -> None:
    wrote = asyncio.Event()

    async def stuck() -> None:
        async with catalog.transaction():
            await catalog.add_remote("cancelled", "https://cancelled.example")
            wrote.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(stuck())
    await wrote.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await catalog.add_remote("after", "https://after.example")
    assert await catalog.list_remotes() == [("after", "https://after.example")]
    assert not catalog.connection.in_transaction


async def test_concurrent_writers_all_land_while_others_roll_back(catalog: Catalog) -> None:
    mirrors, audits = MirrorTable(catalog), AuditTable(catalog)
    writers = 40
    now = datetime(2026, 1, 1, tzinfo=UTC)

    async def writer(n: int) -> None:
        dataset_id = _id(100 + n)
        await catalog.add_dataset(dataset_id, f"ds{n}", DatasetKind.ROOT, None, None)
        await asyncio.sleep(0)
        await catalog.update_head(dataset_id, fake_hash(f"head{n}"), n)
        await mirrors.add(f"m{n}", f"https://source.example/{n}", [], 60.0)
        await catalog.record_synced(dataset_id, "https://remote.example", fake_hash(f"remote{n}"))
        await audits.add(
            AuditRecord(
                dataset_id,
                f"ds{n}",
                "integrity",
                "test",
                fake_hash(f"head{n}"),
                now,
                now,
                "ok",
                "fine",
            ),
            keep=5,
        )

    async def failing(n: int) -> None:
        async with _rolled_back(catalog):
            await catalog.add_remote(f"failed{n}", "https://failed.example")
            await asyncio.sleep(0.001)
            await mirrors.add(f"failed{n}", "https://failed.example", [], 60.0)

    await asyncio.gather(*(task for n in range(writers) for task in (writer(n), failing(n))))

    records = {record.alias: record for record in await catalog.list_datasets()}
    assert sorted(records) == sorted(f"ds{n}" for n in range(writers))
    for n in range(writers):
        record = records[f"ds{n}"]
        assert record.head == fake_hash(f"head{n}") and record.head_sequence == n
        (state,) = await catalog.sync_states(record.id)
        assert state.remote == "https://remote.example"
        assert state.last_remote_head == fake_hash(f"remote{n}")
    assert sorted(m.name for m in await mirrors.list()) == sorted(f"m{n}" for n in range(writers))
    assert len(await audits.latest_all()) == writers
    assert await catalog.list_remotes() == []
