"""The memory buffers of ``RestEndpoint`` sources: records pushed over HTTP wait here until a
flow's ``Ingest`` task flushes them into the dataset.

Each record gets a sequence number. A flush takes a batch from the front and removes it only
once its commit succeeded (records pushed meanwhile, or dropped by ``DropOldest``, are told apart
by number), so a failed ingest loses nothing. A push that does not fit is refused whole under
``Reject`` (:class:`BufferFullError`); under ``DropOldest`` the oldest records make room and are
counted. The buffers live in the process that serves the endpoint and runs the flows (the
daemon): as the spec's ``Memory`` kind says, they do not survive a restart.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from odfd.errors import OdfdError
from odfd.sources.spec import BufferPolicy


class BufferFullError(OdfdError):
    """A push that does not fit in a ``Reject`` buffer; nothing of it was taken."""


@dataclass(frozen=True, slots=True)
class Batch:
    records: tuple[bytes, ...]
    """One JSON document per record."""
    last_seq: int


@dataclass(frozen=True, slots=True)
class Accepted:
    records: int
    dropped: int
    """Older records dropped to make room (``DropOldest``)."""
    buffered: int


@dataclass
class SourceBuffer:
    name: str
    policy: BufferPolicy
    _records: deque[tuple[int, bytes, float]] = field(default_factory=deque)
    _next_seq: int = 0
    dropped_total: int = 0

    def push(self, records: list[bytes]) -> Accepted:
        capacity = self.policy.capacity
        if len(records) > capacity or (
            not self.policy.drop_oldest and len(self._records) + len(records) > capacity
        ):
            raise BufferFullError(
                f"the buffer of Source {self.name} holds {len(self._records)} of {capacity} "
                f"records; {len(records)} more do not fit (overflowPolicy Reject): nothing of "
                "this push was taken, retry once the flow has ingested"
            )
        dropped = 0
        while len(self._records) + len(records) > capacity:
            self._records.popleft()
            dropped += 1
        now = time.monotonic()
        for record in records:
            self._records.append((self._next_seq, record, now))
            self._next_seq += 1
        self.dropped_total += dropped
        return Accepted(len(records), dropped, len(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def oldest_age(self) -> float | None:
        """Seconds the oldest waiting record has waited."""
        return None if not self._records else time.monotonic() - self._records[0][2]

    def peek(self, limit: int | None = None) -> Batch | None:
        if not self._records:
            return None
        taken = list(self._records)[:limit] if limit else list(self._records)
        return Batch(tuple(r for _, r, _ in taken), taken[-1][0])

    def settle(self, batch: Batch) -> None:
        """The batch was committed: forget its records (those still here)."""
        while self._records and self._records[0][0] <= batch.last_seq:
            self._records.popleft()


class SourceBuffers:
    """One buffer per ``RestEndpoint`` Source, by resource id; re-made (empty) when its policy
    changes."""

    def __init__(self) -> None:
        self._buffers: dict[str, SourceBuffer] = {}

    def of(self, source_id: str, name: str, policy: BufferPolicy) -> SourceBuffer:
        buffer = self._buffers.get(source_id)
        if buffer is None or buffer.policy != policy:
            kept = buffer._records if buffer is not None else deque()
            buffer = self._buffers[source_id] = SourceBuffer(name, policy)
            for _, record, _ in kept:  # a new policy keeps what waits, as far as it fits
                try:
                    buffer.push([record])
                except BufferFullError:
                    break
        buffer.name = name
        return buffer

    def get(self, source_id: str) -> SourceBuffer | None:
        return self._buffers.get(source_id)

    def pending(self, source_name: str) -> tuple[int, float | None]:
        """Records waiting in the named Source's buffer, and the oldest one's age in seconds."""
        for buffer in self._buffers.values():
            if buffer.name.lower() == source_name.lower():
                return len(buffer), buffer.oldest_age()
        return 0, None
