"""A node's workspace: its datasets on disk, their keys, and the catalog indexing them.

Dataset folders are the source of truth; the catalog is kept in step with every change made
through the workspace and can be rebuilt from the folders (``repair``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from protocol.identity import DatasetAlias, DatasetId, DatasetRef, Multihash
from protocol.model import DatasetKind, DatasetSnapshot, MetadataEvent, Seed, Timestamp
from protocol.transfer.signed_head import SignedHead, SignedHeadError, parse_signed_head
from storage.atomic import staging_path, write_file_atomic
from storage.catalog import Catalog, DatasetRecord
from storage.catalog.chain_states import ChainStateTable
from storage.catalog.dataset_inputs import DatasetInputsTable
from storage.catalog.signed_heads import SignedHeadTable
from storage.chain import validate_chain
from storage.chain.rules import ChainState
from storage.chain.saved_state import SavedState
from storage.dataset import Dataset, RemoteAliasKind
from storage.dataset_storage import DatasetStorage, StoredDataset
from storage.errors import (
    DatasetExistsError,
    DatasetNotFoundError,
    StorageError,
    WorkspaceError,
)
from storage.graph import DatasetGraph, load_graph
from storage.keys import KeyStore
from storage.layout import (
    HEAD_REF,
    DatasetLayout,
    WorkspaceLayout,
    absolute_root,
    existing_layout,
)
from storage.local_storage import LocalDatasetStorage
from storage.placed_storage import PlacedStorage, VolumeUnavailableError
from storage.scratch import Scratch, holding_folder, sweep_staging
from storage.signing import HeadSigner
from storage.snapshots import normalize_snapshot
from storage.stores.localfs import local_path

_CONFIG_TEMPLATE = """\
# odfd node configuration. Sections are added by the parts of odfd that read them.
[workspace]
version = 1
"""


StorageFactory = Callable[[WorkspaceLayout], DatasetStorage]
"""Gives a workspace's dataset storage from its layout (the node reads its configuration)."""


@dataclass(frozen=True, slots=True)
class RepairReport:
    registered: list[DatasetRecord]
    skipped: list[tuple[str, str]]
    """Dataset folders (or bucket prefixes) that are not complete datasets, with the reason."""


