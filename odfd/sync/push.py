"""``odfd push DATASET URL``: publish a dataset's new history to a remote, by the push strategy
of the remote's transport (``odfd.sync.transport``):

- ``http(s)://``: Smart Transfer Protocol (metadata tarball, objects through the server's
  signed upload URLs, commit by the server), authorised by a bearer token;
- ``file://``, ``s3://``, ``s3+http(s)://``: a dataset folder (on disk or under a bucket's key
  prefix), written like a pull writes (objects, blocks, ``head`` last by compare-and-swap, a
  conditional write on S3: of two racing pushes one wins, the other is told to push again);
- ``ipns://[KEY]``: the dataset folder added to IPFS (UnixFS, CIDv1, raw leaves, ``info/``
  left out, as the reference publishes) and published under the IPNS key (default: a key named
  after the dataset, created on first push).

Before anything is sent, the remote head is compared with the local history
(``odfd.sync.push_steps``); the remote then gets the owner's signed head where it keeps one.
A remote that now holds our head is remembered as the dataset's push remote.
"""

from __future__ import annotations

from odfd.sync.errors import ChainPoint, SyncError
from odfd.sync.progress import Progress
from odfd.sync.push_steps import PushOptions, PushResult
from odfd.sync.target import PullTarget, remember_remote
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import parse_remote
from storage.workspace import Workspace


async def push(
    workspace: Workspace,
    ref: str,
    url: str,
    *,
    options: PushOptions = PushOptions(),
    progress: Progress | None = None,
    settings: TransportSettings = TransportSettings(),
) -> PushResult:
    """Push dataset ``ref`` to the remote at ``url``, reached with ``settings``."""
    record = await workspace.resolve(ref)
    dataset = workspace.open_dataset(record.id)
    head = await dataset.chain.head()
    if head is None:
        raise SyncError(f"dataset {record.alias} has no blocks to push")
    local = ChainPoint(head, (await dataset.chain.get_block(head)).sequence_number)
    remote = parse_remote(url, settings, token=options.token)
    progress = progress or Progress(f"push {record.alias}", enabled=False)
    target = PullTarget(workspace, record.alias, dataset, record, local)
    try:
        result = await remote.push(target, options, progress)
    finally:
        progress.finish()
    if result.num_blocks or result.new_remote_head == local.hash:
        # result.remote: where the push went (an IPNS push names the key it published under)
        await remember_remote(target, result.remote, "push")
        await workspace.catalog.record_synced(record.id, result.remote, head)
    return result
