"""``odfd compact DATASET``: merge a root dataset's small slices into fewer, larger ones.

A hard compaction, as the reference's ``kamu system compact --hard``: the history is rewritten
(``odfd.app.history``), so it asks first. Derivative datasets reading a compacted dataset
would refer to blocks no longer in its history; they are reset to their metadata first (their
data dropped, recomputed from the new history on their next ``odfd pull``), readers before what
they read, so each step leaves the workspace consistent.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.arguments import positive_int
from odfd.cli.confirm import confirmer
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.events import Event
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="merge small data slices into fewer files (rewrites history; asks first)",
    )
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="dataset alias or id")
    parser.add_argument(
        "--max-slice-size",
        type=positive_int,
        metavar="BYTES",
        help="largest merged slice in bytes (default 300000000)",
    )
    parser.add_argument(
        "--max-slice-records",
        type=positive_int,
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


def _compact(args: argparse.Namespace) -> int:
    from odfd.app.history import compact_datasets, compaction_options

    options = compaction_options(
        args.max_slice_size, args.max_slice_records, keep_metadata_only=args.keep_metadata_only
    )

    async def run(node: Node) -> int:
        await compact_datasets(
            node, args.datasets, options, confirm=confirmer(args), sink=_Printer()
        )
        return 0

    return run_in_node(args, run)


class _Printer:
    def emit(self, event: Event) -> None:
        from odfd.app import history

        match event:
            case history.CompactionSkipped(reason=reason):
                terminal.info(f"Skipped: {reason}")
            case history.ReaderReset(alias=alias, dropped_blocks=dropped):
                terminal.info(
                    f"Reset: {alias} to its metadata ({dropped} data block(s) "
                    f"dropped); `odfd pull {alias}` recomputes it"
                )
            case history.Compacted(alias=alias, old_blocks=old, new_blocks=new, head=head):
                terminal.info(f"Compacted: {alias} {old} → {new} blocks, head {head}")
