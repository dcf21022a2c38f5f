"""One sync attempt of one mirror: check the source's head, pull if it moved, push to every
target that is behind, pin the dataset in IPFS when configured (``odfd.sync.pins.release_pin``
undoes that when the mirror is removed), and for a mirror found by its DID, republish its
owner's IPNS record. The daemon's ``mirror_schedule`` runs it on each mirror's schedule and
records the outcome; the pull and the pushes are ``odfd pull URL``'s and ``odfd push``'s
(``odfd.app.pull.pull_from``, ``odfd.app.push.push_to``).

Nothing here is trusted from the source: ``odfd.sync.pull`` verifies every block and object and
moves ``head`` last by compare-and-swap, so an attempt that fails or is cancelled leaves the
dataset at its old head or its new one, never between.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import aiohttp

from odfd.app.pull import pull_from
from odfd.app.push import push_to
from odfd.app.write_log import DAEMON
from odfd.config import NodeConfig
from odfd.sync.did_names import is_did, is_due, read_state, republish
from odfd.sync.pull import PullOptions, PullResult
from odfd.sync.push import PushOptions
from odfd.sync.transport.base import SourceHead
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import parse_remote
from protocol.errors import OdfError
from protocol.identity import DatasetId, Multihash
from storage.catalog.mirror_records import MirrorRecord, Outcome, SyncAttempt, TargetState
from storage.ipfs_client import IpfsClient, IpfsNotFoundError, parse_cid
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.app.node import Node

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one attempt did; ``attempt`` is what gets recorded."""

    attempt: SyncAttempt
    source: SourceHead | None
    pinned_cid: str | None
    target_state: Mapping[str, TargetState]
    head_changed: bool

    @property
    def failed(self) -> bool:
        return self.attempt.outcome == "failed"


def describe_error(err: BaseException) -> str:
    """One line for the catalog and the logs: the message of our errors, the type of others."""
    if isinstance(err, OdfError):
        return str(err)
    if isinstance(err, TimeoutError):
        return f"timed out ({err})" if str(err) else "timed out"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


