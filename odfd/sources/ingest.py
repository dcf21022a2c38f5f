"""Running a ``Source`` resource into datasets: the work of a flow's ``Ingest`` task.

A polling Source is fetched with its config values filled in at run time (secrets decrypted only
now, in memory) and ingested as the chain's own polling source would be, except that nothing of
the source is committed: no ``SetPollingSource``, no source state. The source state (ETag,
Last-Modified, offsets) is kept with the resource instead, per dataset, in its ``SourceState``
condition, so it survives restarts. A ``RestEndpoint`` Source's buffered records are ingested in
batches of ``targetSliceRecords`` (one slice each) and leave the buffer only once committed; a
polling Source's fetch is one slice, whatever ``targetSliceRecords`` says.

Every failure is a :class:`SourceRunError` whose message has had each secret value taken out, so
neither the run's record, the flow's status, nor a log line can carry one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfd.app.node_secrets import NodeSecrets
from odfd.app.resource_types import SOURCE
from odfd.app.resources import CONDITION_BASE
from odfd.app.value_refs import ResolvedValues, ValueRefError, resolve_values
from odfd.coordinator.commit import transaction_dir
from odfd.coordinator.ingest import IngestOutcome, ingest_external, ingest_file_external
from odfd.errors import OdfdError
from odfd.ingest.fetch import POLLING_SOURCE_NAME
from odfd.ingest.formats import read_step_for
from odfd.sources.buffers import SourceBuffers
from odfd.sources.render import Redactor, polling_source
from odfd.sources.spec import SourceDefinition, SourceSpecError
from protocol.codec.tree import from_tree
from protocol.errors import DecodeError, OdfError
from protocol.identity import DatasetId
from protocol.model import IngestParams, MergeStrategyAppend, ReadStepNdJson, SourceState
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.node import Node

SOURCE_STATE = CONDITION_BASE + "SourceState"
"""Condition of a Source: the source state of each dataset it feeds, by dataset id."""
CONFIG = "spec.config."
"""Where a Source's references to its values are."""
MAX_POLLS = 1000
"""Transactions one run makes from a source that keeps saying it has more (a glob of files)."""

Moved = Callable[[DatasetId], Awaitable[None]]


class SourceRunError(OdfdError):
    """An ingest from a Source that failed; its message holds no secret value."""


def ingest_params(params: dict[str, Any]) -> IngestParams:
    """An ``Ingest`` task's ``params`` (the spec's ``IngestParams``; unknown fields refused)."""
    try:
        found: IngestParams = from_tree(params, "IngestParams", "", "params")
    except DecodeError as err:
        raise SourceRunError(str(err).lstrip(": ")) from None
    if found.target_slice_records is not None and found.target_slice_records < 1:
        raise SourceRunError("params.targetSliceRecords: must be at least 1")
    return found


async def find_source(resources: ResourceTable, ref: str) -> ResourceRecord:
    """A Source by id or ``[account/]name`` (a flow's ``Ingest`` task names it so)."""
    record = await resources.get(ref)
    if record is None or record.schema != SOURCE.schema:
        record = await resources.find(SOURCE.schema, ref)
    if record is None:
        raise SourceRunError(f"Source {ref!r} does not exist")
    return record


