"""``odfd push DATASET URL``: publish a dataset's new history to a remote.

- ``http(s)://``: Smart Transfer Protocol (metadata tarball, objects through the server's
  signed upload URLs, commit by the server), authorised by a bearer token;
- ``file://``, ``s3://``, ``s3+http(s)://``: a dataset folder (on disk or under a bucket's key
  prefix), written like a pull writes (objects, blocks, ``head`` last by compare-and-swap, a
  conditional write on S3: of two racing pushes one wins, the other is told to push again);
- ``ipns://[KEY]``: the dataset folder added to IPFS (UnixFS, CIDv1, raw leaves, ``info/``
  left out, as the reference publishes) and published under the IPNS key (default: a key named
  after the dataset, created on first push).

Before anything is sent, the remote head is compared with the local history: a remote on the
same history and behind is brought forward; a remote ahead or diverged is refused unless
``force`` (then the remote's history is replaced from the last shared block).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp

from odfd.sync import smart_client as smart
from odfd.sync.errors import (
    ChainPoint,
    DivergedError,
    RemoteAheadError,
    SyncError,
    UnsupportedUrlError,
)
from odfd.sync.objects import DEFAULT_RETRIES, ObjectFetcher, ObjectRef, objects_of, store_source
from odfd.sync.progress import Progress
from odfd.sync.remote import open_s3_dataset, open_source
from odfd.sync.remote_url import RemoteUrl, parse_remote_url
from odfd.sync.target import PullTarget, commit, remember_remote
from odfd.sync.walk import BlockStash, LocalCursor, VerifiedBlock, WalkResult, walk_remote_chain
from protocol.errors import ParseError
from protocol.identity import Multihash
from protocol.model import AddData, ExecuteTransform
from protocol.transfer.signed_head import SIGNATURE_REF, SignedHeadError, parse_signed_head
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import pack_blocks
from storage.dataset import Dataset
from storage.dataset_storage import local_file
from storage.errors import RefCasError
from storage.ipfs_client import (
    IpfsClient,
    IpfsKey,
    IpfsNotFoundError,
    IpfsTimeoutError,
    IpnsName,
)
from storage.ipfs_settings import IpfsSettings
from storage.layout import HEAD_REF, DatasetLayout, dataset_dir_name
from storage.s3_settings import S3Settings
from storage.stores.remote import RemoteUnavailableError
from storage.workspace import Workspace

IPNS_KEY_PREFIX = "odfd-"
_RESOLVE_OWN_KEY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class PushOptions:
    force: bool = False
    token: str | None = None
    parallel: int = 8
    ipfs: IpfsSettings = IpfsSettings()
    """The IPFS node an ``ipns://`` push adds the dataset to."""
    s3: S3Settings = S3Settings()
    """Credentials and retries for ``s3://`` remotes."""


@dataclass(frozen=True, slots=True)
class PushResult:
    alias: str
    remote: str
    old_remote_head: Multihash | None
    new_remote_head: Multihash | None
    num_blocks: int
    num_objects: int
    signed: bool = False
    """Whether the remote now holds the dataset's signed head (``docs/signed-heads.md``)."""

    @property
    def updated(self) -> bool:
        return self.num_blocks > 0 or self.new_remote_head != self.old_remote_head

    def describe(self) -> str:
        if self.num_blocks == 0 and self.updated:
            return f"{self.remote}'s head reset to ours, {self.new_remote_head}"
        if self.num_blocks == 0:
            return f"{self.remote} is up to date"
        return (
            f"{self.num_blocks} block(s), {self.num_objects} object(s) to {self.remote}; "
            f"remote head {self.new_remote_head}"
        )


