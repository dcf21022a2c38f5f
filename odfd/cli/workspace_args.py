"""The ``--root`` option every workspace command takes, and running a command in a workspace.

Imported by every command module when the parser is built, so it imports nothing heavy itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.workspace import Workspace

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
) -> int:
    """Open the workspace named by ``--root`` (else ``$ODFD_HOME``, else the nearest enclosing
    one), check its ``config.toml`` (every command refuses a broken one, not only those that read
    the setting in question) and, with ``check_storage``, that its dataset storage (a bucket)
    can be used, run ``command`` in it, close it."""
    from odfd.config import load_config
    from odfd.node_storage import open_workspace

    async def run() -> int:
        async with await open_workspace(args.root, check=check_storage) as workspace:
            load_config(workspace.layout.config_path)
            return await command(workspace)

    import asyncio  # not at import: `odfd --help` builds the parser and runs nothing

    return asyncio.run(run())
