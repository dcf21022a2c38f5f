"""FetchStep::FilesGlob: local files matching a glob, one per pull.

The source state remembers the last file ingested; the next pull takes the next one by name (or by
the event time in its name).
"""

from __future__ import annotations

import glob as globlib
import os
from pathlib import Path

from odfd.ingest.errors import FetchError, IngestError
from odfd.ingest.event_time import event_time_from_path
from odfd.ingest.fetch.base import KIND_ETAG, POLLING_SOURCE_NAME, Fetched
from odfd.ingest.template import render
from protocol.model import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    FetchStepFilesGlob,
    SourceOrdering,
    SourceState,
    Timestamp,
)


class FilesGlobFetcher:
    """Fetches ``FetchStepFilesGlob`` sources."""

    def fetch(
        self,
        step: FetchStepFilesGlob,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        return _fetch_glob(step, prev_state, system_time)


def _fetch_glob(
    step: FetchStepFilesGlob, prev: SourceState | None, now: Timestamp
) -> Fetched | None:
    if isinstance(step.event_time, EventTimeSourceFromMetadata):
        raise IngestError(
            "fetch.filesGlob: event time cannot come fromMetadata; use fromPath or fromSystemTime"
        )
    pattern = render(step.path, "fetch.path")
    files = [
        Path(p)
        for p in globlib.glob(os.path.expanduser(pattern), recursive=True)
        if os.path.isfile(p)
    ]
    by_time = step.order == SourceOrdering.BY_EVENT_TIME
    if by_time and not isinstance(step.event_time, EventTimeSourceFromPath):
        raise IngestError("fetch.filesGlob: order ByEventTime needs eventTime fromPath")

    def key(path: Path) -> tuple:
        if by_time:
            return (event_time_from_path(step.event_time, path.name), path.name)  # type: ignore[arg-type]  # by_time is true only for a FromPath event time
        return (path.name,)

    last_key = None
    if prev is not None and prev.kind == KIND_ETAG:
        last_key = key(Path(prev.value))
    pending = sorted((f for f in files if last_key is None or key(f) > last_key), key=key)
    if not pending:
        if prev is not None:
            return None
        raise FetchError(f"fetch.filesGlob: no files match {pattern}")
    first = pending[0]
    if isinstance(step.event_time, EventTimeSourceFromPath):
        source_time = event_time_from_path(step.event_time, first.name)
    else:
        source_time = now
    state = SourceState(source_name=POLLING_SOURCE_NAME, kind=KIND_ETAG, value=first.name)
    return Fetched(first, False, state, source_time, has_more=len(pending) > 1)
