"""Resources that name a dataset by its alias follow the dataset: a rename rewrites the alias in
each of them, a delete removes the entries naming it (the whole resource when it named nothing
else).

Why: RFC-018 resources name datasets by alias, not by id. Left alone, a rename would silently
drop every role and visibility attribute ``Relations`` give the dataset (a private dataset could
become readable), and a delete would leave them waiting for whoever next creates a dataset under
that alias. The callers run these inside the catalog transaction that changes the dataset, so no
state exists where the dataset is renamed or deleted and its resources are not.

The kinds that name one dataset by alias, and where:

* ``Relations``: ``spec.relations[].object`` and ``spec.attributes[].object`` of type Dataset
  (other entries of the resource are kept as they are);
* ``Flow``: ``spec.target`` when its name pattern is exactly the alias (a pattern with others in
  its reach, e.g. ``%``, is a selector matched at run time and is left alone);
* ``Dataset`` and ``Mirror``: its name is the alias. The ``mirrors`` row of that alias (the
  daemon's schedule, also of a mirror added by ``odfd mirror add``) follows too: renamed, the
  next sync pulls into the renamed dataset, not a new one under the old alias; deleted, the
  mirror goes with the resource, so the deleted dataset does not come back at the next sync.

A ``Projection`` is left alone: its SQL names its inputs as tables by alias, which odfd does not
rewrite; its status names the missing input until its manifest is edited.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from odfd.app.resource_types import DATASET, FLOW, MIRROR, RELATIONS, resource_ref, type_of
from odfd.app.write_log import Actor, record_write
from odfd.errors import ManifestError
from protocol.identity import DatasetAlias
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resources import ResourceRecord, ResourceTable
from storage.workspace import Workspace

_FOLLOWING = (RELATIONS.schema, FLOW.schema, DATASET.schema, MIRROR.schema)
_NAMED_BY_ALIAS = (DATASET.schema, MIRROR.schema)
FOLLOWED = "https://odfd.dev/schemas/daemon/v1alpha1/FollowedDatasets"
"""The condition a rewritten ``Relations``/``Flow`` keeps until its manifest is applied again:
``moved`` maps each old alias to the dataset's alias now, or None if deleted."""


@dataclass(frozen=True, slots=True)
class Followed:
    """One resource changed because a dataset it named was renamed or deleted."""

    record: ResourceRecord
    """As it was before."""
    action: str
    """``apply`` (rewritten in place) or ``delete`` (it named nothing else)."""
    name: str
    """Its name after the change (a ``Dataset`` resource takes the new alias)."""


def names_dataset(value: Any, key: str) -> bool:
    """Whether a ``ResourceRef`` (``Dataset:[account/]name`` or ``{type, name, account?}``)
    names the dataset ``key`` (a lowercased alias), as the authorization policy reads it."""
    try:
        type_name, name = resource_ref(value)
    except ManifestError:
        return False
    return type_name == DATASET.name and name == key


def _renamed_ref(value: Any, new: DatasetAlias) -> Any:
    """The same reference in the same form, naming ``new``."""
    if isinstance(value, str):
        return f"{value.partition(':')[0]}:{new}"
    out = {k: v for k, v in value.items() if k != "account"}
    out["name"] = str(new.dataset_name)
    if new.account_name is not None:
        was = value.get("account")
        account = str(new.account_name)
        out["account"] = {**was, "name": account} if isinstance(was, dict) else account
    return out


def _relations(spec: dict[str, Any], key: str, new: DatasetAlias | None) -> dict[str, Any] | None:
    """The spec with entries on ``key`` renamed (``new``) or dropped (None); None if unchanged."""
    out = copy.deepcopy(spec)
    changed = False
    for field in ("relations", "attributes"):
        entries = out.get(field)
        if not isinstance(entries, list):
            continue
        kept = []
        for entry in entries:
            if isinstance(entry, dict) and names_dataset(entry.get("object"), key):
                changed = True
                if new is None:
                    continue
                entry = {**entry, "object": _renamed_ref(entry["object"], new)}
            kept.append(entry)
        out[field] = kept
    return out if changed else None


def _flow(spec: dict[str, Any], key: str, new: DatasetAlias | None) -> dict[str, Any] | None:
    target = spec.get("target")
    if isinstance(target, str):
        type_text, colon, pattern = target.partition(":")
        hit = bool(colon) and pattern.lower() == key and _is_dataset(type_text)
        renamed: Any = f"{type_text}:{new}"
    elif isinstance(target, dict):
        hit = str(target.get("name", "")).lower() == key and _is_dataset(target.get("type"))
        renamed = {**target, "name": str(new)}
    else:
        return None
    if not hit:
        return None
    return {} if new is None else {**spec, "target": renamed}


