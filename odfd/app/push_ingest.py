"""Pushing raw data into a root dataset's push source over the network (the node's
``POST /{dataset}/ingest``), as the reference's ``PushIngestDataUseCase``.

The body arrives as a file with the media type its sender declared. A media type of the
source's own format reads the data with the source's read step; another supported one is
transcoded: read with that format's defaults and the source's schema (``read_step_for``, the
reference's ``get_compatible_read_config``); no media type reads it as the source declares. The
ingest is one transaction of the coordinator (``ingest_push``): it commits everything or
nothing, and its engine work runs on a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.app.write_log import Actor, local_actor, record_write
from odfd.coordinator.ingest import IngestOutcome, ingest_push
from odfd.coordinator.retry import retry_lost_race
from odfd.coordinator.schema import IncompatibleSchemaError
from odfd.errors import OdfdError
from odfd.ingest.errors import IngestError
from protocol.model import Timestamp

if TYPE_CHECKING:
    from odfd.app.node import Node
    from protocol.identity import DatasetId
    from storage.errors import RefCasError

log = logging.getLogger(__name__)

#: The media types the reference accepts, and the format (``odfd.ingest.formats``) of each.
MEDIA_TYPES: dict[str, str] = {
    "text/csv": "csv",
    "application/json": "json",
    "application/x-ndjson": "ndjson",
    "application/geo+json": "geojson",
    "application/x-ndgeojson": "ndgeojson",
    "application/vnd.apache.parquet": "parquet",
    "application/vnd.shp": "shapefile",
    "x-gis/x-shapefile": "shapefile",
}


#: The file extensions of each media type, as the reference's format registry lists them (an
#: upload's media type, when it declared none, is its file name's).
FILE_EXTENSIONS: dict[str, str] = {
    "csv": "text/csv",
    "json": "application/json",
    "ndjson": "application/x-ndjson",
    "geojson": "application/geo+json",
    "ndgeojson": "application/x-ndgeojson",
    "parquet": "application/vnd.apache.parquet",
    "shp": "application/vnd.shp",
    "shx": "application/vnd.shp",
}


def media_type_of_file_name(name: str) -> str | None:
    """The media type a file name's extension says (None: no extension the node knows)."""
    _, dot, extension = name.rpartition(".")
    return FILE_EXTENSIONS.get(extension.lower()) if dot else None


class UnsupportedMediaTypeError(IngestError):
    """The body's media type is none the node reads."""


class IngestRefusedError(OdfdError):
    """The pushed data cannot go into the dataset (no such source, unreadable data, a schema the
    dataset's cannot take): the sender's to fix, the dataset unchanged."""


def format_of_media_type(media_type: str | None) -> str | None:
    """The input format a ``Content-Type`` names (its parameters, e.g. ``charset``, ignored);
    ``None`` when there is none: the data is read as the source declares."""
    if media_type is None or not media_type.strip():
        return None
    essence = media_type.split(";", 1)[0].strip().lower()
    found = MEDIA_TYPES.get(essence)
    if found is None:
        raise UnsupportedMediaTypeError(
            f"media type {essence!r} is not supported; send one of {', '.join(MEDIA_TYPES)}"
        )
    return found


@dataclass(frozen=True, slots=True)
class PushIngestOptions:
    source_name: str | None = None
    """The push source to ingest through (needed when the dataset has several)."""
    media_type: str | None = None
    """The body's ``Content-Type``; ``None``: the source's own format."""
    event_time: Timestamp | None = None
    """Event time of records that carry none (default: the ingest's system time)."""


@dataclass(slots=True)
class IngestLocks:
    """One lock per dataset, so ingests pushed at once into one dataset commit one after the
    other instead of racing for its head (a writer outside this process is still met by the
    coordinator's compare-and-swap and one retry)."""

    _locks: dict[DatasetId, asyncio.Lock] = field(default_factory=dict)

    def of(self, dataset_id: DatasetId) -> asyncio.Lock:
        lock = self._locks.get(dataset_id)
        if lock is None:
            lock = self._locks[dataset_id] = asyncio.Lock()
        return lock


async def push_ingest(
    node: Node,
    dataset_id: DatasetId,
    path: Path,
    options: PushIngestOptions,
    *,
    locks: IngestLocks | None = None,
    actor: Actor | None = None,
) -> IngestOutcome:
    """Ingests the data in ``path`` into the dataset through its push source, as ``actor``
    (default: a local command) in the audit trail; raises :class:`UnsupportedMediaTypeError` or
    :class:`IngestRefusedError` (an ``IngestError`` of the source or its data, an
    ``IncompatibleSchemaError``, worded as they are) with the dataset unchanged."""
    input_format = format_of_media_type(options.media_type)
    dataset = node.workspace.open_dataset(dataset_id)

    async def attempt() -> IngestOutcome:
        return await ingest_push(
            node.workspace,
            dataset,
            path,
            engines=node.engines,
            source_name=options.source_name,
            event_time=options.event_time,
            input_format=input_format,
        )

    def retrying(lost: RefCasError) -> None:
        log.info(
            "ingest into %s: another write moved its head to %s first; ingesting again on it",
            dataset_id,
            lost.actual,
        )

    try:
        if locks is None:
            outcome = await retry_lost_race(attempt, retrying)
        else:
            async with locks.of(dataset_id):
                outcome = await retry_lost_race(attempt, retrying)
    except UnsupportedMediaTypeError:
        raise
    except (IngestError, IncompatibleSchemaError) as err:
        raise IngestRefusedError(str(err)) from err
    if not outcome.up_to_date:
        await record_write(
            node.workspace,
            actor or local_actor(),
            "ingest",
            outcome.dataset,
            dataset_id=dataset_id,
            old_head=outcome.old_head,
            new_head=outcome.new_head,
        )
    return outcome
