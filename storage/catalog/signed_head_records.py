"""The ``signed_heads`` and ``mirror_freeze_bounds`` tables' rows, and the queries that read them
whole, shared by :class:`storage.catalog.signed_heads.SignedHeadTable` and the CLI's synchronous
:mod:`storage.catalog.sync_reader`. Imports no aiosqlite, and the signature code only once a row
is read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from protocol.identity import DatasetId
from storage.catalog.columns import from_text

if TYPE_CHECKING:
    from protocol.transfer.signed_head import SignedHead


@dataclass(frozen=True, slots=True)
class SeenSignedHead:
    signed: SignedHead
    source: str | None
    """The URL it was pulled from; ``None`` when this node signed it."""
    received_at: datetime


ALL_SIGNED_HEADS_QUERY = "SELECT document, source, received_at, dataset_id FROM signed_heads"
"""Every signed head: a row for :func:`seen_signed_head`, then the dataset id."""
FREEZE_BOUNDS_QUERY = "SELECT mirror, freeze_seconds FROM mirror_freeze_bounds"


def signed_heads(rows: Iterable[Sequence[Any]]) -> dict[DatasetId, SeenSignedHead]:
    """Each dataset's signed head, from :data:`ALL_SIGNED_HEADS_QUERY`'s rows."""
    return {
        DatasetId.parse(row[3]): seen_signed_head(row, f"catalog signed head of {row[3]}")
        for row in rows
    }


def freeze_bounds(rows: Iterable[Sequence[Any]]) -> dict[str, float]:
    """Mirror name (lower case) -> its own freeze bound in seconds, from :data:`FREEZE_BOUNDS_QUERY`."""
    return {str(row[0]).lower(): float(row[1]) for row in rows}


def seen_signed_head(row: Sequence[Any], where: str) -> SeenSignedHead:
    document, source, received_at = row[0], row[1], row[2]
    data = document if isinstance(document, bytes) else str(document).encode("utf-8")
    received = from_text(received_at)
    assert received is not None  # NOT NULL column
    return SeenSignedHead(_parse(data, where), source, received)


@lru_cache(maxsize=1 << 14)
def _parse(data: bytes, where: str) -> SignedHead:
    """``parse_signed_head``, remembered: the same bytes always verify the same way, and
    ``odfd status`` on a node of 10,000 signed mirrors would check 10,000 signatures each time.
    A document that fails raises each time (exceptions are not cached)."""
    from protocol.transfer.signed_head import parse_signed_head

    return parse_signed_head(data, where)
