"""The node's SQLite catalog (aiosqlite, WAL): an index of datasets, remotes and sync state.

``Catalog`` and its records load on first use, so that ``storage.catalog.reader`` (a synchronous
reader for commands that only read) imports no aiosqlite and no asyncio.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.catalog.catalog import Catalog, SyncState, Transfer
    from storage.catalog.records import DatasetRecord

__all__ = ["Catalog", "DatasetRecord", "SyncState", "Transfer"]


def __getattr__(name: str) -> Any:
    if name == "DatasetRecord":
        from storage.catalog.records import DatasetRecord

        return DatasetRecord
    if name in __all__:
        from storage.catalog import catalog

        return getattr(catalog, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
