"""The datasets a server finds by the path of a request's URL, and opens: kept while the catalog
is unchanged, since every download GET of a pull asks (parsing the path and building the record
cost ~0.05 ms a GET, opening the dataset ~0.1 ms, a thousand GETs a pull). Names are resolved on
a read-only catalog connection of the server's own, so serving never waits behind another task's
catalog transaction (a daemon's syncs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from protocol.errors import ParseError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from storage.catalog.reader import CatalogReader
from storage.catalog.versioned_cache import VersionedCache

if TYPE_CHECKING:
    from storage.catalog import DatasetRecord
    from storage.dataset import Dataset
    from storage.workspace import Workspace

KEPT_LOOKUPS = 1024
"""Dataset paths and opened datasets kept per catalog version (least recently used first out)."""


def parse_dataset_path(text: str) -> DatasetRef:
    """``name`` (single-tenant), ``account/name`` (multi-tenant) or ``did:odf:…``."""
    if text.startswith("did:"):
        return DatasetRef(DatasetId.parse(text))
    return DatasetRef(DatasetAlias.parse(text))


class ServedDatasets:
    """A server's lookups of datasets by URL path, and the datasets it opened, each kept until
    the catalog's ``PRAGMA data_version`` moves: any commit (a push, a pull, a rename, a deletion)
    is seen by the next request."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.reader: CatalogReader | None = None
        """The server's own read-only connection, while it serves (``reading``)."""
        self._found: VersionedCache[str, tuple[DatasetRecord | None]] = VersionedCache(KEPT_LOOKUPS)
        self._opened: VersionedCache[DatasetId, Dataset] = VersionedCache(KEPT_LOOKUPS)

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """Names are resolved on a read-only connection of their own inside the block."""
        reader = await CatalogReader.open(self.workspace.catalog.path)
        self.reader = reader
        try:
            yield
        finally:
            self.reader = None
            await reader.close()

    def catalog_version(self) -> int | None:
        """What lookups are kept by: ``PRAGMA data_version`` of the reader, which moves with
        every commit of any other connection; ``None`` (nothing kept) without a reader or while
        the catalog is busy."""
        return None if self.reader is None else self.reader.data_version()

    async def at(self, path: str) -> DatasetRecord | None:
        """The dataset ``path`` names, as of the catalog now (``None``: none, or not a name)."""
        version = self.catalog_version()
        kept = self._found.get(path, version)
        if kept is not None:
            return kept[0]
        try:
            ref = parse_dataset_path(path)
        except ParseError:
            return None
        record = await self._resolve(ref)
        self._found.put(path, version, (record,))
        return record

    def open(self, record: DatasetRecord) -> Dataset:
        """The dataset's folder or bucket prefix, opened once while the catalog is unchanged
        (opening builds its stores, paths and chain); any commit opens it afresh."""
        version = self.catalog_version()
        dataset = self._opened.get(record.id, version)
        if dataset is None:
            dataset = self.workspace.open_dataset(record.id)
            self._opened.put(record.id, version, dataset)
        return dataset

    async def _resolve(self, ref: DatasetRef) -> DatasetRecord | None:
        if self.reader is None:
            return await self.workspace.try_resolve(ref)
        if ref.id is not None:
            return await self.reader.get_dataset(ref.id)
        return await self.reader.find_by_alias(str(ref.alias))
