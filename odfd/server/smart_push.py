"""``GET /{dataset}/push``: the Smart Transfer Protocol push flow, server side.

Only clients with a bearer token from ``[server] push_tokens`` may push. The pushed blocks are
verified like a pull's (hashes, links, a Seed first for a new dataset), objects arrive through
signed upload URLs of this session and are hash- and size-checked on the way in, and on
``DatasetPushComplete`` the chain rules are checked and ``head`` moves by compare-and-swap from
the head the client started from: of two concurrent pushes from the same head one wins, the
other is told the histories diverged and nothing of it becomes visible. A forced push (as the
reference sends it: the whole chain from the Seed when the histories diverged or ours is ahead)
makes our head the client's: a diverged history is replaced, a head ahead goes back. The work is
``odfd.app.receive_push``'s; this module turns the protocol's messages into its calls and its
errors into the protocol's answers.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlencode

from aiohttp import web

from odfd.app.authorization import Action
from odfd.app.receive_push import (
    NameCollisionError,
    PushRefusedError,
    ReceivedPush,
    RefCollisionError,
    SeedOverwriteError,
    receive_push,
)
from odfd.app.served_datasets import parse_dataset_path
from odfd.app.write_log import Actor
from odfd.errors import OdfdError
from odfd.server.refusals import NO_TOKEN
from odfd.server.refusals import refusal as unauthorized
from odfd.server.state import STATE_KEY, ServerState
from odfd.server.websocket import ServerChannel, accept, check_version, require_version_header
from odfd.sync.errors import TransferFlowError
from protocol.errors import OdfError, ParseError
from protocol.identity import DatasetRef
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart import messages as m

log = logging.getLogger(__name__)
PROGRESS_PING_SECONDS = 10.0


class _Refused(OdfdError):
    """End the session with this protocol error."""

    def __init__(self, error: m.TransferError, *, as_result: type | None = None) -> None:
        super().__init__(error.describe())
        self.error = error
        self.as_result = as_result


async def handle_push(request: web.Request) -> web.StreamResponse:
    state: ServerState = request.app[STATE_KEY]
    dataset_path = request.match_info["dataset"]
    # The reference's order: the header's presence, then the token, then the version.
    require_version_header(request)
    actor = await state.pusher(request)
    if actor is None:
        # The push handler's own refusal of an anonymous caller: its word first.
        raise unauthorized(f"Unauthorized: {NO_TOKEN}", "Bearer")
    check_version(request)
    record = await state.find(dataset_path)
    ref = _parse(dataset_path)
    if record is None and ref.alias is None:
        raise web.HTTPNotFound(
            text=f"no dataset {dataset_path}: a new dataset is pushed to its name, not its id"
        )
    alias = record.alias if record is not None else str(ref.alias)
    may_force = _check_write(state, request, alias)
    push = await receive_push(state.workspace, record, alias, Actor(actor, "http"))
    ws = await accept(request)
    channel = ServerChannel(ws, f"push to {push.alias}")
    session_id = state.new_upload_session(push.dataset)
    session = _PushSession(
        channel, state, push, state.dataset_url(request, dataset_path), session_id, may_force
    )
    try:
        await session.run()
    except _Refused as refusal:
        log.info("push to %s refused: %s", push.alias, refusal)
        if refusal.as_result is not None:
            await channel.send(refusal.as_result(error=refusal.error))
        else:
            await channel.close_with_error(refusal.error)
    except TransferFlowError as err:
        log.info("%s", err)
    except OdfError as err:
        log.error("push to %s failed: %s", push.alias, err)
        await channel.close_with_error(
            m.TransferError.internal("Push", "CompleteRequest", str(err))
        )
    finally:
        state.uploads.pop(session_id, None)
        await push.discard()
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


def _internal(phase: str, message: str) -> _Refused:
    return _Refused(m.TransferError.internal("Push", phase, message))


class _PushSession:
    """The messages of one push, each turned into a call of the received push."""

    def __init__(
        self,
        channel: ServerChannel,
        state: ServerState,
        push: ReceivedPush,
        base_url: str,
        session_id: str,
        may_force: bool,
    ) -> None:
        self.may_force = may_force
        self.channel = channel
        self.state = state
        self.push = push
        self.base_url = base_url
        self.session_id = session_id

    async def run(self) -> None:
        request = await self.channel.receive(m.DatasetPushRequest.from_json, "DatasetPushRequest")
        if request is None:
            return
        if request.current_head != self.push.head:
            raise _Refused(
                m.TransferError("InvalidHead", head=request.current_head, tail=self.push.head),
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
        pushed = await self._receive_blocks(metadata.new_blocks, force)
        await self.channel.send(m.Accepted())
        if pushed:
            await self._receive_objects()
        complete = await self.channel.receive(
            m.DatasetPushComplete.from_json, "DatasetPushComplete"
        )
        if complete is None:
            return
        try:
            await self.push.complete(force=force)
        except PushRefusedError as err:
            raise _internal("CompleteRequest", str(err)) from None
        await self.channel.send(m.DatasetPushCompleteConfirmed())

    async def _receive_blocks(self, batch: m.MetadataBlocksBatch, force: bool) -> int:
        """How many blocks were pushed (all verified)."""
        if batch.media_type != m.MEDIA_TAR_GZ or batch.encoding != m.ENCODING_RAW:
            raise _internal(
                "MetadataRequest", f"unsupported batch {batch.media_type} ({batch.encoding})"
            )
        try:
            return await self.push.receive_blocks(
                batch.payload, batch.num_blocks, force=force, where=self.channel.where
            )
        except PushRefusedError as err:
            raise _internal("MetadataRequest", str(err)) from None
        except SeedOverwriteError:
            raise _Refused(m.TransferError("SeedBlockOverwriteRestricted")) from None

    async def _check_collisions(self) -> None:
        try:
            await self.push.check_collisions()
        except RefCollisionError as err:
            raise _Refused(
                m.TransferError("RefCollision", dataset_id=err.dataset_id),
                as_result=m.DatasetPushObjectsTransferResponse,
            ) from None
        except NameCollisionError as err:
            raise _Refused(
                m.TransferError("NameCollision", dataset_alias=err.alias),
                as_result=m.DatasetPushObjectsTransferResponse,
            ) from None

    async def _receive_objects(self) -> None:
        while True:
            request = await self.channel.receive(
                m.DatasetPushObjectsTransferRequest.from_json, "DatasetPushObjectsTransferRequest"
            )
            if request is None:
                raise TransferFlowError(
                    f"{self.channel.where}: the client left before uploading objects"
                )
            await self._check_collisions()
            strategies = []
            for file in request.object_files:
                strategies.append(await self._strategy(file))
            await self.channel.send(m.DatasetPushObjectsTransferResponse(tuple(strategies)))
            await self._await_uploads()
            if not request.is_truncated:
                return

    async def _strategy(self, file: m.ObjectFileReference) -> m.PushObjectTransferStrategy:
        kind = ObjectKind.DATA if file.object_type == "DataSlice" else ObjectKind.CHECKPOINT
        ref = self.push.expected_object(kind, file.physical_hash, file.size)
        if ref is None:
            raise _Refused(
                m.TransferError.internal(
                    "Push",
                    "ObjectsRequest",
                    f"no pushed block names {file.object_type} "
                    f"{file.physical_hash} of {file.size} bytes",
                ),
                as_result=m.DatasetPushObjectsTransferResponse,
            )
        if await self.push.is_stored(ref):
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
