"""Mirror management: the datasets this node keeps in sync with a remote source. The catalog
holds the mirror list, so these work whether or not the daemon runs (the caller tells a running
one to reload it); a mirror managed by a ``Mirror`` resource changes through its manifest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.errors import OdfdError
from odfd.sync.pins import PinReleaseError, release_pin
from odfd.sync.transport.url import parse_remote, peer_key
from protocol.errors import OdfError
from protocol.identity import DatasetAlias
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resources import ResourceTable

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.config import IpfsConfig
    from storage.catalog.mirror_records import MirrorRecord, Outcome


class MirrorUsageError(OdfdError):
    exit_code = 2


@dataclass(frozen=True, slots=True)
class MirrorRequest:
    source: str
    alias: str | None = None
    """Local name (default: the URL's last segment)."""
    targets: tuple[str, ...] = ()
    """Where the dataset is pushed after each sync."""
    every: float | None = None
    """Seconds between syncs (default: ``[sync] default_interval``)."""
    freeze_after: float | None = None


async def add_mirror(node: Node, request: MirrorRequest) -> MirrorRecord:
    workspace = node.workspace
    source = parse_remote(request.source, node.transport)
    for target in request.targets:
        parse_remote(target, node.transport)
    alias = request.alias or (str(source.default_name()) if source.default_name() else None)
    if alias is None:
        raise MirrorUsageError(
            f"cannot name the dataset mirrored from {source.url}: give one with --as ALIAS"
        )
    alias = str(DatasetAlias.parse(alias))
    existing = await workspace.catalog.find_by_alias(alias)
    if existing is not None and source.url not in await workspace.catalog.remote_aliases(
        existing.id, "pull"
    ):
        raise MirrorUsageError(
            f"dataset {alias} already exists and is not pulled from {source.url}; "
            "choose another name with --as"
        )
    interval = request.every or node.config.sync.default_interval
    record = await MirrorTable(workspace.catalog).add(
        alias, source.url, list(request.targets), interval
    )
    if request.freeze_after is not None:
        await workspace.signed_heads.set_freeze_bound(record.name, request.freeze_after)
    return record


async def remove_mirror(node: Node, name: str) -> tuple[MirrorRecord, MirrorRecord]:
    """Stops mirroring (the dataset stays; a managing resource goes too): the mirror as it was
    found, and its row as it was deleted (a sync finishing meanwhile may have pinned a newer
    CID, which the caller releases)."""
    workspace = node.workspace
    record = await MirrorTable(workspace.catalog).require(name)
    if record.resource_id is not None:
        await ResourceTable(workspace.catalog).delete(record.resource_id)
    removed = await MirrorTable(workspace.catalog).remove(record.name)
    await workspace.signed_heads.set_freeze_bound(record.name, None)
    return record, removed


async def set_paused(node: Node, name: str, paused: bool) -> MirrorRecord:
    table = MirrorTable(node.workspace.catalog)
    record = await table.require(name)
    if record.resource_id is not None:
        raise MirrorUsageError(
            f"mirror {record.name} is managed by a Mirror resource: set spec.paused it in its "
            "manifest and run `odfd apply`"
        )
    await table.set_paused(record.name, paused)
    return record


@dataclass(frozen=True, slots=True)
class MirrorState:
    """A mirror and how its newest sync attempt ended."""

    record: MirrorRecord
    last_outcome: Outcome | None
    """``None`` before its first attempt."""

    @property
    def state(self) -> str:
        """``paused``, the last attempt's outcome, or ``new``."""
        if self.record.paused:
            return "paused"
        return self.last_outcome or "new"


async def list_mirrors(node: Node) -> list[MirrorState]:
    table = MirrorTable(node.workspace.catalog)
    attempts = await table.latest_attempts()
    return [
        MirrorState(record, attempt.outcome if attempt else None)
        for record in await table.list()
        for attempt in [attempts.get(record.name)]
    ]


async def find_mirror(node: Node, name: str) -> MirrorRecord:
    """The mirror called ``name``; the catalog's error naming it when there is none."""
    return await MirrorTable(node.workspace.catalog).require(name)


async def release_mirror_pin(ipfs: IpfsConfig, cid: str) -> str | None:
    """Unpins the folder a removed mirror pinned from the IPFS node of ``ipfs``, after its
    removal (so an unreachable IPFS node never keeps a mirror alive): ``odfd mirror remove``,
    and the daemon for a pin its sync made while the mirror was removed. Returns None once
    released, or why the pin stays (``PinReleaseError``'s message: how to release it by hand),
    which the caller reports as a warning: the mirror is gone either way."""
    try:
        await release_pin(ipfs, cid)
    except PinReleaseError as err:
        return str(err)
    except OdfError as err:  # the IPFS node's address is unusable; the message names it
        return f"ipfs://{cid} stays pinned (the IPFS node is unknown): {err}"
    return None


def mirror_peer(source: str) -> str:
    """Whom syncing from ``source`` loads, so the daemon spreads syncs over peers (``""`` for a
    URL no transport takes: the attempt reports it)."""
    return peer_key(source)