async def push(
    workspace: Workspace,
    ref: str,
    url: str,
    *,
    options: PushOptions = PushOptions(),
    progress: Progress | None = None,
) -> PushResult:
    record = await workspace.resolve(ref)
    dataset = workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        raise SyncError(f"dataset {record.alias} has no blocks to push")
    local = ChainPoint(head, (await dataset.chain.get_block(head)).sequence_number)
    remote = parse_remote_url(url)
    progress = progress or Progress(f"push {record.alias}", enabled=False)
    target = PullTarget(workspace, record.alias, dataset, record, local)
    async with aiohttp.ClientSession() as session:
        try:
            if remote.scheme in ("http", "https"):
                result = await _push_smart(target, remote, options, session, progress)
            elif remote.scheme in ("file", "s3"):
                dest = await _destination(target, remote, options.s3)
                result = await _push_folder(target, remote, dest, options, progress)
            elif remote.scheme == "ipns":
                result = await _push_ipns(target, remote, options, session)
                remote = parse_remote_url(result.remote)
            else:
                raise UnsupportedUrlError(
                    f"{url}: cannot push to ipfs:// (a CID names fixed content); "
                    "push to ipns:// instead"
                )
        finally:
            progress.finish()
    if result.new_remote_head == local.hash and remote.scheme in ("http", "https", "file", "s3"):
        result = replace(result, signed=await _send_signed_head(target, remote, options))
    if result.num_blocks or result.new_remote_head == local.hash:
        await remember_remote(target, remote, "push")
        await workspace.catalog.record_synced(record.id, remote.text, local.hash)  # type: ignore[arg-type]  # a pushed dataset has a head
    return result


# --- signed heads ------------------------------------------------------------------------------


async def _send_signed_head(target: PullTarget, remote: RemoteUrl, options: PushOptions) -> bool:
    """Hand the remote our ``refs/head.sig`` once it is at our head (a folder gets the file, a
    server a ``PUT``). A server that does not know signed heads (404/405) or holds a newer
    statement (409) keeps its own; the push itself has succeeded either way."""
    document = await target.dataset.refs.get_signature(HEAD_REF)
    if document is None:
        return False
    if remote.scheme in ("file", "s3"):
        dest = await _destination(target, remote, options.s3)
        held = await dest.refs.get_signature(HEAD_REF)
        if held is not None:
            try:
                if not parse_signed_head(document, "local").is_newer_than(
                    parse_signed_head(held, str(remote))
                ):
                    return True
            except SignedHeadError:
                pass  # a damaged file at the destination is replaced
        await dest.refs.set_signature(HEAD_REF, document)
        return True
    headers = {**smart.auth_headers(options.token), "Content-Type": "application/json"}
    url = f"{remote.http_base}refs/{SIGNATURE_REF}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.put(url, data=document, headers=headers) as response:
                if response.status < 300:
                    return True
                if response.status in (404, 405, 409):
                    return False
                detail = (await response.text(errors="replace"))[:300]
                raise SyncError(f"{url} refused the signed head ({response.status}): {detail}")
    except (aiohttp.ClientConnectionError, TimeoutError) as err:
        raise RemoteUnavailableError(f"PUT {url} failed: {err}") from None


# --- comparing histories ------------------------------------------------------------------------


async def _compare(
    target: PullTarget,
    remote_head: Multihash | None,
    fetch,
    where: str,
    force: bool,
) -> ChainPoint | None:
    """The last block both histories share (``None``: push everything), or an error when the
    remote is ahead or diverged and not ``force``."""
    local = target.head
    if remote_head is None:
        return None
    if remote_head == local.hash:
        return local
    chain = target.dataset.chain
    if await chain.blocks.contains(remote_head):
        async for hash, block in chain.iter_blocks(local.hash):
            if hash == remote_head:
                return ChainPoint(hash, block.sequence_number)
    walk = await walk_remote_chain(
        remote_head,
        fetch,
        LocalCursor(chain, local.hash, local.sequence_number),
        BlockStash(None),
        where=where,
    )
    if not force:
        if walk.common is not None and walk.common.hash == local.hash:
            raise RemoteAheadError(
                f"push {target.alias} to {where}: the remote is {len(walk.new_blocks)} "
                "block(s) ahead on the same history; pull first (or --force)"
            )
        raise DivergedError(
            f"push {target.alias} to {where}",
            local,
            walk.remote,
            walk.common,
            hint="pull and reconcile, or use --force to replace the remote's history",
        )
    return walk.common