class MirrorSyncer:
    """Syncs mirrors of ``node``'s workspace with its configuration and transport settings."""

    def __init__(self, node: Node, session: aiohttp.ClientSession) -> None:
        self.workspace: Workspace = node.workspace
        self.config: NodeConfig = node.config
        self.transports: TransportSettings = node.transport
        self.session = session

    async def sync(self, mirror: MirrorRecord) -> SyncReport:
        started = datetime.now(UTC)
        local_before = await self.local_head(mirror.name)
        dataset_id = local_before[0]
        known = (
            SourceHead(mirror.source_head, mirror.source_sequence, mirror.source_cid)
            if mirror.source_head is not None
            else None
        )
        source: SourceHead | None = None
        pulled: PullResult | None = None
        errors: list[str] = []
        target_state = dict(mirror.target_state)
        pushes: list[dict[str, Any]] = []
        pinned = mirror.pinned_cid
        try:
            token = self.transports.token_for(mirror.source)
            remote = parse_remote(mirror.source, self.transports, token=token)
            source = await remote.probe(self.session, known)
            # A signed dataset is pulled even when its head did not move: the owner's newer
            # signature of the same head is what tells a quiet source from a frozen one.
            signed = dataset_id is not None and (
                await self.workspace.signed_heads.get(dataset_id) is not None
            )
            if dataset_id is None or source.head != local_before[1] or signed:
                options = PullOptions(
                    parallel=self.config.sync.parallel_objects,
                    token=token,
                    operation_timeout=self.transports.operation_timeout,
                )
                pulled = await pull_from(
                    self.workspace,
                    mirror.source,
                    alias=mirror.name,
                    options=options,
                    settings=self.transports,
                    actor=DAEMON,
                    session=self.session,
                )
                dataset_id = pulled.dataset_id
        except Exception as err:  # noqa: BLE001 - every failure is recorded as the attempt's outcome
            errors.append(describe_error(err))
        local_id, local_head = await self.local_head(mirror.name)
        dataset_id = dataset_id or local_id
        if not errors and local_head is not None:
            for target in mirror.targets:
                state, entry = await self._push(
                    mirror, target, local_head, target_state.get(target)
                )
                target_state[target] = state
                pushes.append(entry)
                if state.error is not None:
                    errors.append(f"push to {target}: {state.error}")
            # After a failed or cancelled attempt the head may have moved without being pinned.
            repin = pinned is None or local_head != local_before[1] or mirror.last_error is not None
            if self.config.ipfs.pin and repin:
                try:
                    pinned = await self._pin(dataset_id, pinned)
                except Exception as err:  # noqa: BLE001 - recorded like any failure
                    errors.append(f"pinning in IPFS: {describe_error(err)}")
            if is_did(mirror.source) and dataset_id is not None:
                try:
                    await self._republish(dataset_id)
                except Exception as err:  # noqa: BLE001 - recorded like any failure
                    errors.append(f"republishing its IPNS record: {describe_error(err)}")
        changed = local_head is not None and local_head != local_before[1]
        outcome: Outcome = "failed" if errors else ("updated" if changed else "unchanged")
        attempt = SyncAttempt(
            mirror=mirror.name,
            source=mirror.source,
            dataset_id=dataset_id,
            started_at=started,
            finished_at=datetime.now(UTC),
            outcome=outcome,
            old_head=local_before[1],
            new_head=local_head,
            source_head=None if source is None else source.head,
            blocks=pulled.num_blocks if pulled else 0,
            objects=pulled.num_objects if pulled else 0,
            bytes=pulled.num_bytes if pulled else 0,
            pushes=tuple(pushes),
            error="; ".join(errors) if errors else None,
        )
        return SyncReport(attempt, source, pinned, MappingProxyType(target_state), changed)

    async def local_head(self, alias: str) -> tuple[DatasetId | None, Multihash | None]:
        """Read from ``refs/head`` (the truth), not the catalog's copy."""
        record = await self.workspace.catalog.find_by_alias(alias)
        if record is None:
            return None, None
        return record.id, await self.workspace.open_dataset(record.id).chain.head()

    async def _push(
        self, mirror: MirrorRecord, target: str, head: Multihash, state: TargetState | None
    ) -> tuple[TargetState, dict[str, Any]]:
        if state is not None and state.head == head and state.error is None:
            return state, {"target": target, "blocks": 0, "skipped": True}
        options = PushOptions(
            token=self.transports.token_for(target), parallel=self.config.sync.parallel_objects
        )
        try:
            result = await push_to(
                self.workspace, mirror.name, target, options=options, settings=self.transports
            )
        except Exception as err:  # noqa: BLE001 - a failed push is part of the attempt's outcome
            message = describe_error(err)
            log.warning(
                "push failed", extra={"mirror": mirror.name, "target": target, "error": message}
            )
            previous = state or TargetState()
            return TargetState(previous.head, previous.remote, message), {
                "target": target,
                "error": message,
            }
        return TargetState(head, result.remote), {
            "target": target,
            "remote": result.remote,
            "blocks": result.num_blocks,
        }

    async def _republish(self, dataset_id: DatasetId) -> None:
        """Keeps the owner's record of a mirror found by its DID alive in the IPFS routing,
        every ``[ipfs] republish_interval``, so the dataset stays reachable by its DID while its
        owner is offline."""
        dataset = self.workspace.open_dataset(dataset_id)
        ipfs = self.transports.ipfs
        if is_due(await read_state(dataset, dataset_id), ipfs.republish_interval):
            record = await republish(ipfs, dataset_id, dataset)
            log.info(
                "IPNS record republished",
                extra={"dataset": str(dataset_id), "points_at": record.value},
            )

    async def _pin(self, dataset_id: DatasetId | None, previous: str | None) -> str | None:
        if dataset_id is None:
            return previous
        client = IpfsClient(self.config.ipfs.api)
        folder = self.workspace.layout.dataset(dataset_id).root
        cid = str(await client.add_directory(folder, exclude=("info",), pin=True))
        if previous is not None and previous != cid:
            try:
                await client.pin_rm(parse_cid(previous))
            except IpfsNotFoundError:
                pass  # already unpinned by hand: nothing to undo
        return cid
