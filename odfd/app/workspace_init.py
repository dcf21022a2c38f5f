"""``odfd init``: a new workspace (configuration, catalog, datasets folder, the node's keys) with
its administrator account, and where one may be created: never unknowingly inside another
workspace, whose commands would then be the ones run from there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from storage.errors import WorkspaceError
from storage.layout import DEFAULT_WORKSPACE_DIR, WORKSPACE_ENV, WorkspaceLayout

if TYPE_CHECKING:
    from storage.catalog.accounts import AccountRecord


@dataclass(frozen=True, slots=True)
class WorkspaceCreated(Event):
    """The workspace exists (its administrator account comes next)."""

    name: ClassVar[str] = "workspaceCreated"
    root: str
    identity: str
    """The ``did:key`` of the node's key, which signs its answers to queries."""


def existing_workspace(root: Path | None) -> Path | None:
    """The workspace already at ``root`` (default: where commands run from here find theirs,
    else ``./.odfd``), which ``--exists-ok`` leaves as it is; ``None`` if there is none."""
    place = root if root is not None else WorkspaceLayout.default_root()
    return place if (place / "config.toml").is_file() else None


def check_not_nested(root: Path | None) -> None:
    """``WorkspaceError`` when the workspace would be made in the current folder while a
    workspace encloses it (commands run from here use that one), unless ``root`` or
    ``$ODFD_HOME`` says where."""
    if root is not None or os.environ.get(WORKSPACE_ENV):
        return
    here = Path.cwd()
    enclosing = WorkspaceLayout.enclosing(here)
    if enclosing is not None and enclosing != here.absolute() / DEFAULT_WORKSPACE_DIR:
        raise WorkspaceError(
            f"{here} is inside the odfd workspace {enclosing}, which odfd commands "
            "use from here; pass --root DIR to create a separate one"
        )


async def init_workspace(root: Path | None, sink: EventSink) -> AccountRecord:
    """Creates the workspace at ``root`` (default: ``$ODFD_HOME``, else ``./.odfd``), reports
    ``WorkspaceCreated``, then adds its administrator account (no password yet) and returns it."""
    from odfd.app.accounts import add_admin_account
    from storage.keys import did_of
    from storage.workspace import Workspace

    async with await Workspace.init(root) as workspace:
        sink.emit(WorkspaceCreated(str(workspace.root), str(did_of(workspace.keys.node_key()))))
        return await add_admin_account(workspace)