@dataclass(frozen=True, slots=True)
class _Outgoing:
    """What the remote lacks: our blocks after the shared one, oldest first, and their objects."""

    items: list[tuple[Multihash, bytes, VerifiedBlock]]
    objects: list[ObjectRef]

    @property
    def verified(self) -> list[VerifiedBlock]:
        return [item for _, _, item in self.items]


async def _outgoing(target: PullTarget, common: ChainPoint | None) -> _Outgoing | None:
    """``None`` when the remote is at our head already."""
    head = target.head.hash
    assert head is not None  # checked by push()
    if common is not None and common.hash == head:
        return None
    chain = target.dataset.chain
    items = []
    async for hash, block in chain.iter_blocks(head, common.hash if common else None):
        items.append((hash, await chain.get_block_bytes(hash), VerifiedBlock(hash, block)))
    items.reverse()
    return _Outgoing(items, objects_of([item for _, _, item in items]))


# --- smart (HTTP) -------------------------------------------------------------------------------


async def _push_smart(
    target: PullTarget,
    remote: RemoteUrl,
    options: PushOptions,
    session: aiohttp.ClientSession,
    progress: Progress,
) -> PushResult:
    headers = smart.auth_headers(options.token)
    async with open_source(remote, session, IpfsSettings(), headers) as source:
        remote_head = await source.dataset.refs.get("head")
        common = await _compare(
            target, remote_head, source.dataset.blocks.get_bytes, remote.http_base, options.force
        )
    if remote_head is not None and (common is None or common.hash != remote_head):
        common = None  # forced over a remote ahead or diverged: the whole chain, as the reference
    outgoing = await _outgoing(target, common)
    if outgoing is None:
        return PushResult(target.alias, remote.text, remote_head, remote_head, 0, 0)
    local, items, verified, refs = target.head, outgoing.items, outgoing.verified, outgoing.objects
    count, payload = await asyncio.to_thread(pack_blocks, ((h, d) for h, d, _ in items))
    plan = m.TransferPlan(
        len(items),
        len(refs),
        _records(verified),
        sum(len(d) for _, d, _ in items),
        sum(r.size for r in refs),
    )
    progress.add_blocks(len(items))
    async with smart.connect(session, remote.http_base, "push", options.token) as channel:
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
            async with open_source(remote, session, IpfsSettings(), headers) as source:
                now = await source.dataset.refs.get("head")
            raise DivergedError(
                f"push {target.alias} to {remote}",
                local,
                ChainPoint(now, None),
                common,
                hint=f"the remote refused the commit ({err.error.describe()}); pull and retry",
            ) from None
    return PushResult(target.alias, remote.text, remote_head, local.hash, len(items), len(refs))


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
                    detail = (await response.text(errors="replace"))[:300]
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


def _records(blocks: list[VerifiedBlock]) -> int:
    total = 0
    for item in blocks:
        event = item.block.event
        if isinstance(event, (AddData, ExecuteTransform)) and event.new_data is not None:
            total += event.new_data.offset_interval.end - event.new_data.offset_interval.start + 1
    return total


# --- file:// and S3 -------------------------------------------------------------------------------


async def _destination(target: PullTarget, remote: RemoteUrl, s3: S3Settings) -> Dataset:
    """The dataset folder a ``file://`` or S3 push writes into."""
    dataset_id = target.record.id if target.record else None
    if remote.scheme == "s3":
        return await open_s3_dataset(remote, s3, dataset_id)
    layout = DatasetLayout(remote.path).create()
    return Dataset.open_local(layout.root, dataset_id)


