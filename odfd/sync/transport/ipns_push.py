"""Publishing to ``ipns://[KEY]``: the dataset folder added to IPFS (UnixFS, CIDv1, raw leaves,
``info/`` left out, as the reference publishes) and published under the IPNS key (default: the
dataset's own key, the one behind its DID, imported into the node on first push, so the name is
the DID's; a node that does not own the dataset, such as a mirror, publishes under a key its
IPFS node generates). What the name pointed at before is compared
with the local history first, as every push does."""

from __future__ import annotations

import secrets

import aiohttp

from odfd.sync.did_names import note_republished
from odfd.sync.errors import SyncError, UnsupportedUrlError
from odfd.sync.push_steps import PushOptions, PushResult, compare
from odfd.sync.target import PullTarget
from odfd.sync.transport.ipfs import gateway_view
from protocol.errors import ParseError
from protocol.identity import DatasetId
from storage.ipfs_client import IpfsClient, IpfsKey, IpfsNotFoundError, IpfsTimeoutError, IpnsName
from storage.ipfs_settings import IpfsSettings
from storage.ipns_name import ipns_name_of
from storage.ipns_record import encrypt_libp2p_key, export_libp2p_key
from storage.keys import KeyStore
from storage.layout import dataset_dir_name

IPNS_KEY_PREFIX = "odfd-did-"
#: Names of keys the IPFS node generates for datasets this node publishes but does not own.
NODE_KEY_PREFIX = "odfd-"
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
    owns_did_name = not name and target.workspace.keys.load(target.record.id) is not None
    if name:
        key = await _ipns_key(client, name)
    elif owns_did_name:
        key = await import_dataset_key(client, target.workspace.keys, target.record.id, url)
    else:
        # Not the owner (a mirror): the DID's name is not ours to sign; a key of the IPFS node.
        key = await _node_key(client, f"{NODE_KEY_PREFIX}{dataset_dir_name(target.record.id)}")
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
    await client.name_publish(cid, key=key.name, lifetime=f"{ipfs.record_validity:.0f}s")
    if owns_did_name:
        await note_republished(target.dataset, key.id)
    blocks = local.sequence_number - (
        common.sequence_number if common and common.sequence_number is not None else -1
    )
    return PushResult(target.alias, published, remote_head, local.hash, blocks, 0)


async def _ipns_key(client: IpfsClient, name_or_id: str) -> IpfsKey:
    """The key named ``name_or_id`` or whose IPNS name it is."""
    try:
        wanted = str(IpnsName.parse(name_or_id))
    except ParseError:
        wanted = None
    for key in await client.key_list():
        if key.name == name_or_id or (wanted is not None and str(key.id) == wanted):
            return key
    raise SyncError(f"the IPFS node has no key named {name_or_id} or publishing that IPNS name")


async def _node_key(client: IpfsClient, key_name: str) -> IpfsKey:
    """The IPFS node's key named ``key_name``, generated on first use."""
    for key in await client.key_list():
        if key.name == key_name:
            return key
    return await client.key_gen(key_name)


async def import_dataset_key(
    client: IpfsClient, keys: KeyStore, dataset_id: DatasetId, url: str
) -> IpfsKey:
    """The node's copy of the dataset's own key (its DID's), imported on first publish: the
    IPNS name is then the DID's, computable by anyone."""
    wanted = ipns_name_of(dataset_id)
    for key in await client.key_list():
        if key.id == wanted:
            return key
    signing_key = keys.load(dataset_id)
    if signing_key is None:
        raise SyncError(
            f"{url}: publishing under {dataset_id} needs the dataset's key, which only its "
            "owner's node holds; push to ipns://KEY to publish under a key of the IPFS node"
        )
    seed, public = bytes(signing_key), bytes(signing_key.verify_key)
    password = secrets.token_urlsafe(24)  # only protects the key on its way to the node
    exported = export_libp2p_key(seed, public)
    key = await client.key_import(
        f"{IPNS_KEY_PREFIX}{dataset_dir_name(dataset_id)}",
        exported,
        password,
        encrypt_libp2p_key(exported, password),
    )
    if key.id != wanted:
        raise SyncError(f"the IPFS node imported {dataset_id}'s key as {key.id}, not {wanted}")
    return key
