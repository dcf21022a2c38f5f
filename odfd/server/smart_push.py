"""``GET /{dataset}/push``: the Smart Transfer Protocol push flow, server side.

Only clients with a bearer token from ``[server] push_tokens`` may push. The pushed blocks are
verified like a pull's (hashes, links, a Seed first for a new dataset), objects arrive through
signed upload URLs of this session and are hash- and size-checked on the way in, and on
``DatasetPushComplete`` the chain rules are checked and ``head`` moves by compare-and-swap from
the head the client started from: of two concurrent pushes from the same head one wins, the
other is told the histories diverged and nothing of it becomes visible. A forced push (as the
reference sends it: the whole chain from the Seed when the histories diverged or ours is ahead)
makes our head the client's: a diverged history is replaced, a head ahead goes back.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from urllib.parse import urlencode

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.write_log import Actor, record_write
from odfd.errors import OdfdError
from odfd.server.state import STATE_KEY, ServerState, parse_dataset_path
from odfd.server.websocket import ServerChannel, accept, check_version
from odfd.sync.errors import ChainPoint, CorruptSourceError, SyncError, TransferFlowError
from odfd.sync.objects import ObjectRef, missing_objects, objects_of
from odfd.sync.target import PullTarget, commit, discard_staging, needs_reset
from odfd.sync.walk import BlockStash, LocalCursor, VerifiedBlock, WalkResult, match_linked_run
from protocol.codec.flatbuffers import decode_block
from protocol.errors import OdfError, ParseError
from protocol.identity import DatasetRef, Multihash
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import TarballError, unpack_blocks
from storage.dataset import Dataset
from storage.errors import ChainRuleError, RefCasError, StorageError
from storage.layout import DatasetLayout
from storage.workspace import Workspace

log = logging.getLogger(__name__)
PROGRESS_PING_SECONDS = 10.0
PUSH_STAGING_PREFIX = ".push-"


class _Refused(OdfdError):
    """End the session with this protocol error."""

    def __init__(self, error: m.TransferError, *, as_result: type | None = None) -> None:
        super().__init__(error.describe())
        self.error = error
        self.as_result = as_result


async def handle_push(request: web.Request) -> web.StreamResponse:
    state: ServerState = request.app[STATE_KEY]
    dataset_path = request.match_info["dataset"]
    check_version(request)
    actor = await state.pusher(request)
    if actor is None:
        raise web.HTTPUnauthorized(
            text="pushing needs a valid bearer token (Authorization: Bearer …)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    record = await state.find(dataset_path)
    ref = _parse(dataset_path)
    if record is None and ref.alias is None:
        raise web.HTTPNotFound(
            text=f"no dataset {dataset_path}: a new dataset is pushed to its name, not its id"
        )
    alias = record.alias if record is not None else str(ref.alias)
    may_force = _check_write(state, request, alias)
    if record is not None:
        dataset = state.workspace.open_dataset(record.id)
        head = await dataset.chain.head()
        seq = (await dataset.chain.get_block(head)).sequence_number if head is not None else None
        target = PullTarget(state.workspace, record.alias, dataset, record, ChainPoint(head, seq))
    else:
        target = _staged_target(state.workspace, str(ref.alias))
    ws = await accept(request)
    channel = ServerChannel(ws, f"push to {target.alias}")
    session_id = state.new_upload_session(target.dataset)
    session = _PushSession(
        channel,
        state,
        target,
        state.dataset_url(request, dataset_path),
        session_id,
        Actor(actor, "http"),
        may_force,
    )
    try:
        await session.run()
    except _Refused as refusal:
        log.info("push to %s refused: %s", target.alias, refusal)
        if refusal.as_result is not None:
            await channel.send(refusal.as_result(error=refusal.error))
        else:
            await channel.close_with_error(refusal.error)
    except TransferFlowError as err:
        log.info("%s", err)
    except OdfError as err:
        log.error("push to %s failed: %s", target.alias, err)
        await channel.close_with_error(
            m.TransferError.internal("Push", "CompleteRequest", str(err))
        )
    finally:
        state.uploads.pop(session_id, None)
        await discard_staging(target)
    await channel.finish()
    return ws


def _check_write(state: ServerState, request: web.Request, alias: str) -> bool:
    """Refuse a push the request's account may not make (404 when it may not even read the
    dataset: a new dataset can only be made under the account itself, where it may write);
    whether it may force one (rewrite history: the ``maintainer`` role)."""
    decision = state.decide(request, Action.WRITE, alias)
    if not decision.allowed:
        who = state.principal(request).label
        if decision.visible:
            raise web.HTTPForbidden(text=f"{who} may not push to {alias}: {decision.reason}")
        raise web.HTTPNotFound(text=f"no dataset {alias} on this node")
    return state.decide(request, Action.MAINTAIN, alias).allowed


def _parse(path: str) -> DatasetRef:
    try:
        return parse_dataset_path(path)
    except ParseError:
        raise web.HTTPNotFound(text=f"{path} does not name a dataset") from None


def _staged_target(workspace: Workspace, alias: str) -> PullTarget:
    root = workspace.layout.datasets_dir / f"{PUSH_STAGING_PREFIX}{secrets.token_hex(8)}"
    layout = DatasetLayout(root).create()
    return PullTarget(
        workspace, alias, Dataset.open_local(layout.root), None, ChainPoint(None, None)
    )


def _internal(phase: str, message: str) -> _Refused:
    return _Refused(m.TransferError.internal("Push", phase, message))


class _PushSession:
    def __init__(
        self,
        channel: ServerChannel,
        state: ServerState,
        target: PullTarget,
        base_url: str,
        session_id: str,
        actor: Actor,
        may_force: bool,
    ) -> None:
        self.may_force = may_force
        self.channel = channel
        self.state = state
        self.target = target
        self.base_url = base_url
        self.session_id = session_id
        self.actor = actor

    async def run(self) -> None:
        request = await self.channel.receive(m.DatasetPushRequest.from_json, "DatasetPushRequest")
        if request is None:
            return
        if request.current_head != self.target.head.hash:
            raise _Refused(
                m.TransferError(
                    "InvalidHead", head=request.current_head, tail=self.target.head.hash
                ),
                as_result=m.Accepted,
            )
        await self.channel.send(m.Accepted())
        metadata = await self.channel.receive(
            m.DatasetPushMetadataRequest.from_json, "DatasetPushMetadataRequest"
        )
        if metadata is None:
            return
        force = request.force_update_if_diverged
        if force and not self.may_force:
            # Short enough for a WebSocket close reason (123 bytes with its JSON).
            raise _internal("MetadataRequest", "forced push needs maintainer role")
        walk, pushed = await self._receive_blocks(metadata.new_blocks, force)
        await self.channel.send(m.Accepted())
        if pushed:
            # Objects of every pushed block may be offered: a forced push sends the whole chain.
            await self._receive_objects(walk, pushed)
        complete = await self.channel.receive(
            m.DatasetPushComplete.from_json, "DatasetPushComplete"
        )
        if complete is None:
            return
        if walk.new_blocks or (force and needs_reset(self.target, walk)):
            await self._commit(walk, force)
        await self.channel.send(m.DatasetPushCompleteConfirmed())

    async def _receive_blocks(
        self, batch: m.MetadataBlocksBatch, force: bool
    ) -> tuple[WalkResult, list[VerifiedBlock]]:
        """The walk against our chain, and every pushed block (verified), oldest first."""
        if batch.media_type != m.MEDIA_TAR_GZ or batch.encoding != m.ENCODING_RAW:
            raise _internal(
                "MetadataRequest", f"unsupported batch {batch.media_type} ({batch.encoding})"
            )
        target = self.target
        try:
            blocks = unpack_blocks(batch.payload, expected_count=batch.num_blocks)
            begin_after = target.head if target.head.hash is not None else None
            if force:
                begin_after = _first_parent(blocks)
            cursor = LocalCursor(
                target.dataset.chain, target.head.hash, target.head.sequence_number
            )
            walk = await match_linked_run(blocks, begin_after, cursor, where=self.channel.where)
        except (TarballError, CorruptSourceError, SyncError) as err:
            raise _internal("MetadataRequest", str(err)) from None
        remote_id = walk.dataset_id
        if target.record is not None and remote_id is not None and remote_id != target.record.id:
            raise _Refused(m.TransferError("SeedBlockOverwriteRestricted"))
        if target.record is None and walk.new_blocks and remote_id is None:
            raise _internal("MetadataRequest", "a new dataset's first block must be its Seed")
        data_of = dict(blocks)
        await BlockStash(target.dataset.blocks).add_many(
            [(b.hash, data_of[b.hash]) for b in walk.new_blocks]
        )
        return walk, [VerifiedBlock(h, decode_block(data)) for h, data in blocks]

    async def _check_collisions(self, walk: WalkResult) -> None:
        if self.target.record is not None:
            return
        catalog = self.state.workspace.catalog
        dataset_id = walk.dataset_id
        assert dataset_id is not None  # checked when the blocks arrived
        if await catalog.get_dataset(dataset_id) is not None:
            raise _Refused(
                m.TransferError("RefCollision", dataset_id=dataset_id),
                as_result=m.DatasetPushObjectsTransferResponse,
            )
        if await catalog.find_by_alias(self.target.alias) is not None:
            raise _Refused(
                m.TransferError("NameCollision", dataset_alias=self.target.alias),
                as_result=m.DatasetPushObjectsTransferResponse,
            )

    async def _receive_objects(self, walk: WalkResult, pushed: list[VerifiedBlock]) -> None:
        needed = {(ref.kind, ref.hash): ref for ref in objects_of(pushed)}
        while True:
            request = await self.channel.receive(
                m.DatasetPushObjectsTransferRequest.from_json, "DatasetPushObjectsTransferRequest"
            )
            if request is None:
                raise TransferFlowError(
                    f"{self.channel.where}: the client left before uploading objects"
                )
            await self._check_collisions(walk)
            strategies = []
            for file in request.object_files:
                kind = ObjectKind.DATA if file.object_type == "DataSlice" else ObjectKind.CHECKPOINT
                ref = needed.get((kind, file.physical_hash))
                if ref is None or ref.size != file.size:
                    raise _Refused(
                        m.TransferError.internal(
                            "Push",
                            "ObjectsRequest",
                            f"no pushed block names {file.object_type} "
                            f"{file.physical_hash} of {file.size} bytes",
                        ),
                        as_result=m.DatasetPushObjectsTransferResponse,
                    )
                strategies.append(await self._strategy(file, ref))
            await self.channel.send(m.DatasetPushObjectsTransferResponse(tuple(strategies)))
            await self._await_uploads()
            if not request.is_truncated:
                return

    async def _strategy(
        self, file: m.ObjectFileReference, ref: ObjectRef
    ) -> m.PushObjectTransferStrategy:
        if not await missing_objects(self.target.dataset, [ref]):
            return m.PushObjectTransferStrategy(file, "SkipUpload")
        query, expires = self.state.signer.sign(
            "PUT", self.session_id, ref.kind.value, ref.hash, ref.size
        )
        url = f"{self.base_url}{ref.kind.value}/{ref.hash.to_multibase()}?{urlencode(query)}"
        return m.PushObjectTransferStrategy(
            file,
            "HttpUpload",
            m.TransferUrl(url, ((m.VERSION_HEADER, str(m.PROTOCOL_VERSION)),), expires),
        )

    async def _await_uploads(self) -> None:
        while True:
            try:
                async with asyncio.timeout(PROGRESS_PING_SECONDS):
                    progress = await self.channel.receive(
                        m.DatasetPushObjectsUploadProgressResponse.from_json,
                        "DatasetPushObjectsUploadProgressResponse",
                    )
            except TimeoutError:
                await self.channel.send(m.DatasetPushObjectsUploadProgressRequest())
                continue
            if progress is None:
                raise TransferFlowError(f"{self.channel.where}: the client left while uploading")
            if progress.complete:
                return

    async def _commit(self, walk: WalkResult, force: bool) -> None:
        try:
            new_head, _ = await commit(self.target, walk, force=force)
        except RefCasError as err:
            raise _internal(
                "CompleteRequest", f"diverged: head moved to {_short(err.actual)}"
            ) from None
        except ChainRuleError as err:
            raise _internal("CompleteRequest", f"rejected: [{err.rule}] {err}") from None
        except StorageError as err:
            raise _internal("CompleteRequest", str(err)) from None
        record = await self.state.workspace.try_resolve(self.target.alias)
        await record_write(
            self.state.workspace,
            self.actor,
            "push",
            self.target.alias,
            dataset_id=None if record is None else record.id,
            old_head=self.target.head.hash,
            new_head=new_head,
        )


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
