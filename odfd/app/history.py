"""Rewriting a dataset's history: reset its head to an earlier block, compact its small slices
(a hard compaction, as the reference's ``kamu system compact --hard``).

Derivative datasets reading a compacted dataset would refer to blocks no longer in its history;
they are reset to their metadata first (their data dropped, recomputed from the new history on
their next pull), readers before what they read, so each step leaves the workspace consistent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Confirm, Event, EventSink
from odfd.app.write_log import Actor, local_actor, record_write
from storage.errors import StorageError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.coordinator.compact import CompactionOptions, CompactionPlan
    from protocol.identity import DatasetId, Multihash
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


@dataclass(frozen=True, slots=True)
class ResetResult:
    alias: str
    dropped: int
    """Blocks after the target block (0: the head was there already, nothing changed)."""


async def reset_dataset(
    node: Node, ref: str, block: Multihash, confirm: Confirm, *, actor: Actor | None = None
) -> ResetResult:
    """Moves the dataset's head back to ``block`` of its history (the blocks after it stay in
    the block store, unreferenced, until ``odfd system gc``); asks first, naming its readers;
    recorded as done by ``actor`` (default: a local command)."""
    workspace = node.workspace
    record = await workspace.resolve(ref)
    dataset = workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        raise StorageError(f"dataset {record.alias} has no blocks")
    dropped = 0
    async for hash, _ in dataset.chain.iter_blocks(head):
        if hash == block:
            break
        dropped += 1
    else:
        raise StorageError(
            f"block {block} is not in the history of {record.alias} "
            f"(`odfd log {record.alias}` lists it); nothing was changed"
        )
    if dropped == 0:
        return ResetResult(record.alias, 0)
    readers = [
        reader.alias
        for reader in (await workspace.graph()).readers_of(record.id)
        if reader.id != record.id
    ]
    warning = f" ({', '.join(readers)} read it)" if readers else ""
    confirm(f"Reset {record.alias} to {block}, dropping its last {dropped} block(s){warning}?")
    await dataset.chain.reset_to(block, expected_head=head)
    await record_write(
        workspace,
        actor or local_actor(),
        "reset",
        record.alias,
        dataset_id=record.id,
        old_head=head,
        new_head=block,
    )
    return ResetResult(record.alias, dropped)


@dataclass(frozen=True, slots=True)
class CompactionSkipped(Event):
    name: ClassVar[str] = "compactionSkipped"
    reason: str


@dataclass(frozen=True, slots=True)
class Compacted(Event):
    name: ClassVar[str] = "compacted"
    alias: str
    old_blocks: int
    new_blocks: int
    head: str


@dataclass(frozen=True, slots=True)
class ReaderReset(Event):
    """A derivative reading a compacted dataset was reset to its metadata."""

    name: ClassVar[str] = "readerReset"
    alias: str
    dropped_blocks: int


def compaction_options(
    max_slice_size: int | None, max_slice_records: int | None, *, keep_metadata_only: bool
) -> CompactionOptions:
    """The options of a compaction, the service's defaults for the sizes not given, so a caller
    names no coordinator internals."""
    from odfd.coordinator.compact import (
        DEFAULT_MAX_SLICE_RECORDS,
        DEFAULT_MAX_SLICE_SIZE,
        CompactionOptions,
    )

    return CompactionOptions(
        max_slice_size=max_slice_size or DEFAULT_MAX_SLICE_SIZE,
        max_slice_records=max_slice_records or DEFAULT_MAX_SLICE_RECORDS,
        keep_metadata_only=keep_metadata_only,
    )


async def compact_datasets(
    node: Node,
    refs: list[str],
    options: CompactionOptions,
    *,
    confirm: Confirm,
    sink: EventSink,
    actor: Actor | None = None,
) -> None:
    """Compacts the named datasets (their readers reset to their metadata), after one question
    naming everything that changes, recorded as done by ``actor`` (default: a local command);
    a copy pulled from a remote is refused, changing nothing."""
    from odfd.coordinator.compact import (
        CompactionOptions,
        NothingToCompactError,
        execute_compaction,
        plan_compaction,
    )

    workspace = node.workspace
    reset = CompactionOptions(keep_metadata_only=True)
    targets = [await workspace.resolve(name) for name in refs]
    plans: dict[DatasetId, CompactionPlan] = {}
    for record in targets:
        try:
            plans[record.id] = await plan_compaction(
                workspace.open_dataset(record.id), record.alias, options
            )
        except NothingToCompactError as err:
            sink.emit(CompactionSkipped(str(err)))
    if not plans:
        return
    graph = await workspace.graph(await workspace.list_datasets())
    compacted = [r for r in targets if r.id in plans]
    downstream = graph.downstream_of(compacted)
    for record in downstream:
        try:
            plans[record.id] = await plan_compaction(
                workspace.open_dataset(record.id), record.alias, reset
            )
        except NothingToCompactError:
            continue
    for record in [*compacted, *downstream]:
        if record.id in plans:
            await _refuse_copy(workspace, record)
    question = "; ".join(_describe(r, plans[r.id]) for r in compacted)
    dropped = [r.alias for r in downstream if r.id in plans]
    if dropped:
        question += (
            f"; derivative(s) {', '.join(dropped)} read it, so their data will be dropped "
            "and recomputed from the new history on their next `odfd pull`"
        )
    confirm(f"{question}. This rewrites history. Go on?")
    reset_ids = {r.id for r in downstream}
    for record in graph.downstream_first([*compacted, *downstream]):
        plan = plans.get(record.id)
        if plan is None:
            continue
        dataset = workspace.open_dataset(record.id)
        old_head = await dataset.chain.head()
        result = await execute_compaction(workspace.root, dataset, plan)
        await record_write(
            workspace,
            actor or local_actor(),
            "compact",
            record.alias,
            dataset_id=record.id,
            old_head=old_head,
            new_head=result.new_head,
        )
        if record.id in reset_ids:
            sink.emit(ReaderReset(record.alias, plan.dropped_blocks))
        else:
            sink.emit(
                Compacted(record.alias, result.old_blocks, result.new_blocks, str(result.new_head))
            )


async def _refuse_copy(workspace: Workspace, record: DatasetRecord) -> None:
    """A dataset pulled from a remote is a copy of another node's history: rewriting it here
    would make it diverge from its source (its next pull refused, or with --force undone)."""
    from odfd.coordinator.compact import CompactionError

    sources = (await workspace.open_dataset(record.id).remote_aliases())["pull"]
    if sources:
        raise CompactionError(
            f"{record.alias} is a copy pulled from {sources[0]}: rewriting its history here would "
            "make it diverge from its source; compact it where it is published; nothing was "
            "changed"
        )


def _describe(record: DatasetRecord, plan: CompactionPlan) -> str:
    if plan.dropped_blocks:
        return (
            f"Drop the {plan.dropped_blocks} data block(s) of {record.alias}, keeping its metadata"
        )
    return (
        f"Compact {record.alias}: merge {plan.merged_slices} slices into {plan.merged_runs} "
        f"({plan.old_blocks} → {plan.new_blocks} blocks)"
    )
