"""The owner's heartbeat: re-sign the head of every dataset this node holds the key of.

A mirror reports a freeze when the newest signed head it can get is older than its bound; an
owner whose dataset is merely quiet proves it is still publishing by signing the same head again
with a newer time. The first run after a start also repairs a crash between a head move and
its signature (``Workspace.restore_signed_head``). The daemon runs it on its schedule.
"""

from __future__ import annotations

import logging

from storage.errors import StorageError
from storage.workspace import Workspace

log = logging.getLogger("odfd.daemon.heartbeat")
"""Named for the daemon, which runs the heartbeat: its lines stay among the daemon's."""


async def resign_owned(workspace: Workspace) -> int:
    """Re-sign every owned dataset's head; returns how many were signed."""
    signed = 0
    for record in await workspace.list_datasets():
        if not workspace.signer.can_sign(record.id):
            continue
        try:
            if await workspace.sign_head(record.id) is not None:
                signed += 1
        except StorageError as err:
            log.warning("re-signing failed", extra={"dataset": record.alias, "error": str(err)})
    return signed
