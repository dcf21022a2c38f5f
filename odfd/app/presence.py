"""Refusing to answer from a dataset whose files are gone, instead of printing an empty result.

The catalog remembers each dataset's head; if the folder (or a data file its blocks name) was
removed by hand, reading it would silently show no records.
"""

from __future__ import annotations

from odfd.coordinator.query import DatasetView
from storage.catalog import DatasetRecord
from storage.errors import StorageError
from storage.workspace import Workspace


class DataMissingError(StorageError):
    """A dataset's folder or data files are missing from the workspace."""


async def require_files(workspace: Workspace, record: DatasetRecord, view: DatasetView) -> None:
    folder = workspace.storage.where(record.id)
    if record.head is not None and view.head is None:
        exists = await workspace.storage.exists(record.id)
        state = "is missing" if not exists else "has no readable head"
        raise DataMissingError(
            f"dataset {record.alias}: its folder {folder} {state}, though the catalog records "
            f"block #{record.head_sequence}; restore the folder, or run `odfd repair` to drop "
            "it from the catalog"
        )
    missing = [path for path in view.paths if not path.is_file()]
    if missing:
        raise DataMissingError(
            f"dataset {record.alias}: {len(missing)} data file(s) are missing, e.g. {missing[0]}; "
            f"restore them (e.g. `odfd pull` it again from a remote) and check with "
            f"`odfd verify {record.alias}`"
        )
