"""Updating a root dataset: one ingest transaction from a polling or a push source.

A transaction fetches (polling sources only) and prepares the new data, has the ingest engine
read, preprocess and merge it and write the slice (``IngestEngine.ingest``), and commits an ``AddData`` (RFC-014 fields: previous offset and
checkpoint, the slice, the watermark, the source state) — preceded by a ``SetDataSchema`` when
the slice's schema is new. If anything fails before the commit, the dataset is unchanged.

The watermark of a root dataset is the greatest event time seen so far, unless set explicitly
(``set_watermark``), which commits an ``AddData`` that only moves the watermark.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfd.coordinator.commit import StagedFiles, commit_transaction, transaction_dir
from odfd.coordinator.ingest_memo import NoOpMemo, input_hash, key_at, memo_applies
from odfd.coordinator.schema import ingest_schema_event
from odfd.ingest.errors import IngestError, SourceError
from odfd.ingest.fetch import POLLING_SOURCE_NAME, fetch
from odfd.ingest.formats import read_step_for
from odfd.ingest.prepare import prepare
from odfd.ingest.read import read_input
from protocol.identity import Multihash
from protocol.model import (
    AddData,
    AddPushSource,
    MergeStrategyAppend,
    MergeStrategySnapshot,
    ReadStepEsriShapefile,
    SetPollingSource,
    SourceCachingForever,
    SourceState,
    Timestamp,
)
from storage.chain.rules import ChainState
from storage.dataset import Dataset
from storage.workspace import Workspace
from verifier.engine.columns import Vocab
from verifier.engine.contract import IngestEngine, IngestRequest, IngestResult
from verifier.engine.inputs import all_slices, arrow_schema_of, slice_paths
from verifier.engine.output import WrittenSlice
from verifier.engine.registry import Engines


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    """What one ingest transaction did (``up_to_date`` when nothing was committed)."""

    dataset: str
    up_to_date: bool
    old_head: Multihash | None = None
    new_head: Multihash | None = None
    num_records: int = 0
    has_more: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Source:
    """The read, preprocess and merge steps of the source data comes through."""

    read: Any
    preprocess: Any
    merge: Any


async def pull_root(
    workspace: Workspace,
    dataset: Dataset,
    *,
    engines: Engines,
    fetch_uncacheable: bool = False,
    system_time: Timestamp | None = None,
) -> list[IngestOutcome]:
    """Ingests from the polling source until it has nothing more (a glob may hold many files)."""
    outcomes = [
        await ingest_polling(
            workspace,
            dataset,
            engines=engines,
            fetch_uncacheable=fetch_uncacheable,
            system_time=system_time,
        )
    ]
    while outcomes[-1].has_more and not outcomes[-1].up_to_date:
        outcomes.append(
            await ingest_polling(workspace, dataset, engines=engines, system_time=system_time)
        )
    return outcomes


async def ingest_polling(
    workspace: Workspace,
    dataset: Dataset,
    *,
    engines: Engines,
    fetch_uncacheable: bool = False,
    system_time: Timestamp | None = None,
) -> IngestOutcome:
    """One transaction from the dataset's polling source."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    polling = state.polling_source
    if polling is None:
        hint = " (it takes pushed data: use `odfd ingest`)" if state.push_sources else ""
        raise SourceError(f"{alias} has no polling source{hint}")
    prev_state = state.last_source_state if _is_polling_state(state.last_source_state) else None
    outcome, _ = await _poll(
        engines,
        workspace,
        dataset,
        alias,
        state,
        polling,
        prev_state,
        fetch_uncacheable=fetch_uncacheable,
        system_time=system_time,
        chain_keeps_state=True,
    )
    return outcome