def _is_dataset(text: Any) -> bool:
    try:
        return type_of(str(text)) is DATASET
    except ManifestError:
        return False


def _empty(schema: str, spec: dict[str, Any]) -> bool:
    """Whether a spec left without the deleted dataset's entries says nothing any more."""
    if schema == RELATIONS.schema:
        return not spec.get("relations") and not spec.get("attributes")
    return not spec


async def follow_dataset(
    workspace: Workspace, actor: Actor, old_alias: str, new_alias: str | None
) -> list[Followed]:
    """Rewrite (``new_alias``) or forget (None: the dataset was deleted) ``old_alias`` in every
    resource naming it, each change recorded in the audit trail as an apply or delete is. Run
    it in the transaction that renames or deletes the dataset."""
    new = None if new_alias is None else DatasetAlias.parse(new_alias)
    table = ResourceTable(workspace.catalog)
    followed = []
    for schema in _FOLLOWING:
        for record in await table.list(schema):
            change = await _follow(table, record, old_alias, new)
            if change is not None:
                followed.append(change)
    await MirrorTable(workspace.catalog).follow(old_alias, None if new is None else str(new))
    for change in followed:
        kind = type_of(change.record.schema).name
        await record_write(workspace, actor, change.action, f"{kind}:{change.name}")
    return followed


async def _follow(
    table: ResourceTable, record: ResourceRecord, old_alias: str, new: DatasetAlias | None
) -> Followed | None:
    key = old_alias.lower()
    if record.schema in _NAMED_BY_ALIAS:
        if record.name.lower() != key:
            return None
        if new is None:
            await table.delete(record.id)
            return Followed(record, "delete", record.name)
        await table.rewrite(record.id, str(new), record.spec)
        return Followed(record, "apply", str(new))
    rewrite = _relations if record.schema == RELATIONS.schema else _flow
    spec = rewrite(record.spec, key, new)
    if spec is None:
        return None
    if new is None and _empty(record.schema, spec):
        await table.delete(record.id)
        return Followed(record, "delete", record.name)
    await table.rewrite(record.id, record.name, spec)
    await table.update_status(record.id, conditions={FOLLOWED: _moved(record, old_alias, new)})
    return Followed(record, "apply", record.name)


def _moved(record: ResourceRecord, old_alias: str, new: DatasetAlias | None) -> dict[str, Any]:
    """The resource's ``FollowedDatasets`` condition with ``old_alias`` gone to ``new`` (earlier
    aliases that had become ``old_alias`` follow it too)."""
    condition = (record.status.get("conditions") or {}).get(FOLLOWED) or {}
    now = None if new is None else str(new)
    key = old_alias.lower()
    moved = {
        old: (now if at is not None and at.lower() == key else at)
        for old, at in (condition.get("moved") or {}).items()
        if old.lower() != key
    }
    moved[old_alias] = now
    said = ", ".join(f"{old} -> {at or '(deleted)'}" for old, at in sorted(moved.items()))
    return {
        "status": "True",
        "message": f"datasets it names were renamed or deleted: {said}",
        "moved": moved,
    }


def names_alias(schema: str, spec: dict[str, Any], key: str) -> bool:
    """Whether a ``Relations`` or ``Flow`` spec names the dataset ``key`` (lowercased alias)."""
    if schema == RELATIONS.schema:
        return _relations(spec, key, None) is not None
    return schema == FLOW.schema and _flow(spec, key, None) is not None


async def refuse_stale_manifests(workspace: Workspace, manifests: list[Any]) -> None:
    """Refuse, before anything is stored, a manifest of a resource a rename or delete rewrote
    that still names the old alias while no dataset has it: applied as it is, it would take the
    roles and visibility off the renamed dataset and give them to whoever next takes the alias.
    ``manifests``: :class:`odfd.app.resources.Manifest`."""
    table = ResourceTable(workspace.catalog)
    for manifest in manifests:
        if manifest.schema not in (RELATIONS.schema, FLOW.schema):
            continue
        previous = await (
            table.get(manifest.resource_id)
            if manifest.resource_id is not None
            else table.find(manifest.schema, manifest.name)
        )
        condition = None if previous is None else previous.status.get("conditions", {})
        moved = ((condition or {}).get(FOLLOWED) or {}).get("moved") or {}
        for old, now in sorted(moved.items()):
            if not names_alias(manifest.schema, manifest.spec, old.lower()):
                continue
            if await workspace.try_resolve(old) is not None:
                continue
            done = f"was renamed to {now}" if now else "was deleted"
            fix = f"name {now} instead" if now else "remove its entries"
            raise ManifestError(
                f"{manifest.where}: {manifest.kind} {manifest.name} names dataset {old}, which "
                f"{done}; {fix} (applied as it is, the file would move what it grants off the "
                "dataset); nothing was applied"
            )