class SourceIngest:
    def __init__(self, node: Node, buffers: SourceBuffers, moved: Moved | None = None) -> None:
        self.node = node
        self.buffers = buffers
        self.moved = moved
        self.resources = ResourceTable(node.workspace.catalog)
        self.secrets = NodeSecrets(node.workspace.keys)

    async def run(
        self, source_ref: str, datasets: list[str], params: IngestParams
    ) -> list[IngestOutcome]:
        record = await find_source(self.resources, source_ref)
        redactor = Redactor(())
        try:
            source = SourceDefinition.from_record(record)
            values = await resolve_values(
                self.node.workspace, record.id, f"Source {record.name}", CONFIG, self.secrets
            )
            redactor = Redactor(values.secrets)
            outcomes: list[IngestOutcome] = []
            for alias in datasets:
                found = await self.node.workspace.catalog.find_by_alias(alias)
                if found is None:
                    raise SourceRunError(f"dataset {alias} does not exist")
                if source.pushed:
                    outcomes += await self._flush(source, found.id, params)
                else:
                    outcomes += await self._poll(record, source, found.id, values)
            return outcomes
        except SourceRunError as err:
            raise SourceRunError(redactor.redact(str(err))) from None
        except (SourceSpecError, ValueRefError) as err:
            raise SourceRunError(redactor.redact(str(err))) from None
        except (OdfdError, OdfError, OSError) as err:
            raise SourceRunError(
                redactor.redact(f"Source {record.name}: {type(err).__name__}: {err}")
            ) from None

    async def _poll(
        self,
        record: ResourceRecord,
        source: SourceDefinition,
        dataset_id: DatasetId,
        values: ResolvedValues,
    ) -> list[IngestOutcome]:
        polling = polling_source(source, values)
        dataset = self.node.workspace.open_dataset(dataset_id)
        outcomes = []
        prev = _stored_state(record, dataset_id)
        for _ in range(MAX_POLLS):
            outcome, state = await ingest_external(
                self.node.workspace, dataset, polling, prev, engines=self.node.engines
            )
            outcomes.append(outcome)
            if state != prev:
                await self._keep_state(record.id, dataset_id, state)
                prev = state
            if not outcome.up_to_date and self.moved is not None:
                await self.moved(dataset_id)
            if outcome.up_to_date or not outcome.has_more:
                break
        return outcomes

    async def _keep_state(
        self, source_id: str, dataset_id: DatasetId, state: SourceState | None
    ) -> None:
        record = await self.resources.get(source_id)
        if record is None:
            return
        condition = record.status.get("conditions", {}).get(SOURCE_STATE) or {}
        datasets = dict(condition.get("datasets") or {})
        if state is None:
            datasets.pop(str(dataset_id), None)
        else:
            datasets[str(dataset_id)] = {"kind": state.kind, "value": state.value}
        await self.resources.update_status(
            source_id, conditions={SOURCE_STATE: {"datasets": datasets} if datasets else None}
        )

    async def _flush(
        self, source: SourceDefinition, dataset_id: DatasetId, params: IngestParams
    ) -> list[IngestOutcome]:
        buffer = self.buffers.get(source.id)
        read = source.spec.read
        if not isinstance(read, ReadStepNdJson):
            read = read_step_for(read, "ndjson")
        merge = _merge_of(source)
        dataset = self.node.workspace.open_dataset(dataset_id)
        outcomes = []
        while buffer is not None and (batch := buffer.peek(params.target_slice_records)):
            async with transaction_dir(self.node.workspace.root) as work:
                path = work / "pushed.ndjson"
                await asyncio.to_thread(_write_lines, path, batch.records)
                outcome = await ingest_file_external(
                    self.node.workspace,
                    dataset,
                    path,
                    (read, source.spec.preprocess, merge),
                    engines=self.node.engines,
                )
            buffer.settle(batch)
            outcomes.append(outcome)
            if not outcome.up_to_date and self.moved is not None:
                await self.moved(dataset_id)
        return outcomes


def _merge_of(source: SourceDefinition) -> Any:
    return source.spec.merge if source.spec.merge is not None else MergeStrategyAppend()


def _stored_state(record: ResourceRecord, dataset_id: DatasetId) -> SourceState | None:
    condition = record.status.get("conditions", {}).get(SOURCE_STATE) or {}
    found = (condition.get("datasets") or {}).get(str(dataset_id))
    if not found:
        return None
    return SourceState(source_name=POLLING_SOURCE_NAME, kind=found["kind"], value=found["value"])


def _write_lines(path: Path, records: tuple[bytes, ...]) -> None:
    with path.open("wb") as out:
        for record in records:
            out.write(record)
            out.write(b"\n")
