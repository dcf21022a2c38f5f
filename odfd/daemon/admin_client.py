"""The client of the daemon's admin API (``odfd.daemon.admin``), for the CLI: where the socket
of a workspace's daemon is, and requests to it. Kept apart from the server so a command that talks
to a daemon imports none of the daemon.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from odfd.errors import OdfdError
from storage.layout import WorkspaceLayout

SOCKET_NAME = "daemon.sock"
REQUEST_TIMEOUT = 600.0
"""Seconds an admin request may take (a reload or a reconcile does real work)."""
_MAX_SOCKET_PATH = 100
"""``sun_path`` holds 108 bytes on Linux; deeper workspaces get a socket under the temp folder."""


class AdminError(OdfdError):
    """The daemon answered an admin request with an error."""


class DaemonNotRunningError(OdfdError):
    """The command needs a running daemon and none listens for the workspace."""


def socket_path(layout: WorkspaceLayout, configured: str | None) -> Path:
    if configured is not None:
        return Path(configured)
    path = layout.root.resolve() / SOCKET_NAME
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(layout.root.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"odfd-{digest}.sock"


class AdminClient:
    """Talks to a running daemon. ``await AdminClient.connect(layout, configured)`` gives
    ``None`` when no daemon listens for that workspace (``configured``: the node's ``[daemon]
    admin_socket``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    async def connect(cls, layout: WorkspaceLayout, configured: str | None) -> AdminClient | None:
        path = socket_path(layout, configured)
        if not path.exists():
            return None
        import aiohttp  # only once a daemon's socket exists: `odfd status` without one skips it

        client = cls(path)
        try:
            await client.request("GET", "/ping")
        except (aiohttp.ClientConnectionError, FileNotFoundError, ConnectionRefusedError):
            return None
        return client

    @classmethod
    async def require(cls, layout: WorkspaceLayout, configured: str | None) -> AdminClient:
        client = await cls.connect(layout, configured)
        if client is None:
            raise DaemonNotRunningError(
                f"no daemon is running on {layout.root} (start one with `odfd daemon`)"
            )
        return client

    async def request(self, method: str, path: str, **params: str) -> Any:
        import aiohttp

        connector = aiohttp.UnixConnector(path=str(self.path))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(
                method,
                f"http://odfd{path}",
                params=params,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
            ) as response:
                if response.content_type == "application/json":
                    body = await response.json()
                else:
                    body = await response.text()
                if response.status >= 400:
                    message = body.get("error") if isinstance(body, dict) else body
                    raise AdminError(f"daemon at {self.path}: {message}")
                return body
