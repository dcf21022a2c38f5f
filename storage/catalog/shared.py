"""One SQLite connection shared by the tasks of a process, without their statements mixing.

A connection has one transaction at a time: while a task holds ``BEGIN … COMMIT`` open across
awaits, a statement another task runs on the same connection would silently join it (see the
other task's uncommitted rows, be rolled back with it). So every statement goes through
``SharedConnection``: it waits for the lock that a transaction holds from ``BEGIN`` to its end,
unless the running task owns that transaction (a context variable marks ownership, so calls
inside ``transaction()`` and tasks it spawns do not deadlock). A ``transaction()`` opened inside
one that the task owns is a savepoint: rolled back alone, committed with the outer one.

Each statement is queued on aiosqlite's worker thread, which runs them in order, before the
await that can be cancelled; so a ``ROLLBACK`` or ``COMMIT`` queued before the lock is released
always runs before the next holder's statements.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import aiosqlite

from storage.errors import DiskFullError

_OWNED: ContextVar[frozenset[object]] = ContextVar("odfd_catalog_transactions", default=frozenset())
"""Markers of the transactions the running task (or the task that spawned it) has open."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What a write statement did."""

    rowcount: int
    lastrowid: int | None


class SharedConnection:
    """Statements and transactions on one aiosqlite connection (autocommit mode)."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._lock = asyncio.Lock()
        self._open: object | None = None  # marker of the open top-level transaction
        self._savepoints = 0  # only grows: each savepoint's name is unique

    @property
    def raw(self) -> aiosqlite.Connection:
        return self._db

    def _owned(self) -> bool:
        return self._open is not None and self._open in _OWNED.get()

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """Run while no other task's transaction is open."""
        if self._owned():
            yield
            return
        async with self._lock:
            yield

    async def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Changes:
        async with self._turn():
            with _full_disk_as_error():
                cursor = await self._db.execute(sql, parameters)
            try:
                return Changes(cursor.rowcount, cursor.lastrowid)
            finally:
                await cursor.close()

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        async with self._turn():
            with _full_disk_as_error():
                await (await self._db.executemany(sql, rows)).close()

    async def fetchone(self, sql: str, parameters: Sequence[Any] = ()) -> aiosqlite.Row | None:
        async with self._turn(), self._db.execute(sql, parameters) as cursor:
            return await cursor.fetchone()

    async def fetchall(self, sql: str, parameters: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        async with self._turn(), self._db.execute(sql, parameters) as cursor:
            return list(await cursor.fetchall())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``BEGIN IMMEDIATE … COMMIT`` holding the connection; rolled back if the body raises.
        Inside a transaction this task owns, a savepoint instead."""
        if self._owned():
            async with self._savepoint():
                yield
            return
        async with self._lock:
            marker = object()
            token = _OWNED.set(_OWNED.get() | {marker})
            self._open = marker
            try:
                try:
                    with _full_disk_as_error():
                        await self._db.execute("BEGIN IMMEDIATE")
                    yield
                    with _full_disk_as_error():
                        await self._db.execute("COMMIT")
                except BaseException:
                    await self._rollback()
                    raise
            finally:
                self._open = None
                _OWNED.reset(token)

    async def _rollback(self) -> None:
        try:
            await self._db.execute("ROLLBACK")
        except sqlite3.OperationalError:
            # BEGIN failed (busy) or COMMIT went through before a cancellation reached us:
            # nothing is open, which is all a rollback has to ensure.
            if self._db.in_transaction:
                raise

    @asynccontextmanager
    async def _savepoint(self) -> AsyncIterator[None]:
        self._savepoints += 1
        name = f"odfd_nested_{self._savepoints}"  # so a rollback never reaches an outer one
        try:
            await self._db.execute(f"SAVEPOINT {name}")
            yield
            await self._db.execute(f"RELEASE {name}")
        except BaseException:
            try:
                await self._db.execute(f"ROLLBACK TO {name}")
                await self._db.execute(f"RELEASE {name}")
            except sqlite3.OperationalError as error:
                if "no such savepoint" not in str(
                    error
                ):  # released before a cancellation reached us
                    raise
            raise

    async def close(self) -> None:
        async with self._turn():
            await self._db.close()


@contextmanager
def _full_disk_as_error() -> Iterator[None]:
    """SQLite's "database or disk is full" as the ``DiskFullError`` every other write raises."""
    try:
        yield
    except sqlite3.OperationalError as err:
        if getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            raise DiskFullError("no space left on device writing the catalog") from err
        raise
