"""The push strategy of the remotes that are dataset folders (``file://``, an S3 bucket's key
prefix): written as a pull writes, objects, then blocks, then ``head`` by compare-and-swap (a
conditional write on S3: of two racing pushes one wins, the other is told to push again); then
the owner's signed head beside it."""

from __future__ import annotations

from dataclasses import replace

from odfd.sync.errors import ChainPoint, SyncError
from odfd.sync.objects import ObjectFetcher, store_source
from odfd.sync.progress import Progress
from odfd.sync.push_steps import Outgoing, PushOptions, PushResult, compare, outgoing
from odfd.sync.target import PullTarget, commit
from odfd.sync.walk import BlockStash, LocalCursor, WalkResult
from protocol.transfer.signed_head import SignedHeadError, parse_signed_head
from storage.dataset import Dataset
from storage.errors import RefCasError
from storage.layout import HEAD_REF


async def push_into_folder(
    target: PullTarget, dest: Dataset, where: str, options: PushOptions, progress: Progress
) -> PushResult:
    """Bring the dataset folder ``dest`` (named ``where``) to ``target``'s head, then hand it
    the signed head."""
    result = await _write(target, dest, where, options, progress)
    if result.new_remote_head != target.head.hash:
        return result
    return replace(result, signed=await _send_signed_head(target, dest, where))


async def _write(
    target: PullTarget, dest: Dataset, where: str, options: PushOptions, progress: Progress
) -> PushResult:
    remote_head = await dest.chain.head()
    common = await compare(target, remote_head, dest.blocks.get_bytes, where, options.force)
    sending = await outgoing(target, common) or Outgoing([], [])
    if not sending.items and remote_head == target.head.hash:
        return PushResult(target.alias, where, remote_head, remote_head, 0, 0)
    local, items, verified, refs = target.head, sending.items, sending.verified, sending.objects
    fetcher = ObjectFetcher(
        dest, where=where, parallel=options.parallel, on_bytes=progress.add_bytes
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
        raise SyncError(f"{where} changed during the push ({err}); push again") from None
    return PushResult(target.alias, where, remote_head, local.hash, len(items), len(refs))


async def _send_signed_head(target: PullTarget, dest: Dataset, where: str) -> bool:
    """Our ``refs/head.sig`` into the folder, unless it holds a newer statement already."""
    document = await target.dataset.refs.get_signature(HEAD_REF)
    if document is None:
        return False
    held = await dest.refs.get_signature(HEAD_REF)
    if held is not None:
        try:
            if not parse_signed_head(document, "local").is_newer_than(
                parse_signed_head(held, where)
            ):
                return True
        except SignedHeadError:
            pass  # a damaged file at the destination is replaced
    await dest.refs.set_signature(HEAD_REF, document)
    return True
