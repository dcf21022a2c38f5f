"""``verify``: audits datasets of a workspace in three layers and reports each separately.

Per dataset: metadata integrity (layer 1); if the chain holds, data integrity (layer 2); and for
derivative datasets, unless ``integrity_only``, reproducibility (layer 3). A transform is only
re-executed once every input it read has passed layers 1 and 2 — otherwise re-execution could
"confirm" data from tampered inputs — so inputs that are not audited anyway are checked first and
appear in the report with the role ``input``. With ``recursive``, the whole upstream graph is
audited in all layers, inputs before the datasets that read them, each dataset once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from protocol.identity import DatasetId, DatasetRef
from protocol.model import DatasetKind, Timestamp
from storage.catalog.audit_chains import AuditChainTable
from storage.catalog.audit_files import KEY_FILE, AuditFileTable, load_or_create_key
from storage.dataset import Dataset
from storage.workspace import Workspace
from verifier.audit_state import AuditState
from verifier.chain_memory import VerifiedChain
from verifier.data_layer import check_data
from verifier.engine.registry import Engines
from verifier.errors import VerifyUsageError
from verifier.metadata_layer import MetadataOutcome, check_metadata
from verifier.progress import NoProgress, Progress
from verifier.replay_layer import ReplaySettings, check_reproducibility
from verifier.report import (
    DatasetReport,
    Layer,
    LayerResult,
    Role,
    Status,
    VerifyReport,
    combine,
)
from verifier.selection import RangeRequest, selector_text
from verifier.workers import CheckRunner


def default_jobs() -> int:
    """All cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


AuditStateMode = Literal["off", "full", "incremental"]
"""``off``: neither read nor write saved audit state; ``full``: check every file and stamp the
ones that pass; ``incremental``: skip files whose stamp still matches (``verifier.audit_state``)."""


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    recursive: bool = False
    integrity_only: bool = False
    block_range: RangeRequest = field(default_factory=RangeRequest)
    """Limits layers 2 and 3 of the datasets named (not of their inputs); see ``selection``."""
    jobs: int = field(default_factory=default_jobs)
    """Files checked at once by layer 2."""
    sample_rows: int = 5
    scratch_dir: Path | None = None
    cross_engine: str | None = None
    """Also re-execute transforms with this engine (``--cross-engine``), for information."""
    audit_state: AuditStateMode = "off"

    def to_json(self) -> dict[str, Any]:
        return {
            "recursive": self.recursive,
            "integrityOnly": self.integrity_only,
            "from": selector_text(self.block_range.first),
            "to": selector_text(self.block_range.last),
            "jobs": self.jobs,
            "sampleRows": self.sample_rows,
            "crossEngine": self.cross_engine,
            "auditState": self.audit_state,
        }


async def verify(
    workspace: Workspace,
    refs: Sequence[DatasetRef | str],
    options: VerifyOptions | None = None,
    progress: Progress | None = None,
    *,
    engines: Engines,
) -> VerifyReport:
    """Audits the datasets ``refs`` name (``DatasetNotFoundError`` if one is unknown);
    transforms are re-executed in ``engines``."""
    options = options or VerifyOptions()
    if options.jobs < 1:
        raise VerifyUsageError(f"jobs must be at least 1, not {options.jobs}")
    options.block_range.check()
    started = Timestamp.now()
    targets: list[DatasetId] = []
    for ref in refs:
        record = await workspace.resolve(ref)
        if record.id not in targets:
            targets.append(record.id)
    progress = progress or NoProgress()
    async with CheckRunner(options.jobs, progress) as runner:
        audit = _Audit(workspace, options, engines, progress, runner)
        for dataset_id in targets:
            await audit.audit(dataset_id, Role.TARGET)
    return VerifyReport(started, Timestamp.now(), options.to_json(), tuple(audit.reports.values()))


