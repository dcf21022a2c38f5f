"""The ``--root`` option every workspace command takes, and running a command in a workspace.

Imported by every command module when the parser is built, so it imports nothing heavy itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from odfd.config import NodeConfig
    from storage.catalog.sync_reader import SyncCatalogReader
    from storage.layout import WorkspaceLayout
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


def run_in_workspace(
    args: argparse.Namespace,
    command: Callable[[Workspace], Awaitable[int]],
    *,
    check_storage: bool = True,
    settle_orphans: bool = True,
) -> int:
    """Open the workspace named by ``--root`` (else ``$ODFD_HOME``, else the nearest enclosing
    one), check its ``config.toml`` (every command refuses a broken one, not only those that read
    the setting in question) and, with ``check_storage``, that its dataset storage (a bucket)
    can be used, settle what a killed process left between a dataset folder and the catalog
    (``storage.orphans``: one line each, unless not ``settle_orphans``), run ``command`` in it,
    close it."""
    from odfd.config import load_config
    from odfd.node_storage import open_workspace

    async def run() -> int:
        async with await open_workspace(args.root, check=check_storage) as workspace:
            load_config(workspace.layout.config_path)
            if settle_orphans:
                await report_orphans(workspace)
            return await command(workspace)

    import asyncio  # not at import: `odfd --help` builds the parser and runs nothing

    return asyncio.run(run())


async def report_orphans(workspace: Workspace) -> None:
    """Settles orphan dataset folders (``storage.orphans``), one line on stderr for each."""
    from odfd.cli import console
    from storage.orphans import recover_orphans

    for action in await recover_orphans(workspace):
        console.info(f"Recovered: {action.describe()}")


def read_in_workspace(
    args: argparse.Namespace,
    read: Callable[[SyncCatalogReader, WorkspaceLayout, NodeConfig], T | None],
) -> T | None:
    """``read`` on a synchronous reader of the workspace's catalog (with its layout and
    configuration), after the checks ``run_in_workspace`` makes (the workspace exists, dead
    processes' staging is swept, ``config.toml`` is valid), without an event loop: a command that
    only reads starts in half the time. ``None`` when the command must use ``run_in_workspace``:
    the catalog needs it (a schema to migrate, a file SQLite cannot read: it reports that), or
    ``read`` answers ``None`` (what it needs is elsewhere: a bucket, a running daemon). Nothing has
    been written then."""
    import sqlite3

    from odfd.config import load_config
    from storage.catalog.sync_reader import open_sync_reader
    from storage.layout import dataset_dir_name, existing_layout, unknown_dataset_folders
    from storage.scratch import sweep_staging

    layout = existing_layout(args.root)
    reader = open_sync_reader(layout.catalog_path)
    if reader is None:
        return None
    with reader:
        sweep_staging(layout.staging_dir)
        config = load_config(layout.config_path)
        known = (dataset_dir_name(record.id) for record in reader.list_datasets())
        if unknown_dataset_folders(layout.datasets_dir, known):
            return None  # settled, and said so, on the way through the workspace
        try:
            return read(reader, layout, config)
        except sqlite3.Error:
            return None
