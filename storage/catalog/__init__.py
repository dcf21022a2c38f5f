"""The node's SQLite catalog (aiosqlite, WAL): an index of datasets, remotes and sync state."""

from storage.catalog.catalog import Catalog, DatasetRecord, SyncState, Transfer

__all__ = ["Catalog", "DatasetRecord", "SyncState", "Transfer"]
