"""The Smart Transfer Protocol's push (``smart_http``): compare histories through the Simple
Transfer Protocol view, send the metadata tarball, upload the objects to the server's signed
URLs (``parallel`` at a time, retried on connection failures and 5xx answers) while answering
its progress requests, then ask it to commit; the signed head follows by a ``PUT``."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import aiohttp

from odfd.sync.errors import AccessDeniedError, ChainPoint, DivergedError, SyncError
from odfd.sync.objects import DEFAULT_RETRIES
from odfd.sync.progress import Progress
from odfd.sync.push_steps import PushOptions, PushResult, compare, outgoing
from odfd.sync.target import PullTarget
from odfd.sync.transport import smart_client as smart
from odfd.sync.transport.simple_http import SimpleHttpTransport
from protocol.transfer.signed_head import SIGNATURE_REF
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from storage.layout import HEAD_REF
from storage.stores.http import refusal_message
from storage.stores.remote import RemoteStatusError, RemoteUnavailableError


async def push_smart(
    remote: SimpleHttpTransport, target: PullTarget, options: PushOptions, progress: Progress
) -> PushResult:
    async with aiohttp.ClientSession() as session:
        result = await _push(remote, session, target, options, progress)
    if result.new_remote_head != target.head.hash:
        return result
    return replace(result, signed=await _send_signed_head(remote, target))


async def _push(
    remote: SimpleHttpTransport,
    session: aiohttp.ClientSession,
    target: PullTarget,
    options: PushOptions,
    progress: Progress,
) -> PushResult:
    async with remote.open(session) as view:
        try:
            remote_head = await view.head()
        except RemoteStatusError as err:
            if err.status not in (401, 403):
                raise
            raise AccessDeniedError(
                f"{remote.url}: the server refused to push ({err.status}): give a valid token "
                "(--token)"
            ) from None
        common = await compare(target, remote_head, view.block, remote.http_base, options.force)
    if remote_head is not None and (common is None or common.hash != remote_head):
        common = None  # forced over a remote ahead or diverged: the whole chain, as the reference
    sending = await outgoing(target, common)
    if sending is None:
        return PushResult(target.alias, remote.url, remote_head, remote_head, 0, 0)
    local, items, refs = target.head, sending.items, sending.objects
    count, payload = await asyncio.to_thread(pack_blocks, ((h, d) for h, d, _ in items))
    plan = m.TransferPlan(
        len(items),
        len(refs),
        sending.records,
        sum(len(d) for _, d, _ in items),
        sum(r.size for r in refs),
    )
    progress.add_blocks(len(items))
    async with smart.connect(session, remote.http_base, "push", remote.token) as channel:
        await smart.push_begin(
            channel, remote_head, plan, options.force, m.MetadataBlocksBatch(count, payload)
        )
        files = tuple(
            m.ObjectFileReference(
                "DataSlice" if r.kind is ObjectKind.DATA else "Checkpoint", r.hash, r.size
            )
            for r in refs
        )
        strategies = await smart.push_object_urls(channel, files)
        progress.set_phase("objects", objects_total=len(strategies))
        uploads = asyncio.ensure_future(
            _upload_all(session, target.dataset, strategies, options, progress)
        )
        try:
            await smart.push_uploads(channel, uploads, lambda: progress.objects)
        finally:
            if not uploads.done():
                uploads.cancel()
        try:
            await smart.push_complete(channel)
        except smart.RemoteTransferError as err:
            # The server refused to commit (e.g. another push moved its head): say where it is now.
            async with remote.open(session) as view:
                now = await view.head()
            raise DivergedError(
                f"push {target.alias} to {remote.url}",
                local,
                ChainPoint(now, None),
                common,
                hint=f"the remote refused the commit ({err.error.describe()}); pull and retry",
            ) from None
    return PushResult(target.alias, remote.url, remote_head, local.hash, len(items), len(refs))


async def _send_signed_head(remote: SimpleHttpTransport, target: PullTarget) -> bool:
    """``PUT`` our ``refs/head.sig`` once the server is at our head. A server that does not know
    signed heads (404/405) or holds a newer statement (409) keeps its own; the push itself has
    succeeded either way."""
    document = await target.dataset.refs.get_signature(HEAD_REF)
    if document is None:
        return False
    headers = {**smart.auth_headers(remote.token), "Content-Type": "application/json"}
    url = f"{remote.http_base}refs/{SIGNATURE_REF}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.put(url, data=document, headers=headers) as response:
                if response.status < 300:
                    return True
                if response.status in (404, 405, 409):
                    return False
                detail = refusal_message(await response.text(errors="replace"))[:300]
                raise SyncError(f"{url} refused the signed head ({response.status}): {detail}")
    except (aiohttp.ClientConnectionError, TimeoutError) as err:
        raise RemoteUnavailableError(f"PUT {url} failed: {err}") from None


async def _upload_all(
    session: aiohttp.ClientSession,
    dataset: Dataset,
    strategies: tuple[m.PushObjectTransferStrategy, ...],
    options: PushOptions,
    progress: Progress,
) -> None:
    limit = asyncio.Semaphore(options.parallel)

    async def one(strategy: m.PushObjectTransferStrategy) -> None:
        if strategy.push_strategy == "SkipUpload" or strategy.upload_to is None:
            progress.object_done()
            return
        file = strategy.object_file
        store = dataset.data if file.object_type == "DataSlice" else dataset.checkpoints
        async with limit:
            path = await local_file(store, file.physical_hash)
            await _upload(session, path, file, strategy.upload_to)
        progress.add_bytes(file.size)
        progress.object_done()

    async with asyncio.TaskGroup() as group:
        for strategy in strategies:
            group.create_task(one(strategy))


async def _upload(
    session: aiohttp.ClientSession, path: Path, file: m.ObjectFileReference, url: m.TransferUrl
) -> None:
    headers = dict(url.headers)
    headers["Content-Type"] = "application/octet-stream"
    headers["Content-Length"] = str(file.size)
    for attempt in range(1, DEFAULT_RETRIES + 1):
        try:
            body = await asyncio.to_thread(open, path, "rb")  # aiohttp reads it in the executor
            with body:
                async with session.put(url.url, data=body, headers=headers) as response:
                    if response.status < 300:
                        return
                    detail = refusal_message(await response.text(errors="replace"))[:300]
                    if response.status < 500 or attempt == DEFAULT_RETRIES:
                        raise SyncError(
                            f"upload of {file.object_type} {file.physical_hash} was refused "
                            f"({response.status}): {detail}"
                        )
        except (aiohttp.ClientConnectionError, TimeoutError) as err:
            if attempt == DEFAULT_RETRIES:
                raise RemoteUnavailableError(
                    f"upload of {file.physical_hash} failed: {err}"
                ) from None
        await asyncio.sleep(0.25 * 2 ** (attempt - 1))
