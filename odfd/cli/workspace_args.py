"""The ``--root`` option every workspace command takes, and building the command's node from it.

Imported by every command module when the parser is built, so it imports nothing heavy itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from odfd.app.node import Node, NodeView
    from storage.catalog.sync_reader import SyncCatalogReader
    from storage.workspace import Workspace

T = TypeVar("T")

#: ``storage.layout.WORKSPACE_ENV``, spelled out so that building the parser imports no storage code.
WORKSPACE_ENV = "ODFD_HOME"


def add_root_argument(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """``--root DIR``, accepted before the command (``odfd --root DIR list``) and after it; below
    the top level it defaults to "not given", so a ``--root`` before the command is kept."""
    parser.add_argument(
        "--root",
        type=Path,
        default=None if top_level else argparse.SUPPRESS,
        metavar="DIR",
        help=f"workspace folder (default: ${WORKSPACE_ENV}, else the nearest .odfd here or above)",
    )


def run_in_node(
    args: argparse.Namespace,
    command: Callable[[Node], Awaitable[T]],
    *,
    check_storage: bool = True,
    settle_orphans: bool = True,
) -> T:
    """Build the node of the workspace named by ``--root`` (else ``$ODFD_HOME``, else the nearest
    enclosing one): its ``config.toml`` is parsed (every command refuses a broken one, not only
    those that read the setting in question) and, with ``check_storage``, its dataset storage (a
    bucket) checked usable; settle what a killed process left between a dataset folder and the
    catalog (``storage.orphans``: one line each, unless not ``settle_orphans``); run ``command``
    on the node, close it."""
    from odfd.app.node import open_node

    async def run() -> T:
        async with await open_node(args.root, check_storage=check_storage) as node:
            if settle_orphans:
                await report_orphans(node.workspace)
            return await command(node)

    import asyncio  # not at import: `odfd --help` builds the parser and runs nothing

    return asyncio.run(run())


async def report_orphans(workspace: Workspace) -> None:
    """Settles orphan dataset folders (``storage.orphans``), one line on stderr for each."""
    from odfd.cli import terminal
    from storage.orphans import recover_orphans

    for action in await recover_orphans(workspace):
        terminal.info(f"Recovered: {action.describe()}")


def read_in_node(
    args: argparse.Namespace,
    read: Callable[[SyncCatalogReader, NodeView], T | None],
) -> T | None:
    """``read`` on a synchronous reader of the workspace's catalog (with the node's layout and
    configuration), after the checks ``run_in_node`` makes (the workspace exists, dead
    processes' staging is swept, ``config.toml`` is valid), without an event loop: a command that
    only reads starts in half the time. ``None`` when the command must use ``run_in_node``:
    the catalog needs it (a schema to migrate, a file SQLite cannot read: it reports that), or
    ``read`` answers ``None`` (what it needs is elsewhere: a bucket, a running daemon). Nothing has
    been written then."""
    import sqlite3

    from odfd.app.node import view_node
    from storage.catalog.sync_reader import open_sync_reader
    from storage.layout import dataset_dir_name, existing_layout, unknown_dataset_folders
    from storage.scratch import sweep_staging

    layout = existing_layout(args.root)
    reader = open_sync_reader(layout.catalog_path)
    if reader is None:
        return None
    with reader:
        sweep_staging(layout.staging_dir)
        node = view_node(args.root)
        known = (dataset_dir_name(record.id) for record in reader.list_datasets())
        if unknown_dataset_folders(layout.datasets_dir, known):
            return None  # settled, and said so, on the way through the workspace
        try:
            return read(reader, node)
        except sqlite3.Error:
            return None
