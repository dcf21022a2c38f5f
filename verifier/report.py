"""The verification report: one entry per dataset, one result per layer, findings naming blocks.

The JSON form (``VerifyReport.to_json``) is a stable, versioned contract: the daemon stores and
serves it, and ``docs/verify-report.md`` documents every key. Keys are always present (``null``
when empty) so consumers never have to guess; adding keys is a compatible change, renaming or
removing one bumps :data:`REPORT_VERSION`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from protocol.identity import DatasetId, Multihash
from protocol.model import DatasetKind, Timestamp

REPORT_KIND = "odfd.VerifyReport"
REPORT_VERSION = 1

#: Findings kept per layer; the rest are only counted (a broken dataset can have millions).
MAX_FINDINGS_PER_LAYER = 100


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"
    CANNOT_VERIFY = "cannot-verify"
    NOT_REEXECUTABLE = "not-re-executable"
    """Integrity held, but a transform needs an engine this node does not have (e.g. Flink)."""
    SKIPPED = "skipped"


class Layer(StrEnum):
    METADATA = "metadata"
    DATA = "data"
    REPRODUCIBILITY = "reproducibility"

    @property
    def title(self) -> str:  # type: ignore[override]  # shadows str.title: the display name
        return _LAYER_TITLES[self]


_LAYER_TITLES = {
    Layer.METADATA: "metadata integrity",
    Layer.DATA: "data integrity",
    Layer.REPRODUCIBILITY: "reproducibility",
}


class Role(StrEnum):
    TARGET = "target"
    """Named on the command line."""
    UPSTREAM = "upstream"
    """Reached through the inputs of a target with ``--recursive``: audited like a target."""
    INPUT = "input"
    """An input of a target whose integrity had to hold before re-executing the target's transforms."""


def combine(statuses: Iterable[Status]) -> Status:
    """The status of a whole made of parts: any failure fails it, then any doubt, then a missing
    engine; skips don't count."""
    seen = set(statuses)
    for status in (Status.FAILED, Status.CANNOT_VERIFY, Status.NOT_REEXECUTABLE, Status.OK):
        if status in seen:
            return status
    return Status.SKIPPED


def exit_code_of(status: Status) -> int:
    """0 all verified, 1 something failed verification, 2 something could not be verified,
    3 everything else verified but some transforms need an engine this node does not have."""
    return {Status.FAILED: 1, Status.CANNOT_VERIFY: 2, Status.NOT_REEXECUTABLE: 3}.get(status, 0)


@dataclass(frozen=True, slots=True)
class BlockLocation:
    sequence_number: int | None
    hash: Multihash | None

    def __str__(self) -> str:
        number = "#?" if self.sequence_number is None else f"#{self.sequence_number}"
        return f"block {number} {self.hash}" if self.hash is not None else f"block {number}"

    def to_json(self) -> dict[str, Any]:
        return {
            "sequenceNumber": self.sequence_number,
            "hash": None if self.hash is None else str(self.hash),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing that did not verify: what rule, where (block, file, field) and what was seen."""

    status: Status
    """``failed`` (evidence the dataset is wrong) or ``cannot-verify`` (no evidence either way)."""
    rule: str
    message: str
    block: BlockLocation | None = None
    file: str | None = None
    """Path relative to the dataset folder, e.g. ``data/f1620…``."""
    field: str | None = None
    """Path of the metadata field concerned, e.g. ``event.newData.logicalHash``."""
    expected: str | None = None
    actual: str | None = None
    details: Mapping[str, Any] | None = None
    """JSON values specific to the rule (offset interval, sample of differing rows...)."""

    def __str__(self) -> str:
        where = [str(self.block)] if self.block is not None else []
        if self.file is not None:
            where.append(self.file)
        prefix = f"{', '.join(where)}: " if where else ""
        return f"{prefix}[{self.rule}] {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "rule": self.rule,
            "message": self.message,
            "block": None if self.block is None else self.block.to_json(),
            "file": self.file,
            "field": self.field,
            "expected": self.expected,
            "actual": self.actual,
            "details": None if self.details is None else dict(self.details),
        }


@dataclass(frozen=True, slots=True)
class CrossEngineCheck:
    """One transaction re-executed with another engine than its own (``--cross-engine``)."""

    block: BlockLocation
    result: str
    """``agree`` (same logical hash and offsets as recorded), ``differ`` or ``error``."""
    message: str
    sample: Mapping[str, Any] | None = None
    """For ``differ``: the differing records, as in a ``logical-hash`` finding's ``sample``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "block": self.block.to_json(),
            "result": self.result,
            "message": self.message,
            "sample": None if self.sample is None else dict(self.sample),
        }


@dataclass(frozen=True, slots=True)
class CrossEngineResult:
    """Transactions re-executed with ``engine``: informative, never a pass or a failure."""

    engine: str
    checks: tuple[CrossEngineCheck, ...] = ()

    def count(self, result: str) -> int:
        return sum(1 for check in self.checks if check.result == result)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "agree": self.count("agree"),
            "differ": self.count("differ"),
            "error": self.count("error"),
            "transactions": [check.to_json() for check in self.checks],
        }


