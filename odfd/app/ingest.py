"""``ingest``: push data from files into a root dataset through its push source, one transaction
per file, retried on top of a head another writer moved first.

Called by ``odfd ingest`` in its own process and by the daemon for a thin client
(``odfd.daemon.commands``): the request and the events have a stable JSON form, and this module
imports the ingest machinery only when it runs, so a client that only builds a request or shows
events pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from odfd.app.forwarding import Request

if TYPE_CHECKING:
    from pathlib import Path

    from odfd.app.node import Node


@dataclass(frozen=True, slots=True)
class IngestFile:
    """One file to ingest: where it is (absolute for a request sent to the daemon) and what the
    user called it (the name status lines show)."""

    path: str
    label: str


@dataclass(frozen=True, slots=True)
class IngestRequest(Request):
    command: ClassVar[str] = "ingest"
    dataset: str
    files: tuple[IngestFile, ...]
    source_name: str | None = None
    event_time: str | None = None
    """RFC 3339; the event time of records that carry none (default: the system time)."""
    input_format: str | None = None


@dataclass(frozen=True, slots=True)
class FileIngested(Event):
    name: ClassVar[str] = "fileIngested"
    dataset: str
    file: str
    records: int
    head: str


@dataclass(frozen=True, slots=True)
class FileSkipped(Event):
    """The file brought nothing new (the source's memo saw it already, or it holds no record)."""

    name: ClassVar[str] = "fileSkipped"
    dataset: str
    file: str
    reason: str


@dataclass(frozen=True, slots=True)
class IngestRetrying(Event):
    """Another write moved the dataset's head first: the file is ingested again on top of it."""

    name: ClassVar[str] = "ingestRetrying"
    dataset: str
    file: str
    head: str


EVENTS: tuple[type[Event], ...] = (FileIngested, FileSkipped, IngestRetrying)


def staging_folder(workspace_root: Path) -> Path:
    """Where data handed to an ingest is staged (``odfd ingest``'s stdin, a body pushed to the
    server): the workspace's folder of transactions in progress, whose leftovers ``odfd system
    gc`` removes."""
    from odfd.coordinator.commit import RUN_DIR

    return workspace_root / RUN_DIR


Around = Callable[[str], AbstractAsyncContextManager[object]]
"""Wraps each file's work, given a label (the CLI's status line); none by default."""


async def ingest(
    node: Node, request: IngestRequest, sink: EventSink, around: Around | None = None
) -> None:
    """Ingests ``request.files`` in order, each one transaction; an event says what each did.
    A failure stops at the file it names, the ones before stay committed."""
    from pathlib import Path

    from odfd.app.write_log import local_actor, record_write
    from odfd.coordinator.ingest import IngestOutcome, ingest_push
    from odfd.coordinator.retry import retry_lost_race
    from protocol.model import Timestamp
    from storage.errors import RefCasError

    workspace = node.workspace
    event_time = None if request.event_time is None else Timestamp.parse_rfc3339(request.event_time)
    dataset = await workspace.get_dataset(request.dataset)
    for file in request.files:

        async def attempt(file: IngestFile = file) -> IngestOutcome:
            scope = (
                nullcontext()
                if around is None
                else around(f"ingest {request.dataset}: {file.label}")
            )
            async with scope:
                return await ingest_push(
                    workspace,
                    dataset,
                    Path(file.path),
                    engines=node.engines,
                    source_name=request.source_name,
                    event_time=event_time,
                    input_format=request.input_format,
                )

        def retrying(lost: RefCasError, file: IngestFile = file) -> None:
            sink.emit(IngestRetrying(request.dataset, file.label, str(lost.actual)))

        outcome = await retry_lost_race(attempt, retrying)
        if outcome.up_to_date:
            sink.emit(FileSkipped(outcome.dataset, file.label, str(outcome.reason)))
        else:
            await record_write(
                workspace,
                local_actor(),
                "ingest",
                outcome.dataset,
                dataset_id=dataset.id,
                old_head=outcome.old_head,
                new_head=outcome.new_head,
            )
            sink.emit(
                FileIngested(
                    outcome.dataset, file.label, outcome.num_records, str(outcome.new_head)
                )
            )