class Workspace:
    """Use ``await Workspace.init(root)`` / ``await Workspace.open(root)``, then ``close()``
    (or ``async with``)."""

    def __init__(
        self, layout: WorkspaceLayout, catalog: Catalog, storage: DatasetStorage | None = None
    ) -> None:
        self.layout = layout
        self.catalog = catalog
        self.storage: DatasetStorage = storage or LocalDatasetStorage(layout.datasets_dir)
        """Where the datasets are (``storage.dataset_storage``): the ``datasets/`` folder, or a
        bucket (``[storage] url``)."""
        self.keys = KeyStore(layout.keys_dir)
        self.chain_states = ChainStateTable(catalog)
        """Saved chain states (a cache in the catalog); give it to datasets opened outside
        ``open_dataset`` (e.g. staged ones) so their chain state survives the process."""
        self.scratch = Scratch(layout.staging_dir)
        """This process's folder for temporary files (``staging=`` of datasets it writes)."""
        self.swept: list[Path] = []
        """What ``open`` removed from the staging folder (left by processes that died)."""
        self.dataset_inputs = DatasetInputsTable(catalog)
        """Each derivative's inputs: the index behind ``graph()``."""
        self.signed_heads = SignedHeadTable(catalog)
        self.signer = HeadSigner(self.keys, self.signed_heads)
        """Signs the head of every dataset whose key this node holds, whenever it moves."""

    @property
    def root(self) -> Path:
        return self.layout.root

    @classmethod
    async def init(cls, root: Path | None = None) -> Workspace:
        """A new workspace (its datasets in its ``datasets/`` folder until configured)."""
        layout = WorkspaceLayout(absolute_root(root))
        if layout.config_path.exists():
            raise WorkspaceError(f"{layout.root} is already an odfd workspace")
        if layout.root.exists() and not layout.root.is_dir():
            raise WorkspaceError(
                f"cannot create a workspace at {layout.root}: it is a file "
                "(pick another folder with --root DIR)"
            )
        try:
            layout.root.mkdir(parents=True, exist_ok=True)
            layout.datasets_dir.mkdir(exist_ok=True)
            layout.keys_dir.mkdir(mode=0o700, exist_ok=True)
            os.chmod(layout.keys_dir, 0o700)
            catalog = await _open_catalog(layout)
            write_file_atomic(layout.config_path, _CONFIG_TEMPLATE.encode())
        except OSError as err:
            where = "" if err.filename in (None, str(layout.root)) else f"{err.filename}: "
            raise WorkspaceError(
                f"cannot create a workspace at {layout.root}: {where}{err.strerror or err} "
                "(pick a folder you can write to with --root DIR)"
            ) from None
        return cls(layout, catalog)

    @classmethod
    async def open(
        cls, root: Path | None = None, storage: StorageFactory | None = None
    ) -> Workspace:
        """The workspace at ``root``; ``storage`` gives its dataset storage from its layout
        (the node reads ``[storage]`` of its config; default: the ``datasets/`` folder)."""
        layout = existing_layout(root)
        chosen = storage(layout) if storage is not None else None
        workspace = cls(layout, await _open_catalog(layout), chosen)
        workspace.swept = sweep_staging(layout.staging_dir)
        return workspace

    async def close(self) -> None:
        self.scratch.close()
        await self.catalog.close()

    async def __aenter__(self) -> Workspace:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- lookup ---------------------------------------------------------------------------------

    async def resolve(self, ref: DatasetRef | str) -> DatasetRecord:
        """The catalog record of a dataset by id or alias; ``DatasetNotFoundError`` if none."""
        record = await self.try_resolve(ref)
        if record is None:
            raise DatasetNotFoundError(f"dataset {ref} is not in the workspace {self.root}")
        return record

    async def try_resolve(self, ref: DatasetRef | str) -> DatasetRecord | None:
        if isinstance(ref, str):
            ref = DatasetRef.parse(ref)
        if ref.id is not None:
            return await self.catalog.get_dataset(ref.id)
        return await self.catalog.find_by_alias(str(ref.alias))

    def open_dataset(self, dataset_id: DatasetId) -> Dataset:
        """The dataset's folder, with head moves reported to the catalog and chain states
        saved in it."""

        async def record_head(head: Multihash, sequence_number: int) -> None:
            await self.catalog.update_head(dataset_id, head, sequence_number)
            await self.index_inputs(
                dataset_id, await dataset.chain.state(head, use_current_head=False)
            )
            await self.signer.sign(dataset_id, dataset.refs, head, sequence_number)

        dataset = self.storage.open(
            dataset_id,
            on_head_moved=record_head,
            saved_states=self.chain_states,
            staging=self.scratch.folder,
        )
        return dataset

    async def sign_head(self, dataset_id: DatasetId) -> SignedHead | None:
        """Sign the dataset's current head now (a heartbeat, or after a crash between a head move
        and its signature); ``None`` if this node does not hold the dataset's key."""
        if not self.signer.can_sign(dataset_id):
            return None
        dataset = self.open_dataset(dataset_id)
        head = await dataset.chain.head()
        if head is None:
            return None
        block = await dataset.chain.get_block(head)
        return await self.signer.sign(dataset_id, dataset.refs, head, block.sequence_number)

    async def get_dataset(self, ref: DatasetRef | str) -> Dataset:
        return self.open_dataset((await self.resolve(ref)).id)

    async def list_datasets(self) -> list[DatasetRecord]:
        return await self.catalog.list_datasets()

    async def graph(self, records: list[DatasetRecord] | None = None) -> DatasetGraph:
        """Which dataset reads which (``storage.graph``), from the catalog's index; ``records``
        (the catalog's datasets, if the caller has just listed them) spares listing them again."""
        listed = records if records is not None else await self.catalog.list_datasets()
        return await load_graph(listed, self.dataset_inputs, self._inputs_at, where=str(self.root))

    async def _inputs_at(self, dataset_id: DatasetId, head: Multihash) -> tuple[DatasetId, ...]:
        state = await self.open_dataset(dataset_id).chain.state(head, use_current_head=False)
        return state.transform_input_ids

    async def index_inputs(self, dataset_id: DatasetId, state: ChainState) -> None:
        """Record a derivative's inputs at the head of ``state`` in the graph's index (called
        wherever a dataset enters the catalog or its head moves; a root has none)."""
        if state.kind is DatasetKind.DERIVATIVE and state.head is not None:
            await self.dataset_inputs.record(dataset_id, state.head, state.transform_input_ids)

    # --- creating -------------------------------------------------------------------------------

    async def create_dataset(
        self,
        alias: DatasetAlias | str,
        kind: DatasetKind,
        events: list[MetadataEvent] | None = None,
        *,
        system_time: Timestamp | None = None,
        volume: str | None = None,
    ) -> Dataset:
        """A new dataset with a fresh ed25519 identity: ``Seed`` then ``events`` as blocks, all
        with one system time and one head move (the reference writes snapshots the same way).
        ``volume``: the id of the volume to keep it on (``storage.placed_storage``)."""
        alias_text = str(DatasetAlias.parse(str(alias)))
        if await self.catalog.find_by_alias(alias_text) is not None:
            raise DatasetExistsError(f"dataset {alias_text} already exists in {self.root}")
        key, dataset_id = DatasetId.new_generated()
        if volume is not None:
            if not isinstance(self.storage, PlacedStorage):
                raise VolumeUnavailableError(f"volume {volume} is not available on this node")
            self.storage.place(dataset_id, volume)
        self.keys.save(dataset_id, key)
        try:
            await self.storage.prepare(dataset_id)
            dataset = self.storage.open(
                dataset_id, saved_states=self.chain_states, staging=self.scratch.folder
            )
            await dataset.set_alias(alias_text)
            seed = Seed(dataset_id=dataset_id, dataset_kind=kind)
            result = await dataset.commit_events(
                [seed, *(events or [])], expected_head=None, system_time=system_time
            )
            await self.catalog.add_dataset(
                dataset_id, alias_text, kind, result.new_head, result.block.sequence_number
            )
            await self.index_inputs(
                dataset_id, await dataset.chain.state(result.new_head, use_current_head=False)
            )
            await self.signer.sign(
                dataset_id, dataset.refs, result.new_head, result.block.sequence_number
            )
        except BaseException:
            await self.storage.remove(dataset_id)
            self.keys.delete(dataset_id)
            raise
        return self.open_dataset(dataset_id)

    async def create_from_snapshot(
        self,
        snapshot: DatasetSnapshot,
        *,
        system_time: Timestamp | None = None,
        volume: str | None = None,
    ) -> Dataset:
        async def resolve(ref: DatasetRef) -> DatasetId | None:
            record = await self.try_resolve(ref)
            return None if record is None else record.id

        if await self.catalog.find_by_alias(str(snapshot.name)) is not None:
            raise DatasetExistsError(f"dataset {snapshot.name} already exists in {self.root}")
        events = await normalize_snapshot(snapshot, resolve)
        return await self.create_dataset(
            snapshot.name, snapshot.kind, events, system_time=system_time, volume=volume
        )

    # --- changing -------------------------------------------------------------------------------

    async def rename_dataset(
        self, ref: DatasetRef | str, new_alias: DatasetAlias | str
    ) -> DatasetRecord:
        record = await self.resolve(ref)
        alias_text = str(DatasetAlias.parse(str(new_alias)))
        existing = await self.catalog.find_by_alias(alias_text)
        if existing is not None and existing.id != record.id:
            raise DatasetExistsError(f"dataset {alias_text} already exists in {self.root}")
        await self.open_dataset(record.id).set_alias(alias_text)
        await self.catalog.rename_dataset(record.id, alias_text)
        return await self.resolve(DatasetRef(record.id))

    async def delete_dataset(self, ref: DatasetRef | str) -> DatasetRecord:
        """Remove the dataset's folder, key and catalog entry. ``refs/head`` goes first, so a
        crash mid-way leaves a headless folder that every listing ignores."""
        record = await self.resolve(ref)
        dependants = [
            reader.alias
            for reader in (await self.graph()).readers_of(record.id)
            if reader.id != record.id
        ]
        if dependants:
            raise StorageError(
                f"dataset {record.alias} is an input of {', '.join(dependants)}; delete those first"
            )
        await self.storage.remove(record.id)
        self.keys.delete(record.id)
        await self.catalog.remove_dataset(record.id)
        await self.chain_states.delete(record.id)
        return record

    # --- importing and repairing ----------------------------------------------------------------

    async def import_dataset(self, path: Path, alias: DatasetAlias | str | None = None) -> Dataset:
        """Copy an existing dataset folder (e.g. written by the reference) into the workspace
        after validating its whole chain; every object is re-hashed on the way in."""
        source = Dataset.open_local(Path(path))
        if not source.layout.looks_like_dataset():  # type: ignore[union-attr]  # open_local always gives a layout
            raise WorkspaceError(f"{path} is not a dataset folder (no blocks/ and refs/)")
        head = await source.chain.head()
        if head is None:
            raise WorkspaceError(f"{path} has no refs/{HEAD_REF}: not a complete dataset")
        state = await validate_chain(
            source.chain, head, data=source.data, checkpoints=source.checkpoints
        )
        dataset_id, kind = state.dataset_id, state.kind
        assert dataset_id is not None and kind is not None  # a validated chain starts with a Seed
        alias_text = str(alias) if alias is not None else await source.alias()
        if alias_text is None:
            raise WorkspaceError(f"{path} has no info/alias; give the dataset a name")
        alias_text = str(DatasetAlias.parse(alias_text))
        if await self.catalog.get_dataset(dataset_id) is not None:
            raise DatasetExistsError(f"dataset {dataset_id} is already in {self.root}")
        if await self.catalog.find_by_alias(alias_text) is not None:
            raise DatasetExistsError(f"dataset {alias_text} already exists in {self.root}")
        if await self.storage.exists(dataset_id):
            if await self.storage.has_head(dataset_id):
                raise DatasetExistsError(
                    f"{self.storage.where(dataset_id)} already holds dataset {dataset_id} "
                    "(not in the catalog: run `odfd repair`)"
                )
            await self.storage.remove(dataset_id)  # leftovers of an unfinished create or delete
        staging = DatasetLayout(staging_path(self.scratch.folder())).create()
        with holding_folder(staging.root):  # the same folder once renamed into place
            try:
                copy = Dataset.open_local(staging.root, dataset_id)
                async for hash, block in source.chain.iter_blocks(head):
                    await copy.blocks.put_bytes(await source.blocks.get_bytes(hash), expected=hash)
                    event = block.event
                    new_data = getattr(event, "new_data", None)
                    new_checkpoint = getattr(event, "new_checkpoint", None)
                    if new_data is not None:
                        await copy.data.put_file(
                            local_path(source.data, new_data.physical_hash),
                            expected=new_data.physical_hash,
                        )
                    if new_checkpoint is not None:
                        await copy.checkpoints.put_file(
                            local_path(source.checkpoints, new_checkpoint.physical_hash),
                            expected=new_checkpoint.physical_hash,
                        )
                await copy.set_alias(alias_text)
                aliases = await source.remote_aliases()
                for alias_kind, refs in aliases.items():
                    if refs:
                        await copy.set_remote_aliases(alias_kind, refs)
                document = await source.refs.get_signature(HEAD_REF)
                if document is not None and _signed_by(document, dataset_id, str(path)):
                    await copy.refs.set_signature(HEAD_REF, document)
                await copy.refs.set(HEAD_REF, head, expected=None)
                await self.storage.adopt(staging, dataset_id)
            except BaseException:
                shutil.rmtree(staging.root, ignore_errors=True)
                raise
            await self.catalog.add_dataset(
                dataset_id, alias_text, kind, head, state.sequence_number
            )
            await self.index_inputs(dataset_id, state)
            await self.chain_states.save(dataset_id, head, SavedState.of(state).to_bytes())
            for alias_kind, refs in aliases.items():
                await self.catalog.set_remote_aliases(dataset_id, alias_kind, refs)
        await self.restore_signed_head(dataset_id)
        return self.open_dataset(dataset_id)

    async def repair(self) -> RepairReport:
        """Rebuild the catalog's datasets, remote aliases and the graph's index of inputs from
        the dataset folders (or the bucket's dataset prefixes)."""
        entries: list[tuple[DatasetRecord, dict[RemoteAliasKind, list[str]]]] = []
        inputs: list[tuple[DatasetId, Multihash, tuple[DatasetId, ...]]] = []
        skipped: list[tuple[str, str]] = []
        seen_aliases: dict[str, str] = {}
        for stored in await self.storage.scan():
            reason, entry, state = await self._inspect(stored)
            if entry is None:
                skipped.append((stored.where, reason))
                continue
            key = entry[0].alias.lower()
            if key in seen_aliases:
                skipped.append(
                    (stored.where, f"alias {entry[0].alias} is also used by {seen_aliases[key]}")
                )
                continue
            seen_aliases[key] = stored.where
            entries.append(entry)
            if state is not None and state.head is not None:
                if state.kind is DatasetKind.DERIVATIVE:
                    inputs.append((entry[0].id, state.head, state.transform_input_ids))
        await self.catalog.replace_datasets(entries)
        await self.dataset_inputs.replace(inputs)
        for record, _ in entries:
            await self.restore_signed_head(record.id)
        return RepairReport([record for record, _ in entries], skipped)

    async def restore_signed_head(self, dataset_id: DatasetId) -> None:
        """Bring the catalog's signed head of a dataset up to its folder's ``refs/head.sig`` (kept
        if valid, of this dataset and newer), and re-sign an owned head its signature lags
        behind (a crash between the head move and the signing)."""
        dataset = self.open_dataset(dataset_id)
        document = await dataset.refs.get_signature(HEAD_REF)
        where = self.storage.where(dataset_id, f"refs/{HEAD_REF}.sig")
        signed = None
        if document is not None:
            try:
                signed = parse_signed_head(document, where)
            except SignedHeadError:
                signed = None
        if signed is not None and signed.dataset_id == dataset_id:
            await self.signed_heads.record(signed, where)
        if signed is None or signed.head != await dataset.chain.head():
            await self.sign_head(dataset_id)

    async def _inspect(
        self, stored: StoredDataset
    ) -> tuple[
        str, tuple[DatasetRecord, dict[RemoteAliasKind, list[str]]] | None, ChainState | None
    ]:
        """Why the stored dataset cannot be registered, or its record, remote aliases and state."""
        expected_id = stored.dataset_id
        if expected_id is None:
            return "folder name is not a dataset id", None, None
        dataset = self.storage.open(expected_id)
        try:
            head = await dataset.chain.head()
            if head is None:
                return f"no refs/{HEAD_REF} (an unfinished create or delete)", None, None
            state: ChainState = await validate_chain(dataset.chain, head, dataset_id=expected_id)
            alias = await dataset.alias()
            aliases = await dataset.remote_aliases()
        except StorageError as err:
            return f"invalid: {err}", None, None
        if alias is None:
            return "no info/alias", None, None
        now = datetime.now(UTC)
        assert state.kind is not None  # a validated chain starts with a Seed
        record = DatasetRecord(
            expected_id, alias, state.kind, head, state.sequence_number, now, now
        )
        return "", (record, aliases), state


