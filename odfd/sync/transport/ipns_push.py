"""Publishing to ``ipns://[KEY]``: the dataset folder added to IPFS (UnixFS, CIDv1, raw leaves,
``info/`` left out, as the reference publishes) and published under the IPNS key (default: a key
named after the dataset, created on first push). What the name pointed at before is compared
with the local history first, as every push does."""

from __future__ import annotations

import aiohttp

from odfd.sync.errors import SyncError, UnsupportedUrlError
from odfd.sync.push_steps import PushOptions, PushResult, compare
from odfd.sync.target import PullTarget
from odfd.sync.transport.ipfs import gateway_view
from protocol.errors import ParseError
from storage.ipfs_client import IpfsClient, IpfsKey, IpfsNotFoundError, IpfsTimeoutError, IpnsName
from storage.ipfs_settings import IpfsSettings
from storage.layout import dataset_dir_name

IPNS_KEY_PREFIX = "odfd-"
_RESOLVE_OWN_KEY_SECONDS = 5.0


async def push_ipns(
    url: str, name: str, subpath: str, ipfs: IpfsSettings, target: PullTarget, options: PushOptions
) -> PushResult:
    """Publish ``target`` under the key ``name`` (a key's name or IPNS name; ``""``: the
    dataset's own key) of the IPFS node ``ipfs``; ``url`` is the ``ipns://`` URL pushed to."""
    client = ipfs.client()
    if subpath:
        raise UnsupportedUrlError(f"{url}: one dataset per IPNS key; no sub-path allowed")
    assert target.record is not None  # pushes start from a workspace dataset
    if target.dataset.layout is None:
        raise UnsupportedUrlError(
            f"{url}: an IPNS push adds the dataset's folder to IPFS, but this node keeps "
            f"{target.alias} in a bucket ([storage] url)"
        )
    key = await _ipns_key(
        client,
        name or f"{IPNS_KEY_PREFIX}{dataset_dir_name(target.record.id)}",
        create=not name,
    )
    published = f"ipns://{key.id}"
    remote_head = common = None
    try:
        # Our own key resolves locally at once; a long wait means it was never published.
        own = IpfsClient(ipfs.api, fetch_timeout=_RESOLVE_OWN_KEY_SECONDS)
        cid = await own.name_resolve(key.id)
    except (IpfsNotFoundError, IpfsTimeoutError):
        pass
    else:
        async with (
            aiohttp.ClientSession() as session,
            gateway_view(session, cid, "", published, ipfs) as view,
        ):
            remote_head = await view.head()
            common = await compare(target, remote_head, view.block, published, options.force)
    local = target.head
    assert local.hash is not None and local.sequence_number is not None  # push() checked
    cid = await client.add_directory(target.dataset.layout.root, exclude=("info",))
    await client.name_publish(cid, key=key.name)
    blocks = local.sequence_number - (
        common.sequence_number if common and common.sequence_number is not None else -1
    )
    return PushResult(target.alias, published, remote_head, local.hash, blocks, 0)


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
