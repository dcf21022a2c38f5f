"""``odfd compact DATASET``: merge a root dataset's small slices into fewer, larger ones.

A hard compaction, as the reference's ``kamu system compact --hard``: the history is rewritten
(``odfd.coordinator.compact``), so it asks first. Derivative datasets reading a compacted dataset
would refer to blocks no longer in its history; they are reset to their metadata first (their
data dropped, recomputed from the new history on their next ``odfd pull``), readers before what
they read, so each step leaves the workspace consistent.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import console
from odfd.cli.confirm import confirm
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from protocol.identity import DatasetId
from storage.catalog import DatasetRecord
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.coordinator.compact import CompactionPlan


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="merge small data slices into fewer files (rewrites history; asks first)",
    )
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "--max-slice-size",
        type=_positive,
        metavar="BYTES",
        help="largest merged slice in bytes (default 300000000)",
    )
    parser.add_argument(
        "--max-slice-records",
        type=_positive,
        metavar="N",
        help="most records in a merged slice (default 10000)",
    )
    parser.add_argument(
        "--keep-metadata-only",
        action="store_true",
        help="drop every data block instead (any dataset; a derivative is recomputed on its "
        "next pull)",
    )
    parser.add_argument(
        "--hard",
        action="store_true",
        help="accepted for kamu compatibility: every compaction here is hard",
    )
    add_root_argument(parser)
    parser.set_defaults(func=_compact)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _compact(args: argparse.Namespace) -> int:
    from odfd.coordinator.compact import (
        DEFAULT_MAX_SLICE_RECORDS,
        DEFAULT_MAX_SLICE_SIZE,
        CompactionOptions,
        NothingToCompactError,
        execute_compaction,
        plan_compaction,
    )

    options = CompactionOptions(
        max_slice_size=args.max_slice_size or DEFAULT_MAX_SLICE_SIZE,
        max_slice_records=args.max_slice_records or DEFAULT_MAX_SLICE_RECORDS,
        keep_metadata_only=args.keep_metadata_only,
    )
    reset = CompactionOptions(keep_metadata_only=True)

    async def run(workspace: Workspace) -> int:
        targets = [await workspace.resolve(name) for name in args.datasets]
        plans: dict[DatasetId, CompactionPlan] = {}
        for record in targets:
            try:
                plans[record.id] = await plan_compaction(
                    workspace.open_dataset(record.id), record.alias, options
                )
            except NothingToCompactError as err:
                console.info(f"Skipped: {err}")
        if not plans:
            return 0
        records = await workspace.list_datasets()
        graph = await workspace.graph(records)
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
        confirm(args, f"{question}. This rewrites history. Go on?")
        reset_ids = {r.id for r in downstream}
        for record in graph.downstream_first([*compacted, *downstream]):
            plan = plans.get(record.id)
            if plan is None:
                continue
            result = await execute_compaction(
                workspace.root, workspace.open_dataset(record.id), plan
            )
            if record.id in reset_ids:
                console.info(
                    f"Reset: {record.alias} to its metadata ({plan.dropped_blocks} data block(s) "
                    f"dropped); `odfd pull {record.alias}` recomputes it"
                )
            else:
                console.info(
                    f"Compacted: {record.alias} {result.old_blocks} → {result.new_blocks} "
                    f"blocks, head {result.new_head}"
                )
        return 0

    return run_in_workspace(args, run)


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
