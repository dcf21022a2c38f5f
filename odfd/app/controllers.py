"""Resource controllers: move the node towards what the applied resources declare, and say how
it went in each resource's ``status`` (``phase``, ``observedGeneration``, ``conditions``).

* ``Mirror``: the ``mirrors`` row of ``headers.name`` matches the spec (source, targets, interval,
  paused). The sync scheduler then adds the ``Synced`` and ``Audited`` conditions.
* ``SecretSet``: ``Ready`` when the node can decrypt every secret; ``VariableSet``: ``Ready``.
* ``Source``: ``Ready`` when its config values resolve and its templates fill (``odfd.sources``
  runs it, from a flow's ``Ingest`` task).
* ``Projection``: ``Ready`` when its query is one odfd runs and its inputs exist (its result is
  computed when a query reads it, ``odfd.app.projections``).
* ``PersistentVolume``: ``Ready`` when its bucket answers with its credentials; a ``Dataset``
  with ``volume:`` is then created on it (``odfd.volumes``; an existing dataset is never moved).
* ``Dataset``: a missing dataset is created from the spec (as ``odfd add`` does a snapshot); for
  an existing one, every event of the spec that differs from the latest event of its kind in the
  chain (``AddPushSource``: of its source name) is appended, so re-applying an edited manifest
  updates the dataset and re-applying the same one appends nothing.

A failure (bad reference, conflict, chain rule) sets ``Failed`` with a ``ReconciliationError``
condition; reconciling is retried on the daemon's ``reconcile_interval`` (an input may appear
later, e.g. once a mirror first syncs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from odfd.app.account_resources import AccountResourceError, reconcile_account
from odfd.app.authorization import RelationsError, check_relations
from odfd.app.node_secrets import SecretError, node_secrets
from odfd.app.projections import ProjectionError, ProjectionSpec
from odfd.app.resource_types import (
    ACCOUNT,
    FLOW,
    PERSISTENT_VOLUME,
    PROJECTION,
    RELATIONS,
    RESOURCE,
    SECRET_SET,
    SOURCE,
    VARIABLE_SET,
    WEBHOOK_TARGET,
)
from odfd.app.resources import (
    DATASET_SCHEMA,
    MIRROR_SCHEMA,
    RECONCILE_ERROR,
    REMOTE_ANNOTATION,
    MirrorSpec,
    dataset_resource,
    kind_of,
    utc_now_text,
)
from odfd.app.secret_values import undecryptable
from odfd.app.value_refs import ValueRefError, resolve_values
from odfd.config import SyncConfig
from odfd.errors import OdfdError
from odfd.flows.spec import FlowSpec, FlowSpecError
from odfd.ingest.errors import IngestError
from odfd.sources.ingest import CONFIG
from odfd.sources.render import Redactor, polling_source
from odfd.sources.spec import SourceDefinition, SourceSpecError
from odfd.volumes.attach import attach, placed
from odfd.volumes.errors import VolumeError
from odfd.webhooks.delivery import WebhookError, WebhookTarget
from protocol.errors import OdfError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef
from protocol.model import AddPushSource, DatasetSnapshot, MetadataEvent, kind_name
from storage.catalog.mirror_records import MirrorRecord
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resource_references import ResourceReferenceTable
from storage.catalog.resources import ResourceRecord, ResourceTable
from storage.snapshots import normalize_snapshot
from storage.workspace import Workspace

log = logging.getLogger(__name__)


class ControllerHooks(Protocol):
    """What the daemon does when a controller changed something (nothing, outside a daemon)."""

    async def mirror_changed(self, name: str) -> None: ...

    async def dataset_changed(self, dataset_id: DatasetId) -> None: ...


class NoHooks:
    async def mirror_changed(self, name: str) -> None:
        return None

    async def dataset_changed(self, dataset_id: DatasetId) -> None:
        return None


class ReconcileFailure(OdfdError):
    """Why a resource cannot be reconciled now; ``code`` goes into its condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    resource: ResourceRecord
    phase: str
    message: str | None = None