async def _push_folder(
    target: PullTarget,
    remote: RemoteUrl,
    dest: Dataset,
    options: PushOptions,
    progress: Progress,
) -> PushResult:
    """Write into a dataset folder as a pull would: objects, then blocks, then ``head``."""
    remote_head = await dest.chain.head()
    common = await _compare(target, remote_head, dest.blocks.get_bytes, str(remote), options.force)
    outgoing = await _outgoing(target, common) or _Outgoing([], [])
    if not outgoing.items and remote_head == target.head.hash:
        return PushResult(target.alias, remote.text, remote_head, remote_head, 0, 0)
    local, items, verified, refs = target.head, outgoing.items, outgoing.verified, outgoing.objects
    fetcher = ObjectFetcher(
        dest, where=str(remote), parallel=options.parallel, on_bytes=progress.add_bytes
    )
    await fetcher.fetch_all(refs, store_source(target.dataset))
    await BlockStash(dest.blocks).add_many([(h, d) for h, d, _ in items])
    cursor = LocalCursor(
        dest.chain,
        remote_head,
        None if remote_head is None else (await dest.chain.get_block(remote_head)).sequence_number,
    )
    walk = WalkResult(verified, common, cursor.head, ChainPoint(local.hash, local.sequence_number))
    folder = PullTarget(target.workspace, target.alias, dest, target.record, cursor.head)
    try:
        if remote_head is None:
            await dest.chain.append_stored([item.hash for item in verified])
            await dest.set_alias(target.alias)
        else:
            await commit(folder, walk, force=options.force)
    except RefCasError as err:
        raise SyncError(f"{remote} changed during the push ({err}); push again") from None
    return PushResult(target.alias, remote.text, remote_head, local.hash, len(items), len(refs))


# --- ipns:// ------------------------------------------------------------------------------------


async def _push_ipns(
    target: PullTarget, remote: RemoteUrl, options: PushOptions, session: aiohttp.ClientSession
) -> PushResult:
    settings = options.ipfs
    client = settings.client()
    name, subpath = remote.ipfs_root
    if subpath:
        raise UnsupportedUrlError(f"{remote}: one dataset per IPNS key; no sub-path allowed")
    assert target.record is not None  # pushes start from a workspace dataset
    if target.dataset.layout is None:
        raise UnsupportedUrlError(
            f"{remote}: an IPNS push adds the dataset's folder to IPFS, but this node keeps "
            f"{target.alias} in a bucket ([storage] url)"
        )
    key = await _ipns_key(
        client, name or f"{IPNS_KEY_PREFIX}{dataset_dir_name(target.record.id)}", create=not name
    )
    published = parse_remote_url(f"ipns://{key.id}")
    remote_head = common = None
    try:
        # Our own key resolves locally at once; a long wait means it was never published.
        await IpfsClient(settings.api, fetch_timeout=_RESOLVE_OWN_KEY_SECONDS).name_resolve(key.id)
    except (IpfsNotFoundError, IpfsTimeoutError):
        pass
    else:
        async with open_source(published, session, settings) as source:
            remote_head = await source.dataset.refs.get("head")
            common = await _compare(
                target, remote_head, source.dataset.blocks.get_bytes, str(published), options.force
            )
    local = target.head
    assert target.dataset.layout is not None and local.hash is not None
    cid = await client.add_directory(target.dataset.layout.root, exclude=("info",))
    await client.name_publish(cid, key=key.name)
    assert local.sequence_number is not None  # a head has a sequence number
    blocks = local.sequence_number - (
        common.sequence_number if common and common.sequence_number is not None else -1
    )
    return PushResult(target.alias, published.text, remote_head, local.hash, blocks, 0)


async def _ipns_key(client: IpfsClient, name_or_id: str, *, create: bool) -> IpfsKey:
    """The key named ``name_or_id`` or whose IPNS name it is; created if ``create``."""
    try:
        wanted = str(IpnsName.parse(name_or_id))
    except ParseError:
        wanted = None
    for key in await client.key_list():
        if key.name == name_or_id or (wanted is not None and str(key.id) == wanted):
            return key
    if not create:
        raise SyncError(f"the IPFS node has no key named {name_or_id} or publishing that IPNS name")
    return await client.key_gen(name_or_id)
