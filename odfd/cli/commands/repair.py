"""``odfd repair``: rebuild the catalog from the dataset folders."""

from __future__ import annotations

import argparse
import asyncio
import sys

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("repair", help="rebuild the catalog from the dataset folders")
    add_root_argument(parser)
    parser.set_defaults(func=_repair)


def _repair(args: argparse.Namespace) -> int:
    from odfd.app.repair import repair, set_aside_unreadable_catalog

    async def run() -> int:
        broken = await set_aside_unreadable_catalog(args.root)
        if broken is not None:
            print(f"Catalog was unreadable; moved it to {broken}", file=sys.stderr)
        report = await repair(args.root)
        for record in report.registered:
            print(f"Registered: {record.alias} ({record.id}) at block #{record.head_sequence}")
        for folder, reason in report.skipped:
            terminal.info(f"Skipped: {folder}: {reason}")
        return 0

    return asyncio.run(run())