@dataclass(frozen=True, slots=True)
class LayerResult:
    layer: Layer
    status: Status
    reason: str | None = None
    """Why the layer was skipped or could not be verified as a whole."""
    checked: Mapping[str, int] = field(default_factory=dict)
    """What was examined, e.g. ``{"blocks": 12}`` or ``{"slices": 3, "bytes": 4096, ...}``."""
    findings: tuple[Finding, ...] = ()
    findings_omitted: int = 0
    duration_seconds: float = 0.0
    cross_engine: CrossEngineResult | None = None
    """Reproducibility only, with ``--cross-engine``."""

    @classmethod
    def skipped(cls, layer: Layer, reason: str) -> LayerResult:
        return cls(layer, Status.SKIPPED, reason)

    @classmethod
    def cannot_verify(cls, layer: Layer, reason: str) -> LayerResult:
        return cls(layer, Status.CANNOT_VERIFY, reason)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "reason": self.reason,
            "checked": dict(self.checked),
            "findings": [f.to_json() for f in self.findings],
            "findingsOmitted": self.findings_omitted,
            "durationSeconds": round(self.duration_seconds, 3),
            "crossEngine": None if self.cross_engine is None else self.cross_engine.to_json(),
        }


class LayerRecorder:
    """Collects a layer's findings and counters while it runs (on the event loop's thread)."""

    def __init__(self, layer: Layer) -> None:
        self.layer = layer
        self.checked: dict[str, int] = {}
        self._findings: list[Finding] = []
        self._omitted = 0
        self._statuses: set[Status] = set()
        self.cross_engine: CrossEngineResult | None = None

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def add(self, finding: Finding) -> None:
        self._statuses.add(finding.status)
        if len(self._findings) < MAX_FINDINGS_PER_LAYER:
            self._findings.append(finding)
        else:
            self._omitted += 1

    def result(self, duration_seconds: float) -> LayerResult:
        status = combine([Status.OK, *self._statuses])
        findings = sorted(self._findings, key=_finding_order)
        return LayerResult(
            self.layer,
            status,
            None,
            dict(self.checked),
            tuple(findings),
            self._omitted,
            duration_seconds,
            self.cross_engine,
        )


def _finding_order(finding: Finding) -> tuple[int, str]:
    number = (
        finding.block.sequence_number
        if finding.block and finding.block.sequence_number is not None
        else -1
    )
    return (number, finding.file or "")


@dataclass(frozen=True, slots=True)
class BlockRange:
    """Blocks ``first`` to ``last``, both included, of one chain."""

    first: BlockLocation
    last: BlockLocation

    def contains(self, sequence_number: int) -> bool:
        assert self.first.sequence_number is not None and self.last.sequence_number is not None
        return self.first.sequence_number <= sequence_number <= self.last.sequence_number

    def to_json(self) -> dict[str, Any]:
        return {"from": self.first.to_json(), "to": self.last.to_json()}


@dataclass(frozen=True, slots=True)
class DatasetReport:
    dataset_id: DatasetId
    alias: str
    kind: DatasetKind | None
    role: Role
    head: BlockLocation | None
    block_range: BlockRange | None
    """The blocks whose data and transforms were checked (the whole chain unless limited)."""
    metadata: LayerResult
    data: LayerResult
    reproducibility: LayerResult

    @property
    def layers(self) -> tuple[LayerResult, LayerResult, LayerResult]:
        return (self.metadata, self.data, self.reproducibility)

    @property
    def status(self) -> Status:
        return combine(layer.status for layer in self.layers)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": str(self.dataset_id),
            "alias": self.alias,
            "kind": None if self.kind is None else self.kind.value.lower(),
            "role": str(self.role),
            "status": str(self.status),
            "head": None if self.head is None else self.head.to_json(),
            "range": None if self.block_range is None else self.block_range.to_json(),
            "layers": {str(layer.layer): layer.to_json() for layer in self.layers},
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    started_at: Timestamp
    finished_at: Timestamp
    options: Mapping[str, Any]
    """The options as the user gave them (JSON values), for the record."""
    datasets: tuple[DatasetReport, ...]

    @property
    def status(self) -> Status:
        return combine(d.status for d in self.datasets)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.status)

    def to_json(self) -> dict[str, Any]:
        layer_counts = {str(s): 0 for s in Status}
        for dataset in self.datasets:
            for layer in dataset.layers:
                layer_counts[str(layer.status)] += 1
        return {
            "kind": REPORT_KIND,
            "version": REPORT_VERSION,
            "startedAt": self.started_at.to_rfc3339(),
            "finishedAt": self.finished_at.to_rfc3339(),
            "options": dict(self.options),
            "status": str(self.status),
            "exitCode": self.exit_code,
            "layerCounts": layer_counts,
            "datasets": [d.to_json() for d in self.datasets],
        }

    def dumps(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json(), indent=indent, ensure_ascii=False)
