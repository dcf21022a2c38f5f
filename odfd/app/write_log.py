"""The audit trail of writes: every push received, ingest, pull, add, apply, delete, reset and
compaction is recorded with the account that did it, in the catalog's ``write_log`` and as one
line of the ``odfd.audit`` log (the daemon's log). ``odfd log DATASET --who`` shows which write
brought each block.

The servers pass the account their request's token speaks for (:class:`Actor` with ``via``
``http``); commands run on this machine act as the workspace's own ``admin`` account, with the
OS user who ran them in ``via`` (``cli:alice``); the daemon's own work is ``via`` ``daemon``."""

from __future__ import annotations

import getpass
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from storage.catalog.write_log import WriteLogTable, WriteRecord

if TYPE_CHECKING:
    from protocol.identity import DatasetId, Multihash
    from storage.workspace import Workspace

log = logging.getLogger("odfd.audit")

LOCAL_ACCOUNT = "admin"
"""The workspace's own account (``odfd.app.accounts.ADMIN_ACCOUNT``), which local commands act
as."""

ADDS_BLOCKS = frozenset({"push", "ingest", "pull", "add", "apply", "compact"})
"""Writes whose new head was written by them (a reset or delete only moves or drops a head)."""


@dataclass(frozen=True, slots=True)
class Actor:
    account: str
    via: str


_ACTING: ContextVar[Actor | None] = ContextVar("odfd_acting", default=None)


@contextmanager
def acting(actor: Actor) -> Iterator[None]:
    """Commands run within act as ``actor``: the daemon runs an admin socket client's commands
    as the subject its socket peer or token was taken for."""
    reset = _ACTING.set(actor)
    try:
        yield
    finally:
        _ACTING.reset(reset)


def local_actor() -> Actor:
    """A command run on this machine: the workspace's account, and who ran it (or, in the
    daemon, whom the admin socket took its client for: :func:`acting`)."""
    given = _ACTING.get()
    if given is not None:
        return given
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return Actor(LOCAL_ACCOUNT, f"cli:{user}")


DAEMON = Actor(LOCAL_ACCOUNT, "daemon")


async def record_write(
    workspace: Workspace,
    actor: Actor,
    action: str,
    target: str,
    *,
    dataset_id: DatasetId | None = None,
    old_head: Multihash | None = None,
    new_head: Multihash | None = None,
) -> None:
    """Adds one write to the trail (a write that changed nothing is not one)."""
    if dataset_id is not None and old_head == new_head and action in ADDS_BLOCKS:
        return
    record = WriteRecord(
        datetime.now(UTC),
        action,
        actor.account,
        actor.via,
        target,
        None if dataset_id is None else str(dataset_id),
        None if old_head is None else str(old_head),
        None if new_head is None else str(new_head),
    )
    await WriteLogTable(workspace.catalog).add(record)
    log.info(
        "write: %s %s by %s via %s%s",
        action,
        target,
        actor.account,
        actor.via,
        "" if new_head is None and old_head is None else f" (head {old_head} -> {new_head})",
    )


async def writes_of(workspace: Workspace, dataset_id: DatasetId) -> list[WriteRecord]:
    """The writes of a dataset, oldest first."""
    return await WriteLogTable(workspace.catalog).of_dataset(str(dataset_id))


async def writes_to(workspace: Workspace, target: str) -> list[WriteRecord]:
    """The writes to a dataset alias (a deleted dataset's too) or resource, oldest first."""
    return await WriteLogTable(workspace.catalog).of_target(target)


class BlockWriters:
    """Which write brought each block, for a walk of the chain newest first: a block is the
    work of the first write whose new head it is, and so are the blocks below it down to that
    write's old head; blocks before the trail began (or moved by hand) have none."""

    def __init__(self, writes: Iterable[WriteRecord]) -> None:
        self._by_head: dict[str, WriteRecord] = {}
        for write in writes:
            if write.action in ADDS_BLOCKS and write.new_head is not None:
                self._by_head.setdefault(write.new_head, write)
        self._current: WriteRecord | None = None

    def writer(self, block_hash: str) -> WriteRecord | None:
        """The write of ``block_hash``, the next block of a newest-first walk."""
        found = self._by_head.get(block_hash)
        if found is not None:
            self._current = found
        elif self._current is not None and block_hash == self._current.old_head:
            self._current = None
        return self._current
