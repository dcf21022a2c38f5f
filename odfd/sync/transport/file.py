"""``file:///path``: a dataset folder on this machine (or, for ``odfd search``, a folder of
dataset folders), read and written in place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.sync.errors import RemoteNotFoundError, SyncError
from odfd.sync.transport.base import Listed, RemoteView, SmartEndpoint, SourceHead, name_from_url
from protocol.identity import DatasetName
from storage.layout import ALIAS_INFO, DatasetLayout

if TYPE_CHECKING:
    import aiohttp

    from odfd.sync.progress import Progress
    from odfd.sync.push_steps import PushOptions, PushResult
    from odfd.sync.target import PullTarget


@dataclass(frozen=True, slots=True)
class FileTransport:
    path: Path
    """Absolute."""

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    @property
    def smart(self) -> SmartEndpoint | None:
        return None

    def default_name(self) -> DatasetName | None:
        return name_from_url(self.url)

    def peer_key(self) -> str:
        return "file"

    @asynccontextmanager
    async def open(self, session: aiohttp.ClientSession) -> AsyncIterator[RemoteView]:
        from odfd.sync.objects import store_source
        from storage.dataset import Dataset

        if not (self.path / "blocks").is_dir() or not (self.path / "refs").is_dir():
            raise RemoteNotFoundError(f"{self.url}: not a dataset folder (no blocks/ and refs/)")
        dataset = Dataset.open_local(self.path)
        yield RemoteView(dataset, self.url, store_source(dataset))

    async def probe(self, session: aiohttp.ClientSession, known: SourceHead | None) -> SourceHead:
        from odfd.sync.transport.probe import probe_view

        return await probe_view(self.open(session), self.url, known)

    async def push(
        self, target: PullTarget, options: PushOptions, progress: Progress
    ) -> PushResult:
        from odfd.sync.transport.folder_push import push_into_folder
        from storage.dataset import Dataset

        layout = DatasetLayout(self.path).create()
        dest = Dataset.open_local(layout.root, target.record.id if target.record else None)
        return await push_into_folder(target, dest, self.url, options, progress)

    async def list_datasets(self) -> list[Listed]:
        import asyncio  # here: a thin client parsing a pull's arguments runs no event loop

        return await asyncio.to_thread(self._listing)

    def _listing(self) -> list[Listed]:
        if not self.path.is_dir():
            raise SyncError(f"{self.url}: no such folder")
        found = []
        for folder in sorted(self.path.iterdir()):
            layout = DatasetLayout(folder)
            if not layout.looks_like_dataset():
                continue
            alias_file = layout.info_dir / ALIAS_INFO
            alias = alias_file.read_text().strip() if alias_file.is_file() else folder.name
            found.append(Listed(alias, None, f"{self.url}/{folder.name}"))
        return found