async def _open_catalog(layout: WorkspaceLayout) -> Catalog:
    """The catalog, or a ``WorkspaceError`` naming the file and the fix when SQLite cannot read
    it (the dataset folders are the truth; ``odfd repair`` rebuilds the catalog from them)."""
    try:
        return await Catalog.open(layout.catalog_path)
    except sqlite3.OperationalError as err:
        raise WorkspaceError(f"cannot open the catalog {layout.catalog_path}: {err}") from None
    except sqlite3.DatabaseError as err:
        raise WorkspaceError(
            f"the catalog {layout.catalog_path} is unreadable ({err}); "
            "run `odfd repair` to rebuild it from the dataset folders"
        ) from None


async def reset_catalog(layout: WorkspaceLayout) -> Path | None:
    """Move an unreadable catalog aside so ``repair`` can rebuild it; returns where it went."""
    path = layout.catalog_path
    try:
        catalog = await Catalog.open(path)
    except sqlite3.DatabaseError:
        broken = path.with_name(f"{path.name}.broken-{datetime.now(UTC):%Y%m%dT%H%M%S}")
        await asyncio.to_thread(_move_catalog_aside, path, broken)
        return broken
    await catalog.close()
    return None


def _signed_by(document: bytes, dataset_id: DatasetId, where: str) -> bool:
    """Whether a ``refs/head.sig`` document is a valid signature of ``dataset_id``'s key."""
    try:
        return parse_signed_head(document, where).dataset_id == dataset_id
    except SignedHeadError:
        return False


def _move_catalog_aside(path: Path, broken: Path) -> None:
    os.replace(path, broken)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
