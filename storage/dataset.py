"""A dataset: its metadata chain plus the data, checkpoint and info stores beside it.

``commit_*`` are the only way odfd's own writers (ingest, transform, ``odfd add``) grow a
dataset: objects first, then the block, then ``head`` by compare-and-swap. Replication appends
blocks through ``dataset.chain`` directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from protocol.identity import DatasetId, Multihash
from protocol.model import AddData, ExecuteTransform, MetadataBlock, MetadataEvent, Timestamp
from storage.chain import MetadataChain
from storage.chain.metadata_chain import HeadListener
from storage.chain.saved_state import SavedStateStore
from storage.errors import SizeMismatchError, StorageError
from storage.layout import ALIAS_INFO, CONFIG_INFO, DatasetLayout
from storage.stores.base import NamedStore, ObjectStore, RefStore
from storage.stores.localfs import LocalFsNamedStore, LocalFsObjectStore, LocalFsRefStore

RemoteAliasKind = Literal["pull", "push"]
_CONFIG_KEYS: dict[RemoteAliasKind, str] = {"pull": "pullAliases", "push": "pushAliases"}


@dataclass(frozen=True, slots=True)
class CommitResult:
    old_head: Multihash | None
    new_head: Multihash
    block: MetadataBlock


class Dataset:
    def __init__(
        self,
        *,
        blocks: ObjectStore,
        data: ObjectStore,
        checkpoints: ObjectStore,
        refs: RefStore,
        info: NamedStore,
        dataset_id: DatasetId | None = None,
        layout: DatasetLayout | None = None,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
    ) -> None:
        self.id = dataset_id
        self.layout = layout
        self.blocks = blocks
        self.data = data
        self.checkpoints = checkpoints
        self.refs = refs
        self.info = info
        self.chain = MetadataChain(
            blocks,
            refs,
            dataset_id=dataset_id,
            data=data,
            checkpoints=checkpoints,
            on_head_moved=on_head_moved,
            saved_states=saved_states,
        )

    @classmethod
    def open_local(
        cls,
        root: Path,
        dataset_id: DatasetId | None = None,
        *,
        on_head_moved: HeadListener | None = None,
        saved_states: SavedStateStore | None = None,
        staging: Callable[[], Path] | None = None,
    ) -> Dataset:
        """A dataset folder in the spec's layout (written by odfd or the reference). With
        ``saved_states`` (and ``dataset_id``), its chain state survives the process; with
        ``staging``, new objects are written there before being renamed into place."""
        layout = DatasetLayout(Path(root))
        return cls(
            blocks=LocalFsObjectStore(layout.blocks_dir, staging),
            data=LocalFsObjectStore(layout.data_dir, staging),
            checkpoints=LocalFsObjectStore(layout.checkpoints_dir, staging),
            refs=LocalFsRefStore(layout.refs_dir),
            info=LocalFsNamedStore(layout.info_dir),
            dataset_id=dataset_id,
            layout=layout,
            on_head_moved=on_head_moved,
            saved_states=saved_states,
        )

    def __repr__(self) -> str:
        return f"Dataset({self.id or '<unseeded>'}, {self.layout.root if self.layout else self.blocks!r})"

    # --- committing -----------------------------------------------------------------------------

    async def commit_event(
        self,
        event: MetadataEvent,
        *,
        expected_head: Multihash | None,
        system_time: Timestamp | None = None,
    ) -> CommitResult:
        """Append ``event`` as the block after ``expected_head``.

        Raises ``RefCasError`` if the head moved meanwhile and ``ChainRuleError`` if the event
        breaks a chain rule; in both cases nothing changes.
        """
        return await self.commit_events(
            [event], expected_head=expected_head, system_time=system_time
        )

    async def commit_events(
        self,
        events: list[MetadataEvent],
        *,
        expected_head: Multihash | None,
        system_time: Timestamp | None = None,
    ) -> CommitResult:
        """Append several events as consecutive blocks with one head move (all or nothing)."""
        new_head, blocks = await self.chain.append_events(
            events,
            expected_head=expected_head,
            system_time=system_time if system_time is not None else Timestamp.now(),
        )
        return CommitResult(expected_head, new_head, blocks[-1])

    async def commit_data(
        self,
        event: AddData | ExecuteTransform,
        *,
        data_file: Path | None = None,
        checkpoint_file: Path | None = None,
        expected_head: Multihash | None,
        system_time: Timestamp | None = None,
    ) -> CommitResult:
        """Commit a data slice and/or checkpoint with the ``AddData``/``ExecuteTransform`` block
        describing them.

        Each file is checked against the size and physical hash the event records and moved
        (renamed, so it must be on the workspace's file system to be cheap) into ``data/`` or
        ``checkpoints/``; the block is appended only then. A file that does not match is left
        where it was.
        """
        if data_file is not None:
            if event.new_data is None:
                raise StorageError("commit_data got a data file but event.newData is empty")
            await self._store_file(
                self.data,
                Path(data_file),
                event.new_data.physical_hash,
                event.new_data.size,
                "data file",
            )
        if checkpoint_file is not None:
            if event.new_checkpoint is None:
                raise StorageError(
                    "commit_data got a checkpoint file but event.newCheckpoint is empty"
                )
            await self._store_file(
                self.checkpoints,
                Path(checkpoint_file),
                event.new_checkpoint.physical_hash,
                event.new_checkpoint.size,
                "checkpoint file",
            )
        return await self.commit_event(event, expected_head=expected_head, system_time=system_time)

    @staticmethod
    async def _store_file(
        store: ObjectStore, path: Path, hash: Multihash, size: int, what: str
    ) -> None:
        actual = (await asyncio.to_thread(path.stat)).st_size
        if actual != size:
            raise SizeMismatchError(f"{what} {path}", size, actual)
        await store.put_file(path, expected=hash, move=True)

    # --- info/ ----------------------------------------------------------------------------------

    async def alias(self) -> str | None:
        """The alias recorded in ``info/alias`` (as the reference writes it), if any."""
        raw = await self.info.get(ALIAS_INFO)
        return None if raw is None else raw.decode("utf-8").strip()

    async def set_alias(self, alias: str) -> None:
        await self.info.set(ALIAS_INFO, alias.encode("utf-8"))

    async def remote_aliases(self) -> dict[RemoteAliasKind, list[str]]:
        """Pull/push remote aliases from ``info/config`` (the reference's ``DatasetConfig``)."""
        raw = await self.info.get(CONFIG_INFO)
        if raw is None:
            return {"pull": [], "push": []}
        import yaml  # the remote-alias file is the only YAML a dataset reads; most commands skip it

        where = f"{self.layout.info_dir / CONFIG_INFO if self.layout else CONFIG_INFO}"
        try:
            manifest = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise StorageError(f"{where} is not valid YAML: {err}") from None
        if not isinstance(manifest, dict) or manifest.get("kind") != "DatasetConfig":
            raise StorageError(f"{where} is not a DatasetConfig manifest")
        content = manifest.get("content") or {}
        result: dict[RemoteAliasKind, list[str]] = {}
        for kind, key in _CONFIG_KEYS.items():
            refs = content.get(key) or []
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                raise StorageError(f"{where}: content.{key} must be a list of strings")
            result[kind] = refs
        return result

    async def set_remote_aliases(self, kind: RemoteAliasKind, refs: list[str]) -> None:
        import yaml

        aliases = await self.remote_aliases()
        aliases[kind] = list(dict.fromkeys(refs))
        manifest = {
            "kind": "DatasetConfig",
            "version": 1,
            "content": {_CONFIG_KEYS[k]: aliases[k] for k in ("pull", "push")},
        }
        await self.info.set(CONFIG_INFO, yaml.safe_dump(manifest, sort_keys=False).encode("utf-8"))
