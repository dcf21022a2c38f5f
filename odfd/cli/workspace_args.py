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
    catalog (``odfd.app.recovery``: one line each, unless not ``settle_orphans``); run ``command``
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
    """Settles orphan dataset folders (``odfd.app.recovery.settle_orphans``), one line on stderr
    for each."""
    from odfd.app.recovery import settle_orphans
    from odfd.cli import terminal

    for fixed in await settle_orphans(workspace):
        terminal.info(f"Recovered: {fixed}")


def read_in_node(
    args: argparse.Namespace,
    read: Callable[[SyncCatalogReader, NodeView], T | None],
) -> T | None:
    """``read`` on a synchronous reader of the workspace's catalog, without an event loop
    (``odfd.app.catalog_read``): a command that only reads starts in half the time. ``None`` when
    the command must use ``run_in_node``; nothing has been written then."""
    from odfd.app.catalog_read import read_catalog

    return read_catalog(args.root, read)