class Reconciler:
    def __init__(
        self, workspace: Workspace, sync: SyncConfig, hooks: ControllerHooks | None = None
    ) -> None:
        self.workspace = workspace
        self.sync = sync
        self.hooks = hooks or NoHooks()
        self.resources = ResourceTable(workspace.catalog)
        self.mirrors = MirrorTable(workspace.catalog)
        self.secrets = node_secrets(workspace.keys)

    async def reconcile_all(self, *, unsettled_only: bool = False) -> list[ReconcileResult]:
        """Mirrors first (derivative datasets may read what they bring), then datasets.
        ``unsettled_only``: just those not ``Ready`` at their generation (what a sync may unblock)."""
        records = await (
            self.resources.list_unsettled() if unsettled_only else self.resources.list()
        )
        order = {MIRROR_SCHEMA: 0, DATASET_SCHEMA: 1}
        records.sort(key=lambda r: (order.get(r.schema, 2), r.name.lower()))
        # Settled Mirror resources are compared with their rows in memory; a node without any
        # (mirrors added by ``odfd mirror add``) lists no mirrors at all.
        compare = not unsettled_only and any(r.schema == MIRROR_SCHEMA for r in records)
        mirrors = {m.name.lower(): m for m in await self.mirrors.list()} if compare else {}
        results = []
        for record in records:
            if _settled(record) and self._mirror_in_place(record, mirrors):
                results.append(ReconcileResult(record, "Ready"))
            else:
                results.append(await self.reconcile(record))
        return results

    def _mirror_in_place(self, record: ResourceRecord, mirrors: dict[str, MirrorRecord]) -> bool:
        """A Mirror resource whose row already says what its spec does: nothing to do, and
        nothing to read or write for it (10,000 of them are compared in memory each pass)."""
        if record.schema != MIRROR_SCHEMA:
            return False
        existing = mirrors.get(record.name.lower())
        if existing is None:
            return False
        try:
            spec = MirrorSpec.from_json(record.spec, f"Mirror {record.name}")
        except OdfError:
            return False
        interval = spec.every if spec.every is not None else self.sync.default_interval
        return (
            existing.source,
            existing.targets,
            existing.interval,
            existing.resource_id,
            existing.paused,
        ) == (spec.source, spec.targets, interval, record.id, spec.paused)

    async def reconcile(self, record: ResourceRecord) -> ReconcileResult:
        try:
            if record.schema == MIRROR_SCHEMA:
                message = await self._mirror(record)
            elif record.schema == DATASET_SCHEMA:
                message = await self._dataset(record)
            elif record.schema == SECRET_SET.schema:
                self._secret_set(record)
                message = None
            elif record.schema == VARIABLE_SET.schema:
                message = None  # validated on apply; read by the resources that reference it
            elif record.schema == WEBHOOK_TARGET.schema:
                self._webhook_target(record)
                message = None
            elif record.schema == FLOW.schema:
                self._flow(record)
                message = None
            elif record.schema == SOURCE.schema:
                await self._source(record)
                message = None
            elif record.schema == PERSISTENT_VOLUME.schema:
                await self._volume(record)
                message = None
            elif record.schema == PROJECTION.schema:
                await self._projection(record)
                message = None
            elif record.schema == ACCOUNT.schema:
                await self._account(record)
                message = None
            elif record.schema == RELATIONS.schema:
                self._relations(record)
                message = None
            elif record.schema == RESOURCE.schema:
                raise ReconcileFailure("not-reconciled", _generic_message(record))
            else:
                raise ReconcileFailure(
                    "no-controller",
                    f"odfd validates and stores {kind_of(record.schema)} resources but has no "
                    "controller for them yet: nothing acts on this one",
                )
        except ReconcileFailure as failure:
            await self._set(record, "Failed", {"code": failure.code, "message": str(failure)})
            return ReconcileResult(record, "Failed", str(failure))
        except OdfError as err:
            await self._set(record, "Failed", {"code": "error", "message": str(err)})
            return ReconcileResult(record, "Failed", str(err))
        await self._set(record, "Ready", None)
        return ReconcileResult(record, "Ready", message)

    async def _set(self, record: ResourceRecord, phase: str, error: dict[str, Any] | None) -> None:
        condition = (
            None
            if error is None
            else {**error, "observedGeneration": record.generation, "updatedAt": utc_now_text()}
        )
        current = record.status.get("conditions", {}).get(RECONCILE_ERROR)
        if (
            current is not None
            and error is not None
            and all(current.get(k) == v for k, v in error.items())
        ):
            condition = current  # same failure as before: keep its time, write nothing new
        changed = await self.resources.update_status(
            record.id,
            phase=phase,
            observed_generation=record.generation,
            conditions={RECONCILE_ERROR: condition},
        )
        if changed:
            log.info(
                "resource reconciled",
                extra={
                    "kind": record.schema.rsplit("/", 1)[-1],
                    "resource": record.name,
                    "generation": record.generation,
                    "phase": phase,
                    **({"error": error["message"]} if error else {}),
                },
            )

    # --- Mirror ---------------------------------------------------------------------------------

    async def _mirror(self, record: ResourceRecord) -> str | None:
        spec = MirrorSpec.from_json(record.spec, f"Mirror {record.name}")
        interval = spec.every if spec.every is not None else self.sync.default_interval
        existing = await self.mirrors.get(record.name)
        if existing is None:
            dataset = await self.workspace.catalog.find_by_alias(record.name)
            if dataset is not None:
                remotes = await self.workspace.catalog.remote_aliases(dataset.id, "pull")
                if spec.source not in remotes:
                    raise ReconcileFailure(
                        "conflict",
                        f"dataset {record.name} already exists and is not pulled "
                        f"from {spec.source}",
                    )
            await self.mirrors.add(
                record.name, spec.source, spec.targets, interval, resource_id=record.id
            )
            if spec.paused:
                await self.mirrors.set_paused(record.name, True)
            await self.hooks.mirror_changed(record.name)
            return "mirror created"
        if existing.resource_id not in (None, record.id):
            raise ReconcileFailure(
                "conflict", f"mirror {record.name} is managed by resource {existing.resource_id}"
            )
        if (existing.source, existing.targets, existing.interval, existing.resource_id) != (
            spec.source,
            spec.targets,
            interval,
            record.id,
        ):
            await self.mirrors.update(
                record.name,
                source=spec.source,
                targets=spec.targets,
                interval=interval,
                resource_id=record.id,
            )
        elif existing.paused == spec.paused:
            return None
        if existing.paused != spec.paused:
            await self.mirrors.set_paused(record.name, spec.paused)
        await self.hooks.mirror_changed(record.name)
        return "mirror updated"

    # --- SecretSet ------------------------------------------------------------------------------

    def _secret_set(self, record: ResourceRecord) -> None:
        """Ready when this node can decrypt every secret (a pre-encrypted value may have been
        encrypted for another node, or be a placeholder)."""
        problems = undecryptable(record.schema, record.spec, self.secrets)
        if problems:
            raise ReconcileFailure("undecryptable", "; ".join(problems))

    # --- WebhookTarget and Flow (their work is in odfd.webhooks and odfd.flows) ----------------

    def _webhook_target(self, record: ResourceRecord) -> None:
        """Ready when its URL is http(s) and this node can decrypt its secret."""
        try:
            WebhookTarget.from_record(record, self.secrets)
        except (WebhookError, SecretError) as err:
            raise ReconcileFailure("invalid-target", str(err)) from None

    async def _account(self, record: ResourceRecord) -> None:
        try:
            await reconcile_account(self.workspace, record.name, record.spec)
        except AccountResourceError as err:
            raise ReconcileFailure("invalid-account", str(err)) from None

    def _relations(self, record: ResourceRecord) -> None:
        """Relations act through the authorization decision, which reads them itself; here a
        spec the decision would not understand is reported (and the decision skips it)."""
        try:
            check_relations(record.spec, f"Relations {record.name}")
        except (RelationsError, KeyError, TypeError, AttributeError) as err:
            raise ReconcileFailure("invalid-relations", str(err)) from None

    def _flow(self, record: ResourceRecord) -> None:
        """Ready when the daemon can run it: a valid cron, known events and tasks."""
        try:
            FlowSpec.from_json(record.spec, f"Flow {record.name}")
        except FlowSpecError as err:
            raise ReconcileFailure(err.code, str(err)) from None

    # --- Source (run by odfd.sources, from a flow's Ingest task) -------------------------------

    async def _source(self, record: ResourceRecord) -> None:
        """Ready when a run could start now: the spec reads, every config value resolves (its
        secrets decrypt) and the ingress's templates are all filled."""
        redactor = Redactor(())
        try:
            source = SourceDefinition.from_record(record)
            values = await resolve_values(
                self.workspace, record.id, f"Source {record.name}", CONFIG, self.secrets
            )
            redactor = Redactor(values.secrets)
            if not source.pushed:
                polling_source(source, values)
        except (SourceSpecError, ValueRefError) as err:
            raise ReconcileFailure(err.code, redactor.redact(str(err))) from None
        except IngestError as err:  # a template that names no value
            raise ReconcileFailure("invalid-template", redactor.redact(str(err))) from None

    # --- Projection (computed when a query reads it: odfd.app.projections) ----------------------

    async def _projection(self, record: ResourceRecord) -> None:
        """Ready when its query is one odfd runs and every input dataset exists."""
        try:
            spec = ProjectionSpec.from_record(record)
        except ProjectionError as err:
            raise ReconcileFailure(err.code, str(err)) from None
        missing = [
            alias
            for alias in spec.inputs
            if await self.workspace.catalog.find_by_alias(alias) is None
        ]
        if missing:
            raise ReconcileFailure(
                "missing-input",
                f"Projection {record.name}: spec.inputs: no dataset {', '.join(missing)} (yet)",
            )

    # --- PersistentVolume (datasets placed on it by the Dataset controller) ----------------------

    async def _volume(self, record: ResourceRecord) -> None:
        """Ready when its bucket answers with its credentials; the workspace can then place
        datasets on it."""
        try:
            await attach(self.workspace, record, self.secrets)
        except (VolumeError, ValueRefError) as err:
            raise ReconcileFailure(err.code, str(err)) from None
        except OdfError as err:
            raise ReconcileFailure(
                "unreachable", f"PersistentVolume {record.name}: {err}"
            ) from None

    async def _volume_of(self, record: ResourceRecord) -> str | None:
        """The id of the volume a Dataset resource names (None: the node's own storage)."""
        if "volume" not in record.spec:
            return None
        rows = await ResourceReferenceTable(self.workspace.catalog).list(record.id)
        row = next((r for r in rows if r.path == "spec.volume"), None)
        target = None if row is None or row.target_id is None else row.target_id
        volume = None if target is None else await self.resources.get(target)
        if volume is None:
            raise ReconcileFailure(
                "unresolved-reference",
                f"spec.volume: PersistentVolume {row.target_name if row else '?'} does not exist",
            )
        storage = placed(self.workspace)
        if volume.id not in storage.volumes:
            await self._volume(volume)
        return volume.id

    # --- Dataset --------------------------------------------------------------------------------

    async def _dataset(self, record: ResourceRecord) -> str | None:
        spec = dataset_resource(record).spec
        alias = DatasetAlias.parse(record.name)
        existing = await self.workspace.catalog.find_by_alias(record.name)
        if spec.did is not None and (existing is None or existing.id != spec.did):
            where = "is not in the workspace" if existing is None else f"is {existing.id}"
            raise ReconcileFailure(
                "did-mismatch",
                f"spec.did is {spec.did} but dataset {record.name} {where} "
                "(a DID comes from the dataset's key: mirror it, or omit did)",
            )
        snapshot = DatasetSnapshot(name=alias, kind=spec.kind, metadata=spec.metadata)
        volume = await self._volume_of(record)
        if existing is None:
            dataset = await self.workspace.create_from_snapshot(snapshot, volume=volume)
            assert dataset.id is not None  # a workspace dataset has an id
            await self.hooks.dataset_changed(dataset.id)
            return "dataset created"
        if await self.mirrors.get(record.name) is not None:
            raise ReconcileFailure(
                "conflict",
                f"dataset {record.name} is mirrored: its metadata comes from its "
                "source and cannot be set here",
            )
        placed_on = placed(self.workspace).volume_of(existing.id) if volume else None
        if volume is not None and placed_on != volume:
            raise ReconcileFailure(
                "volume-mismatch",
                f"dataset {record.name} already exists "
                + ("on another volume" if placed_on else "in the node's own storage")
                + ": odfd does not move a dataset's data between volumes",
            )
        if existing.kind is not spec.kind:
            raise ReconcileFailure(
                "kind-mismatch",
                f"dataset {record.name} is {existing.kind.value}, the spec says "
                f"{spec.kind.value} (a dataset's kind never changes)",
            )

        async def resolve(ref: DatasetRef) -> DatasetId | None:
            found = await self.workspace.try_resolve(ref)
            return None if found is None else found.id

        wanted = await normalize_snapshot(snapshot, resolve)
        dataset = self.workspace.open_dataset(existing.id)
        latest: dict[tuple[str, str | None], MetadataEvent] = {}
        async for _, block in dataset.chain.iter_blocks():
            key = _event_key(block.event)
            latest.setdefault(key, block.event)
        new_events = [event for event in wanted if latest.get(_event_key(event)) != event]
        if not new_events:
            return None
        await dataset.commit_events(new_events, expected_head=await dataset.chain.head())
        await self.hooks.dataset_changed(existing.id)
        return f"appended {', '.join(kind_name(e) for e in new_events)}"


def _settled(record: ResourceRecord) -> bool:
    """Ready at its current generation (what ``ResourceTable.list_unsettled`` leaves out)."""
    status = record.status
    return status.get("phase") == "Ready" and status.get("observedGeneration") == record.generation


def _event_key(event: MetadataEvent) -> tuple[str, str | None]:
    return kind_name(event), event.source_name if isinstance(event, AddPushSource) else None


def _generic_message(record: ResourceRecord) -> str:
    """What a generic ``Resource`` is, and why nothing acts on it."""
    remote = record.annotations.get(REMOTE_ANNOTATION)
    what = (
        f"a view of {remote}, stored under this node's own account and an id of its own"
        if remote
        else "stored as given"
    )
    return (
        f"a generic Resource, {what}: its $schema (resource/v1alpha1/Resource) names no type, so "
        "no controller of this node acts on it; apply it with its own type's $schema (e.g. "
        "sink/v1alpha1/WebhookTarget) to have this node reconcile it"
    )