async def ingest_external(
    workspace: Workspace,
    dataset: Dataset,
    source: SetPollingSource,
    prev_state: SourceState | None,
    *,
    engines: Engines,
    fetch_uncacheable: bool = False,
    system_time: Timestamp | None = None,
) -> tuple[IngestOutcome, SourceState | None]:
    """One transaction from a polling source kept outside the chain (an RFC-018 ``Source``
    resource): nothing of ``source`` is committed, not even its source state, which is returned
    for the caller to keep (the same as ``prev_state`` when nothing was fetched)."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    return await _poll(
        engines,
        workspace,
        dataset,
        alias,
        state,
        source,
        prev_state,
        fetch_uncacheable=fetch_uncacheable,
        system_time=system_time,
        chain_keeps_state=False,
    )


async def _poll(
    engines: Engines,
    workspace: Workspace,
    dataset: Dataset,
    alias: str,
    state: ChainState,
    polling: SetPollingSource,
    prev_state: SourceState | None,
    *,
    fetch_uncacheable: bool,
    system_time: Timestamp | None,
    chain_keeps_state: bool,
) -> tuple[IngestOutcome, SourceState | None]:
    if state.last_offset is not None:
        if isinstance(getattr(polling.fetch, "cache", None), SourceCachingForever):
            reason = "the source is cached forever and was already ingested"
            return IngestOutcome(alias, True, reason=reason), prev_state
        if prev_state is None and not fetch_uncacheable:
            reason = (
                "the source gives no ETag or Last-Modified; pass --fetch-uncacheable to re-fetch it"
            )
            return IngestOutcome(alias, True, reason=reason), prev_state
    time = system_time or Timestamp.now()
    async with transaction_dir(workspace.root) as work:
        fetched = await asyncio.to_thread(fetch, polling.fetch, prev_state, work, time)
        if fetched is None:
            return IngestOutcome(alias, True, reason="the source has not changed"), prev_state
        committed = False
        try:
            created = await asyncio.to_thread(
                prepare, list(polling.prepare or ()), fetched.path, work
            )
            path = created[-1] if created else fetched.path
            source = _Source(polling.read, polling.preprocess, polling.merge)
            outcome = await _transaction(
                engines,
                dataset,
                alias,
                state,
                source,
                path,
                work,
                system_time=time,
                source_event_time=fetched.source_event_time or time,
                source_state=fetched.source_state if chain_keeps_state else None,
                has_more=fetched.has_more,
            )
            committed = True
            return outcome, fetched.source_state or prev_state
        finally:
            if fetched.receipt is not None:
                await asyncio.to_thread(fetched.receipt.settle, committed)


async def ingest_push(
    workspace: Workspace,
    dataset: Dataset,
    path: Path,
    *,
    engines: Engines,
    source_name: str | None = None,
    event_time: Timestamp | None = None,
    system_time: Timestamp | None = None,
    input_format: str | None = None,
) -> IngestOutcome:
    """One transaction of pushed data (a file) through one of the dataset's push sources;
    ``input_format`` reads the file as that format instead of the source's."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    source = _push_source(state, source_name, alias)
    if input_format is not None:
        source = _Source(read_step_for(source.read, input_format), source.preprocess, source.merge)
    time = system_time or Timestamp.now()
    if await asyncio.to_thread(_empty_input, path, source.read) and not _empty_is_a_snapshot(
        source, state
    ):
        # nothing to read: answered without starting Spark
        return IngestOutcome(alias, True, reason="the input is empty (0 bytes)")
    memo = None
    if dataset.id is not None and memo_applies(
        source.merge, source.preprocess, Vocab.of(state.vocab)
    ):
        memo = NoOpMemo(workspace.root, dataset.id)
        digest = await input_hash(path)
        if await memo.holds(key_at(state.head, digest, source_name, input_format)):
            return IngestOutcome(
                alias, True, reason="no new records (this file added nothing at this head before)"
            )
    async with transaction_dir(workspace.root) as work:
        outcome = await _transaction(
            engines,
            dataset,
            alias,
            state,
            source,
            path,
            work,
            system_time=time,
            source_event_time=event_time or time,
            source_state=None,
            has_more=False,
        )
    if memo is not None:
        # Not added now, or just added: either way the same file adds nothing at this head.
        head = state.head if outcome.up_to_date else outcome.new_head
        await memo.record(key_at(head, digest, source_name, input_format))
    return outcome


