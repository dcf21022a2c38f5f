"""The system columns a dataset's vocabulary names, and the operation types of its ``op`` column."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class Op(IntEnum):
    """RFC-015 operation types, stored in the ``op`` column as int32 (as the reference writes)."""

    APPEND = 0
    RETRACT = 1
    CORRECT_FROM = 2
    CORRECT_TO = 3


@dataclass(frozen=True, slots=True)
class Vocab:
    """A dataset vocabulary with the spec's defaults filled in."""

    offset: str = "offset"
    op: str = "op"
    system_time: str = "system_time"
    event_time: str = "event_time"

    @classmethod
    def of(cls, vocab: Any | None) -> Vocab:
        """From a ``DatasetVocabulary`` or ``SetVocab`` model object (``None`` = all defaults)."""
        if vocab is None:
            return cls()
        names = {
            "offset": getattr(vocab, "offset_column", None),
            "op": getattr(vocab, "operation_type_column", None),
            "system_time": getattr(vocab, "system_time_column", None),
            "event_time": getattr(vocab, "event_time_column", None),
        }
        return cls(**{key: value for key, value in names.items() if value})
