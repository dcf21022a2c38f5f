"""A push this node receives (Smart Transfer, ``GET /{dataset}/push``): the use case behind the
server's WebSocket conversation, which only translates messages into these calls and these
errors into the protocol's answers.

The pushed blocks are verified like a pull's (hashes, links, a Seed first for a new dataset) and
stashed unnamed; objects arrive through signed uploads, each size- and hash-checked on the way
in (:func:`store_upload`); the commit checks the chain rules and moves ``head`` by
compare-and-swap from the head the client started from, and records the write as the pusher's.
A new dataset is assembled in a staging folder of its own, removed unless the push completes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

from odfd.app.write_log import Actor, record_write
from odfd.errors import OdfdError
from odfd.sync.errors import ChainPoint, CorruptSourceError, SyncError
from odfd.sync.objects import ObjectRef, bounded, missing_objects, objects_of, store_for
from odfd.sync.target import PullTarget, commit, discard_staging, needs_reset
from odfd.sync.walk import BlockStash, LocalCursor, VerifiedBlock, WalkResult, match_linked_run
from protocol.codec.flatbuffers import decode_block
from protocol.identity import DatasetId, Multihash
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart.tarball import TarballError, unpack_blocks
from storage.catalog import DatasetRecord
from storage.dataset import Dataset
from storage.errors import (
    ChainRuleError,
    HashMismatchError,
    ObjectNotFoundError,
    RefCasError,
    StorageError,
)
from storage.layout import DatasetLayout
from storage.workspace import Workspace

PUSH_STAGING_PREFIX = ".push-"


class PushRefusedError(OdfdError):
    """The push cannot go on; the message says why (the protocol's ``Internal`` error)."""


class SeedOverwriteError(OdfdError):
    """The pushed chain is another dataset than the one held under its name."""


class RefCollisionError(OdfdError):
    """A new dataset is pushed whose id this node already holds under another name."""

    def __init__(self, dataset_id: DatasetId) -> None:
        super().__init__(f"dataset {dataset_id} already exists on this node")
        self.dataset_id = dataset_id


class NameCollisionError(OdfdError):
    """A new dataset is pushed to a name another dataset of this node has."""

    def __init__(self, alias: str) -> None:
        super().__init__(f"a dataset named {alias} already exists on this node")
        self.alias = alias


class UploadRejectedError(OdfdError):
    """An upload whose bytes are not the object its signed URL names; nothing was stored."""


async def store_upload(
    dataset: Dataset, kind: ObjectKind, hash: Multihash, size: int, chunks: AsyncIterator[bytes]
) -> None:
    """Store an uploaded object: its bytes must hash to ``hash`` and be ``size`` long, or nothing
    is stored."""
    ref = ObjectRef(kind, hash, size)
    try:
        await store_for(dataset, kind).put_stream(
            bounded(chunks, ref, f"upload of {ref}"), expected=hash
        )
    except HashMismatchError as err:
        raise UploadRejectedError(f"{ref}: uploaded bytes hash to {err.actual}") from None
    except (CorruptSourceError, ObjectNotFoundError) as err:
        raise UploadRejectedError(str(err)) from None


class ReceivedPush:
    """One push into one dataset, from its blocks to its commit (:func:`receive_push`)."""

    def __init__(self, target: PullTarget, actor: Actor) -> None:
        self._target = target
        self._actor = actor
        self._walk: WalkResult | None = None
        self._expected: dict[tuple[ObjectKind, Multihash], ObjectRef] = {}

    @property
    def alias(self) -> str:
        return self._target.alias

    @property
    def head(self) -> Multihash | None:
        """The head the pushing client must have started from."""
        return self._target.head.hash

    @property
    def dataset(self) -> Dataset:
        """Where the uploads go: the dataset's folder, or its staging folder."""
        return self._target.dataset

    async def receive_blocks(self, tarball: bytes, count: int, *, force: bool, where: str) -> int:
        """Verify the pushed blocks against our chain and stash those we lack; returns how many
        were pushed (a forced push may start anywhere below our head)."""
        target = self._target
        try:
            blocks = unpack_blocks(tarball, expected_count=count)
            begin_after = target.head if target.head.hash is not None else None
            if force:
                begin_after = _first_parent(blocks)
            cursor = LocalCursor(
                target.dataset.chain, target.head.hash, target.head.sequence_number
            )
            walk = await match_linked_run(blocks, begin_after, cursor, where=where)
        except (TarballError, CorruptSourceError, SyncError) as err:
            raise PushRefusedError(str(err)) from None
        remote_id = walk.dataset_id
        if target.record is not None and remote_id is not None and remote_id != target.record.id:
            raise SeedOverwriteError(f"{where}: the pushed chain is of dataset {remote_id}")
        if target.record is None and walk.new_blocks and remote_id is None:
            raise PushRefusedError("a new dataset's first block must be its Seed")
        data_of = dict(blocks)
        await BlockStash(target.dataset.blocks).add_many(
            [(b.hash, data_of[b.hash]) for b in walk.new_blocks]
        )
        self._walk = walk
        pushed = [VerifiedBlock(h, decode_block(data)) for h, data in blocks]
        # Objects of every pushed block may be offered: a forced push sends the whole chain.
        self._expected = {(ref.kind, ref.hash): ref for ref in objects_of(pushed)}
        return len(pushed)

    async def check_collisions(self) -> None:
        """A new dataset may take neither an id nor a name this node already holds."""
        if self._target.record is not None:
            return
        catalog = self._target.workspace.catalog
        dataset_id = self._received().dataset_id
        assert dataset_id is not None  # checked when the blocks arrived
        if await catalog.get_dataset(dataset_id) is not None:
            raise RefCollisionError(dataset_id)
        if await catalog.find_by_alias(self._target.alias) is not None:
            raise NameCollisionError(self._target.alias)

    def expected_object(self, kind: ObjectKind, hash: Multihash, size: int) -> ObjectRef | None:
        """The object a pushed block names with this hash and size; None if none does."""
        ref = self._expected.get((kind, hash))
        return ref if ref is not None and ref.size == size else None

    async def is_stored(self, ref: ObjectRef) -> bool:
        return not await missing_objects(self._target.dataset, [ref])

    async def complete(self, *, force: bool) -> None:
        """Make the pushed blocks our history (if they change it) and record the write."""
        walk = self._received()
        if not (walk.new_blocks or (force and needs_reset(self._target, walk))):
            return
        try:
            new_head, _ = await commit(self._target, walk, force=force)
        except RefCasError as err:
            raise PushRefusedError(f"diverged: head moved to {_short(err.actual)}") from None
        except ChainRuleError as err:
            raise PushRefusedError(f"rejected: [{err.rule}] {err}") from None
        except StorageError as err:
            raise PushRefusedError(str(err)) from None
        workspace = self._target.workspace
        record = await workspace.try_resolve(self._target.alias)
        await record_write(
            workspace,
            self._actor,
            "push",
            self._target.alias,
            dataset_id=None if record is None else record.id,
            old_head=self._target.head.hash,
            new_head=new_head,
        )

    async def discard(self) -> None:
        """Remove a new dataset's staging folder (a completed push has renamed it into place)."""
        await discard_staging(self._target)

    def _received(self) -> WalkResult:
        assert self._walk is not None, "receive_blocks comes first"
        return self._walk


async def receive_push(
    workspace: Workspace, record: DatasetRecord | None, alias: str, actor: Actor
) -> ReceivedPush:
    """A push into the dataset of ``record``, or into a new one called ``alias``."""
    if record is not None:
        dataset = workspace.open_dataset(record.id)
        head = await dataset.chain.head()
        seq = (await dataset.chain.get_block(head)).sequence_number if head is not None else None
        target = PullTarget(workspace, record.alias, dataset, record, ChainPoint(head, seq))
    else:
        root = workspace.layout.datasets_dir / f"{PUSH_STAGING_PREFIX}{secrets.token_hex(8)}"
        layout = DatasetLayout(root).create()
        target = PullTarget(
            workspace, alias, Dataset.open_local(layout.root), None, ChainPoint(None, None)
        )
    return ReceivedPush(target, actor)


def _first_parent(blocks: list[tuple[Multihash, bytes]]) -> ChainPoint | None:
    """With ``force`` the pushed run may start anywhere below our head: where it starts."""
    if not blocks:
        return None
    first = decode_block(blocks[0][1])
    if first.prev_block_hash is None:
        return None
    return ChainPoint(first.prev_block_hash, first.sequence_number - 1)


def _short(hash: Multihash | None) -> str:
    return "<none>" if hash is None else hash.short()
