"""Datasets found by their DID alone, over IPNS: the name is the DID's key (``ipns_name_of``),
the record it resolves to is verified here against the DID, and every node holding a dataset
keeps its owner's signed record alive by putting it back into the IPFS routing (no key needed:
the record carries the owner's signature) and announcing the folder it points at.

What a node last did for a dataset's name is kept in the dataset's ``info/`` (never published):
``ipns`` (the name and when its record was last published or republished) and ``ipns-record``
(the owner's signed record this node last republished, put back even if the routing lost it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from odfd.sync.errors import RemoteNotFoundError, SyncError
from protocol.errors import ParseError
from protocol.identity import DatasetId

if TYPE_CHECKING:
    from multiformats import CID

    from storage.dataset import Dataset
    from storage.ipfs_client import IpnsName
    from storage.ipfs_settings import IpfsSettings
    from storage.ipns_record import IpnsRecord

DID_PREFIX = "did:odf:"
_STATE_INFO = "ipns"
_RECORD_INFO = "ipns-record"


class IpnsRecordRefusedError(SyncError):
    """The record a DID's IPNS name resolved to is not the owner's valid record."""


@dataclass(frozen=True, slots=True)
class IpnsState:
    """A dataset's IPNS name and when this node last (re)published its record."""

    name: str
    republished: datetime | None


@dataclass(frozen=True, slots=True)
class Resolved:
    """A DID's name resolved and verified: the folder's CID and the record saying so."""

    cid: CID
    record: IpnsRecord


def is_did(text: str) -> bool:
    return text.startswith(DID_PREFIX)


def parse_did(text: str) -> DatasetId:
    try:
        return DatasetId.parse(text)
    except ParseError as err:
        raise SyncError(f"{text}: not a dataset DID: {err}") from None


async def resolve_did(ipfs: IpfsSettings, dataset_id: DatasetId) -> Resolved:
    """The folder ``dataset_id``'s IPNS name points at, by the owner's signed record (fetched
    through the node's routing, checked here: another key's or an expired record is refused)."""
    from storage.ipfs_client import IpfsNotFoundError, parse_cid
    from storage.ipns_name import ipns_name_of
    from storage.ipns_record import IpnsRecordError, record_cid, verify_record

    name = ipns_name_of(dataset_id)
    try:
        raw = await ipfs.client().record_get(name)
    except IpfsNotFoundError:
        raise RemoteNotFoundError(
            f"{dataset_id}: no IPNS record for its name {name} found through the IPFS node "
            f"at {ipfs.api} (is the owner or a mirror online, and connected?)"
        ) from None
    try:
        record = verify_record(raw, dataset_id)
        cid = parse_cid(record_cid(record, name))
    except (IpnsRecordError, ParseError) as err:
        raise IpnsRecordRefusedError(f"{dataset_id}: refused: {err}") from None
    return Resolved(cid, record)


async def republish(ipfs: IpfsSettings, dataset_id: DatasetId, dataset: Dataset) -> IpnsRecord:
    """Puts the owner's signed record back into the IPFS routing and announces its folder: the
    freshest valid one of what this node kept and what the IPFS node holds."""
    from storage.ipfs_client import IpfsError, parse_cid
    from storage.ipns_name import ipns_name_of
    from storage.ipns_record import IpnsRecordError, record_cid, verify_record

    name = ipns_name_of(dataset_id)
    client = ipfs.client()
    candidates: list[bytes] = []
    kept = await dataset.info.get(_RECORD_INFO)
    if kept is not None:
        candidates.append(kept)
    try:
        candidates.append(await client.record_get(name))
    except IpfsError:
        pass  # the routing lost it: what was kept brings it back
    best: tuple[IpnsRecord, bytes] | None = None
    for raw in candidates:
        try:
            record = verify_record(raw, dataset_id)
        except IpnsRecordError:
            continue
        if best is None or record.sequence > best[0].sequence:
            best = (record, raw)
    if best is None:
        raise IpnsRecordRefusedError(
            f"{dataset_id}: no valid IPNS record of its owner to republish under {name}"
        )
    record, raw = best
    await client.record_put(name, raw)
    try:
        await client.provide(parse_cid(record_cid(record, name)))
    except IpfsError:
        pass  # a node without providing (js-ipfs, no peers) still serves the record
    await dataset.info.set(_RECORD_INFO, raw)
    await note_republished(dataset, name)
    return record


async def note_republished(dataset: Dataset, name: IpnsName) -> None:
    state = {"name": str(name), "republished": datetime.now(UTC).isoformat(timespec="seconds")}
    await dataset.info.set(_STATE_INFO, json.dumps(state).encode())


async def read_state(dataset: Dataset, dataset_id: DatasetId) -> IpnsState:
    """The dataset's IPNS name, and when this node last (re)published its record (``None``:
    never)."""
    from storage.ipns_name import ipns_name_of

    raw = await dataset.info.get(_STATE_INFO)
    return IpnsState(str(ipns_name_of(dataset_id)), None if raw is None else _stamp(raw))


def _stamp(raw: bytes) -> datetime | None:
    try:
        stamp = json.loads(raw).get("republished")
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except (ValueError, AttributeError):
        return None  # a damaged state file: as if never republished


def republished_at(info_dir: Path) -> datetime | None:
    """:func:`read_state`'s time, read from a local dataset's ``info/`` folder without an event
    loop (``odfd status``)."""
    try:
        raw = (info_dir / _STATE_INFO).read_bytes()
    except OSError:
        return None
    return _stamp(raw)


def is_due(state: IpnsState, interval: float, now: datetime | None = None) -> bool:
    """Whether the daemon should republish now."""
    if state.republished is None:
        return True
    return ((now or datetime.now(UTC)) - state.republished).total_seconds() >= interval
