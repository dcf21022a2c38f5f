"""The seam every fetch step implements: get the next piece of external data, or learn there is none.

Source state (RFC-009) makes repeated pulls cheap and exact: each fetcher stores in it what it
needs to take only new data next time (an ETag, a modification time, the last file taken, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from protocol.model import SourceState, Timestamp

#: ``sourceName`` of the polling source's state, as the reference writes it.
POLLING_SOURCE_NAME = "default"
KIND_ETAG = "odf/etag"
KIND_LAST_MODIFIED = "odf/last-modified"

#: Chunk size for copying fetched bytes.
CHUNK = 1 << 20


class Receipt(Protocol):
    """What a source must be told once the transaction that took its data is settled: a source
    that delivers at least once (MQTT) acknowledges only committed data, so a failed or killed
    ingest loses nothing (the source delivers it again)."""

    def settle(self, committed: bool) -> None:
        """``committed``: the data is durably in the dataset; otherwise leave it for redelivery."""
        ...


@dataclass(frozen=True, slots=True)
class Fetched:
    """New data was fetched."""

    path: Path
    """The file to read; for local sources the original file (nothing is copied)."""
    owned: bool
    """Whether ``path`` is a temporary copy the caller should delete when done."""
    source_state: SourceState | None
    source_event_time: Timestamp | None
    has_more: bool
    """More data is waiting (a glob matched several new files); pull again to take the next."""
    receipt: Receipt | None = None
    """Called once the transaction is settled (sources that hold data until acknowledged)."""


StepT_contra = TypeVar("StepT_contra", contravariant=True)


class Fetcher(Protocol[StepT_contra]):
    """Fetches data for one kind of fetch step; blocking (callers run it off the event loop)."""

    def fetch(
        self,
        step: StepT_contra,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        """The next data of ``step`` after ``prev_state``; ``None`` when there is nothing new.

        Files the fetcher creates go under ``work_dir``, which the caller removes afterwards.
        """
        ...
