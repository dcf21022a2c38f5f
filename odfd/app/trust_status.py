"""How ``odfd status`` reports signed heads: per dataset and per mirror, whether its head is
signed by its owner, by when, and whether the source looks frozen (no newer signed head for
longer than the mirror's bound; the owner re-signs even a quiet head, see docs/signed-heads.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from odfd.config import format_duration
from protocol.identity import Multihash
from storage.catalog.signed_head_records import SeenSignedHead


def trust_entry(
    seen: SeenSignedHead | None,
    local_head: Multihash | None,
    freeze_after: float,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``state`` is ``unsigned`` (never seen signed), ``signed`` or ``frozen`` (a received signed
    head older than ``freeze_after`` seconds; 0 disables); a node's own datasets never freeze."""
    if seen is None:
        return {"state": "unsigned"}
    signed = seen.signed
    now = now or datetime.now(UTC)
    age = max((now - signed.signed_at.to_datetime()).total_seconds(), 0.0)
    frozen = seen.source is not None and freeze_after > 0 and age > freeze_after
    return {
        "state": "frozen" if frozen else "signed",
        "signedHead": signed.head.to_multibase(),
        "signedSequenceNumber": signed.sequence_number,
        "signedAt": signed.signed_at.to_rfc3339(),
        "headIsSigned": local_head == signed.head,
        "source": seen.source,
        "ageSeconds": round(age, 3),
        "freezeAfter": format_duration(freeze_after) if freeze_after > 0 else None,
    }
