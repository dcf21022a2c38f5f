"""``odfd repair``: rebuild the catalog from the dataset folders."""

from __future__ import annotations

import argparse
import asyncio
import sys

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument
from storage.layout import WorkspaceLayout
from storage.workspace import reset_catalog


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("repair", help="rebuild the catalog from the dataset folders")
    add_root_argument(parser)
    parser.set_defaults(func=_repair)


def _repair(args: argparse.Namespace) -> int:
    async def run() -> int:
        from odfd.app.node import open_node

        layout = WorkspaceLayout(
            args.root if args.root is not None else WorkspaceLayout.default_root()
        )
        if layout.config_path.is_file():
            broken = await reset_catalog(layout)
            if broken is not None:
                print(f"Catalog was unreadable; moved it to {broken}", file=sys.stderr)
        async with await open_node(args.root) as node:
            report = await node.workspace.repair()
        for record in report.registered:
            print(f"Registered: {record.alias} ({record.id}) at block #{record.head_sequence}")
        for folder, reason in report.skipped:
            terminal.info(f"Skipped: {folder}: {reason}")
        return 0

    return asyncio.run(run())