async def ingest_file_external(
    workspace: Workspace,
    dataset: Dataset,
    path: Path,
    steps: tuple[Any, Any, Any],
    *,
    engines: Engines,
    system_time: Timestamp | None = None,
) -> IngestOutcome:
    """One transaction of a file read by the ``(read, preprocess, merge)`` steps of a source kept
    outside the chain (records pushed to an RFC-018 ``RestEndpoint`` Source)."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    time = system_time or Timestamp.now()
    async with transaction_dir(workspace.root) as work:
        return await _transaction(
            engines,
            dataset,
            alias,
            state,
            _Source(*steps),
            path,
            work,
            system_time=time,
            source_event_time=time,
            source_state=None,
            has_more=False,
        )


def _empty_is_a_snapshot(source: _Source, state: ChainState) -> bool:
    """Whether an empty file still says something: under a Snapshot merge with a declared read
    schema it is an empty snapshot, which retracts every record still present (the reference
    reads it as an empty frame of the read schema and merges it)."""
    declared = getattr(source.read, "schema", None) is not None or bool(
        getattr(source.read, "ddl_schema", None)
    )
    return (
        isinstance(source.merge, MergeStrategySnapshot)
        and declared
        and state.last_offset is not None
    )


def _empty_input(path: Path, read: object) -> bool:
    """Whether the input holds nothing; refuses what is not a file (a shapefile may be a folder)."""
    if path.is_dir() and isinstance(read, ReadStepEsriShapefile):
        return False
    if not path.is_file():
        raise IngestError(f"{path} is not a file")
    return path.stat().st_size == 0


async def set_watermark(
    dataset: Dataset, watermark: Timestamp, *, system_time: Timestamp | None = None
) -> IngestOutcome:
    """Commits an ``AddData`` that only moves the watermark (nothing new arrived, time passed)."""
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    if state.polling_source is None and not state.push_sources:
        raise SourceError(
            f"{alias} has no source: only root datasets with a source take a watermark"
        )
    if state.last_watermark is not None and watermark <= state.last_watermark:
        return IngestOutcome(alias, True, reason=f"the watermark is already {state.last_watermark}")
    event = AddData(
        prev_checkpoint=state.last_checkpoint,
        prev_offset=state.last_offset,
        new_checkpoint=None,
        new_watermark=watermark,
        new_source_state=state.last_source_state,
    )
    commit = await dataset.commit_event(
        event, expected_head=state.head, system_time=system_time or Timestamp.now()
    )
    return IngestOutcome(alias, False, commit.old_head, commit.new_head)


async def _transaction(
    engines: Engines,
    dataset: Dataset,
    alias: str,
    state: ChainState,
    source: _Source,
    path: Path,
    work: Path,
    *,
    system_time: Timestamp,
    source_event_time: Timestamp,
    source_state: SourceState | None,
    has_more: bool,
) -> IngestOutcome:
    needs_history = not isinstance(source.merge, MergeStrategyAppend)
    history = (
        await slice_paths(dataset, await all_slices(dataset, state.head)) if needs_history else ()
    )
    preprocess, preprocess_engine = (
        engines.for_transform(source.preprocess, f"{alias}: preprocess")
        if source.preprocess is not None
        else (None, None)
    )
    request = functools.partial(
        IngestRequest,
        dataset_alias=alias,
        read=source.read,
        preprocess=preprocess,
        preprocess_engine=preprocess_engine,
        merge=source.merge,
        vocab=Vocab.of(state.vocab),
        dataset_schema=arrow_schema_of(state.schema) if state.schema is not None else None,
        history=history,
        start_offset=0 if state.last_offset is None else state.last_offset + 1,
        system_time=system_time,
        source_event_time=source_event_time,
        out_path=work / f"slice-{uuid.uuid4().hex}.parquet",
        work=work,
    )
    staged = await asyncio.to_thread(_stage, engines.for_ingest(), request, source.read, path, work)
    slice_schema = None if staged is None else staged.schema
    written = None if staged is None else staged.new_data

    events: list[Any] = []
    if slice_schema is not None:
        set_schema = ingest_schema_event(state.schema, slice_schema, alias)
        if set_schema is not None:
            events.append(set_schema)
    watermark = _watermark(state.last_watermark, written)
    new_source_state = source_state if source_state is not None else state.last_source_state
    advances = (
        written is not None
        or watermark != state.last_watermark
        or new_source_state != state.last_source_state
    )
    if not advances and not events:
        return IngestOutcome(alias, True, has_more=has_more, reason="no new records")
    if advances:
        events.append(
            AddData(
                prev_checkpoint=state.last_checkpoint,
                prev_offset=state.last_offset,
                new_data=None if written is None else written.as_data_slice(),
                new_checkpoint=None,
                new_watermark=watermark,
                new_source_state=new_source_state,
            )
        )
    commit = await commit_transaction(
        dataset,
        events,
        StagedFiles(data_file=written.path if written else None),
        expected_head=state.head,
        system_time=system_time,
    )
    return IngestOutcome(
        alias,
        False,
        commit.old_head,
        commit.new_head,
        written.num_records if written else 0,
        has_more=has_more,
    )


def _stage(
    engine: IngestEngine,
    request: Callable[..., IngestRequest],
    read: object,
    path: Path,
    work: Path,
) -> IngestResult | None:
    """The engine's part of a transaction, on ``path`` made ready for reading. Blocking."""
    with read_input(read, path, work) as input:
        return engine.ingest(request(input=input))


def _watermark(previous: Timestamp | None, written: WrittenSlice | None) -> Timestamp | None:
    """The greatest event time seen so far; it never moves back."""
    if written is None or written.max_event_time is None:
        return previous
    if previous is None or written.max_event_time > previous:
        return written.max_event_time
    return previous


def _push_source(state: ChainState, name: str | None, alias: str) -> _Source:
    if state.push_sources:
        if name is None:
            if len(state.push_sources) > 1:
                raise SourceError(
                    f"{alias} has several push sources ({', '.join(sorted(state.push_sources))}); "
                    "choose one with --source-name"
                )
            name = next(iter(state.push_sources))
        source: AddPushSource | None = state.push_sources.get(name)
        if source is None:
            raise SourceError(
                f"{alias} has no push source '{name}' (has: {', '.join(sorted(state.push_sources))})"
            )
        return _Source(source.read, source.preprocess, source.merge)
    polling: SetPollingSource | None = state.polling_source
    if polling is not None and name is None:
        return _Source(polling.read, polling.preprocess, polling.merge)
    raise SourceError(f"{alias} has no push source" + (f" '{name}'" if name else ""))


def _is_polling_state(state: SourceState | None) -> bool:
    return state is not None and state.source_name == POLLING_SOURCE_NAME
