"""The node's version as a server's caches key their entries by: the catalog's commit counter
and the server settings in force, read without a trip through the event loop."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from odfd.config import ServerConfig
from storage.catalog.reader import CatalogReader

if TYPE_CHECKING:
    from storage.workspace import Workspace


class CatalogVersion:
    """The node's version as the server's caches need it
    (:mod:`storage.catalog.versioned_cache`): the catalog's ``PRAGMA data_version`` on a
    read-only connection of its own, which changes whenever any other connection (the node's
    own included, or another process's) commits, with the server settings in force (a daemon's
    reload changes private datasets and token lists).
    Everything a plan or a token's subject depends on is in one or the other: datasets' heads,
    issued and revoked tokens, accounts, ``Relations`` and ``Projection`` resources. Called
    from gRPC's threads: one pragma, no trip through the event loop."""

    def __init__(self, reader: CatalogReader, settings: Callable[[], ServerConfig]) -> None:
        self._reader = reader
        self._settings = settings
        self._lock = threading.Lock()

    @classmethod
    async def open(
        cls, workspace: Workspace, settings: Callable[[], ServerConfig]
    ) -> CatalogVersion:
        return cls(await CatalogReader.open(workspace.catalog.path), settings)

    def __call__(self) -> Hashable | None:
        with self._lock:
            version = self._reader.data_version()
        return None if version is None else (version, self._settings())

    async def close(self) -> None:
        with self._lock:
            await self._reader.close()
