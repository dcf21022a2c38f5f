"""A quick read of the workspace's catalog without an event loop: ``odfd log``, ``list`` and
``status`` start in half the time when they need neither asyncio nor aiosqlite.

Imported only when such a command runs, and light: nothing here (or below it) imports asyncio,
ssl, aiosqlite, yaml or nacl (``tests/cli/test_lazy_imports.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from odfd.app.node import NodeView, view_node
from storage.catalog.sync_reader import SyncCatalogReader, open_sync_reader
from storage.layout import dataset_dir_name, existing_layout, unknown_dataset_folders
from storage.scratch import sweep_staging

T = TypeVar("T")


def read_catalog(
    root: Path | None, read: Callable[[SyncCatalogReader, NodeView], T | None]
) -> T | None:
    """``read`` on a synchronous reader of the catalog of the workspace at ``root`` (with the
    node's layout and configuration), after the checks opening the node makes (the workspace
    exists, dead processes' staging is swept, ``config.toml`` is valid). ``None`` when the caller
    must open the node instead: the catalog needs it (a schema to migrate, a file SQLite cannot
    read: opening reports that), a dataset folder the catalog does not know is there (opening
    settles it, ``odfd.app.recovery.settle_orphans``), or ``read`` answers ``None`` (what it
    needs is elsewhere: a bucket, a running daemon). Nothing has been written then."""
    layout = existing_layout(root)
    reader = open_sync_reader(layout.catalog_path)
    if reader is None:
        return None
    with reader:
        sweep_staging(layout.staging_dir)
        node = view_node(root)
        known = (dataset_dir_name(record.id) for record in reader.list_datasets())
        if unknown_dataset_folders(layout.datasets_dir, known):
            return None  # settled, and said so, on the way through the workspace
        try:
            return read(reader, node)
        except sqlite3.Error:
            return None
