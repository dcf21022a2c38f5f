"""Turning ``DatasetSnapshot`` manifests into the events stored after the ``Seed``.

Follows what the reference stores for a snapshot: ``Transform.query`` becomes a single-item
``queries`` array; each ``SetTransform`` input's ``datasetRef`` is resolved to a ``DatasetId``
and its ``alias`` defaults to the reference as written (an input named twice is refused); ``Seed``
and transaction events
(``AddData``, ``ExecuteTransform``, ``Disable*Source``) are refused; source events only on root
datasets and ``SetTransform`` only on derivative ones. Everything else is stored as written
(fetch steps odfd cannot run yet are metadata like any other).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from protocol.model import (
    AddData,
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    MetadataEvent,
    Seed,
    SetPollingSource,
    SetTransform,
    SqlQueryStep,
    Transform,
    TransformSql,
)
from storage.errors import InvalidSnapshotError

InputResolver = Callable[[DatasetRef], Awaitable[DatasetId | None]]
"""Looks a dataset up in the workspace by id or alias."""

_NOT_IN_SNAPSHOT = (Seed, AddData, ExecuteTransform, DisablePollingSource, DisablePushSource)


def check_snapshot(snapshot: DatasetSnapshot) -> None:
    """What can be refused without the workspace: a transform naming one input twice (as the
    reference: "Transform contains duplicate inputs")."""
    for n, event in enumerate(snapshot.metadata):
        if not isinstance(event, SetTransform):
            continue
        refs = [str(entry.dataset_ref).lower() for entry in event.inputs]
        aliases = [(entry.alias or str(entry.dataset_ref)).lower() for entry in event.inputs]
        dupes = sorted(
            {r for r in refs if refs.count(r) > 1} | {a for a in aliases if aliases.count(a) > 1}
        )
        if dupes:
            raise InvalidSnapshotError(
                f"dataset {snapshot.name}: metadata[{n}] (SetTransform): transform contains "
                f"duplicate inputs: {', '.join(dupes)}"
            )


async def normalize_snapshot(
    snapshot: DatasetSnapshot, resolve: InputResolver
) -> list[MetadataEvent]:
    """The events to store after the seed, or ``InvalidSnapshotError`` naming the event."""
    check_snapshot(snapshot)
    events: list[MetadataEvent] = []
    name = snapshot.name
    for n, event in enumerate(snapshot.metadata):
        where = f"dataset {name}: metadata[{n}] ({type(event).__name__})"
        if isinstance(event, _NOT_IN_SNAPSHOT):
            reason = (
                "Seed is generated and cannot be given"
                if isinstance(event, Seed)
                else "this event cannot appear in a DatasetSnapshot"
            )
            raise InvalidSnapshotError(f"{where}: {reason}")
        if isinstance(event, (SetPollingSource, AddPushSource)):
            if snapshot.kind is not DatasetKind.ROOT:
                raise InvalidSnapshotError(f"{where}: only allowed on root datasets")
            if event.preprocess is not None:
                event = dataclasses.replace(
                    event, preprocess=normalize_transform(event.preprocess, where)
                )
        elif isinstance(event, SetTransform):
            if snapshot.kind is not DatasetKind.DERIVATIVE:
                raise InvalidSnapshotError(f"{where}: only allowed on derivative datasets")
            inputs = []
            missing = []
            for entry in event.inputs:
                dataset_id = await resolve(entry.dataset_ref)
                if dataset_id is None:
                    missing.append(str(entry.dataset_ref))
                    continue
                inputs.append(
                    dataclasses.replace(
                        entry,
                        dataset_ref=DatasetRef(dataset_id),
                        alias=entry.alias if entry.alias is not None else str(entry.dataset_ref),
                    )
                )
            if missing:
                raise InvalidSnapshotError(
                    f"{where}: inputs not found in the workspace: {', '.join(missing)}"
                )
            event = dataclasses.replace(
                event, inputs=tuple(inputs), transform=normalize_transform(event.transform, where)
            )
        events.append(event)
    return events


def normalize_transform(transform: Transform, where: str) -> Transform:
    """Move a hand-written ``query`` into ``queries``; at most one query may be unaliased."""
    if not isinstance(transform, TransformSql):
        return transform
    if transform.query is not None:
        if transform.queries is not None:
            raise InvalidSnapshotError(f"{where}: transform gives both query and queries")
        transform = dataclasses.replace(
            transform, query=None, queries=(SqlQueryStep(alias=None, query=transform.query),)
        )
    if not transform.queries:
        raise InvalidSnapshotError(f"{where}: transform has no query")
    if sum(1 for q in transform.queries if q.alias is None) > 1:
        raise InvalidSnapshotError(
            f"{where}: transform has more than one query without an alias; "
            "only the output query may have none"
        )
    return transform


def dependency_order(snapshots: Sequence[DatasetSnapshot]) -> list[DatasetSnapshot]:
    """Snapshots ordered so that inputs defined in the same batch are created first (stable
    otherwise); inputs outside the batch and cycles do not constrain the order."""
    pending = {_key(s.name): s for s in snapshots}
    ordered: list[DatasetSnapshot] = []
    visiting: set[str] = set()

    def visit(snapshot: DatasetSnapshot) -> None:
        key = _key(snapshot.name)
        if key not in pending or key in visiting:
            return
        visiting.add(key)
        for event in snapshot.metadata:
            if isinstance(event, SetTransform):
                for entry in event.inputs:
                    alias = entry.dataset_ref.alias
                    if alias is not None and _key(alias) in pending:
                        visit(pending[_key(alias)])
        visiting.discard(key)
        if key in pending:
            del pending[key]
            ordered.append(snapshot)

    for snapshot in snapshots:
        visit(snapshot)
    return ordered


def _key(alias: DatasetAlias) -> str:
    return str(alias).lower()
