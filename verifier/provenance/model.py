"""What a provenance answer holds: per row, its block, its values, and either the input rows it
was derived from (with where-provenance of its columns) or the ingest that added it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class IngestInfo:
    """The ``AddData`` block that added a root dataset's row, and where it came from."""

    block_sequence: int
    block_hash: str
    system_time: str
    source: str
    """The source as its metadata describes it (a polling source's URL or glob, a push source)."""
    source_state: dict[str, str] | None
    """The block's ``newSourceState`` (e.g. an ETag, a Last-Modified time or a file name)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "block": {"sequenceNumber": self.block_sequence, "hash": self.block_hash},
            "systemTime": self.system_time,
            "source": self.source,
            "sourceState": self.source_state,
        }


@dataclass(slots=True)
class RowProvenance:
    """One row of a dataset and why it is there."""

    dataset: str
    offset: int
    block_sequence: int
    block_hash: str
    values: dict[str, Any] | None = None
    derived: bool = False
    """A derivative's row: ``inputs`` are its witnesses (when traced this far)."""
    inputs: list[RowProvenance] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)
    """Where-provenance: output column -> ``input.column`` it is a plain copy or rename of."""
    checked: bool = False
    """The transform, re-run on ``inputs`` alone, reproduced this row."""
    traced: bool = False
    """``inputs`` hold this row's witnesses (false past ``--depth`` or the row limit)."""
    ingest: IngestInfo | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "offset": self.offset,
            "block": {"sequenceNumber": self.block_sequence, "hash": self.block_hash},
            "derived": self.derived,
        }
        if self.values is not None:
            out["values"] = self.values
        if self.derived:
            out["traced"] = self.traced
            if self.traced:
                out["checked"] = self.checked
                out["columns"] = self.columns
                out["inputs"] = [row.to_json() for row in self.inputs]
        if self.ingest is not None:
            out["ingest"] = self.ingest.to_json()
        return out