@dataclass(frozen=True, slots=True)
class _Integrity:
    metadata: MetadataOutcome
    data: LayerResult

    @property
    def status(self) -> Status:
        return combine([self.metadata.result.status, self.data.status])


class _Audit:
    def __init__(
        self,
        workspace: Workspace,
        options: VerifyOptions,
        engines: Engines,
        progress: Progress,
        runner: CheckRunner,
    ) -> None:
        self.workspace = workspace
        self.options = options
        self.engines = engines
        self.progress = progress
        self.runner = runner
        self.reports: dict[DatasetId, DatasetReport] = {}
        """In the order audits finished: inputs come before the datasets reading them."""
        self._datasets: dict[DatasetId, tuple[Dataset, str]] = {}
        self._integrity: dict[tuple[DatasetId, RangeRequest], _Integrity] = {}
        self._in_progress: set[DatasetId] = set()
        self._files: AuditFileTable | None = None
        self._chains: AuditChainTable | None = None

    async def audit(self, dataset_id: DatasetId, role: Role) -> DatasetReport:
        """All layers of one dataset (its upstream first, with ``recursive``)."""
        existing = self.reports.get(dataset_id)
        if existing is not None:
            if role is not Role.TARGET or existing.role is Role.TARGET:
                return existing
            if existing.role is Role.UPSTREAM and self.options.block_range.is_whole_chain:
                # Already audited in every layer over the whole chain: only its role changes.
                self.reports[dataset_id] = dataclasses.replace(existing, role=Role.TARGET)
                return self.reports[dataset_id]
        self._in_progress.add(dataset_id)
        try:
            dataset, alias = await self._open(dataset_id)
            request = self.options.block_range if role is Role.TARGET else RangeRequest()
            integrity = await self._check_integrity(dataset_id, request)
            survey = integrity.metadata.survey
            if (
                self.options.recursive
                and survey is not None
                and integrity.metadata.result.status is Status.OK
            ):
                for input_id in survey.input_ids:
                    if input_id not in self._in_progress and await self._exists(input_id):
                        await self.audit(input_id, Role.UPSTREAM)
            reproducibility = await self._reproducibility(dataset_id, alias, integrity, role)
        finally:
            self._in_progress.discard(dataset_id)
        report = DatasetReport(
            dataset_id=dataset_id,
            alias=alias,
            kind=None if survey is None else survey.kind,
            role=role,
            head=None if survey is None else survey.head,
            block_range=None if survey is None else survey.block_range,
            metadata=integrity.metadata.result,
            data=integrity.data,
            reproducibility=reproducibility,
        )
        self.reports[dataset_id] = report
        return report

    async def _open(self, dataset_id: DatasetId) -> tuple[Dataset, str]:
        if dataset_id not in self._datasets:
            record = await self.workspace.resolve(DatasetRef(dataset_id))
            self._datasets[dataset_id] = (self.workspace.open_dataset(dataset_id), record.alias)
        return self._datasets[dataset_id]

    async def _exists(self, dataset_id: DatasetId) -> bool:
        return await self.workspace.try_resolve(DatasetRef(dataset_id)) is not None

    async def _open_input(self, dataset_id: DatasetId) -> Dataset:
        return (await self._open(dataset_id))[0]

    async def _check_integrity(self, dataset_id: DatasetId, request: RangeRequest) -> _Integrity:
        key = (dataset_id, request)
        if key not in self._integrity:
            dataset, alias = await self._open(dataset_id)
            remember = self.options.audit_state != "off"
            known = await self._known_chain(dataset_id) if remember else None
            metadata = await check_metadata(
                dataset, request, alias, self.progress, remember=remember, known=known
            )
            if metadata.verified is not None:
                await (await self._audit_chains()).save(
                    dataset_id, metadata.verified.head, metadata.verified.to_bytes()
                )
            if metadata.survey is None or metadata.result.status is not Status.OK:
                data = LayerResult.cannot_verify(Layer.DATA, "metadata integrity did not pass")
            else:
                state = await self._load_state(dataset_id)
                data = await check_data(
                    dataset, metadata.survey, alias, self.runner, self.progress, state
                )
                if state is not None:
                    await self._save_state(dataset_id, state)
            self._integrity[key] = _Integrity(metadata, data)
        return self._integrity[key]

    async def _audit_files(self) -> AuditFileTable:
        if self._files is None:
            self._files = AuditFileTable(self.workspace.catalog, await self._state_key())
        return self._files

    async def _audit_chains(self) -> AuditChainTable:
        if self._chains is None:
            self._chains = AuditChainTable(self.workspace.catalog, await self._state_key())
        return self._chains

    async def _state_key(self) -> bytes:
        key_path = self.workspace.layout.keys_dir / KEY_FILE
        return await asyncio.to_thread(load_or_create_key, key_path)

    async def _known_chain(self, dataset_id: DatasetId) -> VerifiedChain | None:
        """What an earlier audit remembered of the chain (incremental audits only)."""
        if self.options.audit_state != "incremental":
            return None
        row = await (await self._audit_chains()).load(dataset_id)
        if row is None:
            return None
        known = VerifiedChain.from_bytes(row[1])
        return known if known is not None and known.head == row[0] else None

    async def _load_state(self, dataset_id: DatasetId) -> AuditState | None:
        if self.options.audit_state == "off":
            return None
        known = await (await self._audit_files()).load(dataset_id)
        return AuditState(known, incremental=self.options.audit_state == "incremental")

    async def _save_state(self, dataset_id: DatasetId, state: AuditState) -> None:
        files = await self._audit_files()
        await files.forget(dataset_id, state.changed)
        await files.save(dataset_id, state.verified)

    async def _reproducibility(
        self, dataset_id: DatasetId, alias: str, integrity: _Integrity, role: Role
    ) -> LayerResult:
        layer = Layer.REPRODUCIBILITY
        survey = integrity.metadata.survey
        if role is Role.INPUT:
            return LayerResult.skipped(
                layer,
                "audited as an input (integrity only); --recursive re-executes its transforms too",
            )
        if survey is None or integrity.metadata.result.status is not Status.OK:
            return LayerResult.cannot_verify(layer, "metadata integrity did not pass")
        if survey.kind is not DatasetKind.DERIVATIVE:
            return LayerResult.skipped(
                layer, "a root dataset's data comes from outside; there is nothing to re-execute"
            )
        if self.options.integrity_only:
            return LayerResult.skipped(layer, "--integrity-only")
        if survey.transactions == 0:
            return LayerResult.skipped(layer, "no ExecuteTransform block in the range")
        unverified = await self._unverified_inputs(survey.input_ids)
        if unverified:
            return LayerResult.cannot_verify(
                layer, "inputs must verify first: " + "; ".join(unverified)
            )
        dataset, _ = await self._open(dataset_id)
        settings = ReplaySettings(
            self.engines,
            self.options.sample_rows,
            self.options.scratch_dir,
            self.options.cross_engine,
        )
        return await check_reproducibility(
            dataset, survey, alias, self._open_input, settings, self.progress
        )

    async def _unverified_inputs(self, input_ids: Sequence[DatasetId]) -> list[str]:
        """Why each input that did not pass layers 1 and 2 cannot be trusted (empty if all did)."""
        problems = []
        for input_id in input_ids:
            if not await self._exists(input_id):
                problems.append(f"input {input_id} is not in this workspace")
                continue
            if input_id in self._in_progress:
                problems.append(f"input {input_id} depends on this dataset (a cycle)")
                continue
            report = self.reports.get(input_id) or await self.audit(input_id, Role.INPUT)
            # The whole input, whatever range its own entry covers: any block may have been read.
            status = (await self._check_integrity(input_id, RangeRequest())).status
            if status is not Status.OK:
                problems.append(f"input {report.alias} did not pass integrity checks ({status})")
        return problems
