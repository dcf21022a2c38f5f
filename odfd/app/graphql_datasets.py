"""Dataset management as the kamu web UI asks it over GraphQL (``mutation { datasets { ... } }``):
create (empty, or from a ``DatasetSnapshot`` manifest), rename, delete and set visibility.

Each step is the use case ``odfd add``/``rename``/``delete`` and ``odfd apply`` run
(:mod:`odfd.app.datasets`, :mod:`odfd.app.resource_service`), asked only after the node's one
authorization decision (:mod:`odfd.app.authorization`) allows it. What the caller may not do is a
:class:`Refused` naming the dataset; an outcome the reference answers as a result (a name taken, a
manifest that does not read, inputs not found, a dataset others read) is a value here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odfd.app.authorization import Action, Policy, Principal, dataset_key
from odfd.app.datasets import (
    DatasetAdded,
    DatasetNotAdded,
    add_datasets,
    delete_datasets,
    rename_dataset,
)
from odfd.app.events import Event
from odfd.app.resource_datasets import names_dataset
from odfd.app.resource_service import apply_and_reconcile, delete_and_undo, reconcile_here
from odfd.app.resources import ResourceKey, parse_manifest
from odfd.app.write_log import Actor
from odfd.errors import OdfdError
from protocol.errors import DecodeError, ParseError
from protocol.identity import DatasetAlias, DatasetName
from protocol.model import DatasetKind, DatasetSnapshot, SetTransform
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.answers import Visible
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord


ANONYMOUS_WORDS = "Anonymous access forbidden"
"""The reference's words when a mutation is sent without a token."""
RELATIONS_SCHEMA = "https://opendatafabric.org/schemas/auth/v1alpha1/Relations"


class Refused(OdfdError):
    """The caller may not do this (anonymous, or no role that allows it)."""


@dataclass(slots=True)
class Caller:
    """Who asks, the node's policy, and the datasets that exist for the caller."""

    subject: Principal
    policy: Policy
    """As the request's authorization read it; :meth:`refresh` reads it again after a change."""
    visible: Visible
    reload: Callable[[], Awaitable[Policy]]

    async def refresh(self) -> None:
        """What the request answers after changing visibility (a created dataset's
        ``visibility``) follows the change."""
        self.policy = await self.reload()

    @property
    def actor(self) -> Actor:
        """Writes are recorded as the caller's account, as the other HTTP routes record them."""
        assert self.subject.account is not None, "anonymous callers are refused first"
        return Actor(self.subject.account, "http")

    def require_account(self) -> None:
        if self.subject.account is None:
            raise Refused(ANONYMOUS_WORDS)

    def require(self, action: Action, alias: str, doing: str) -> None:
        self.require_account()
        decision = self.policy.decide(self.subject, action, alias)
        if not decision.allowed:
            raise Refused(
                f"Dataset access error: {self.subject.label} may not {doing} {alias} "
                f"({decision.reason})"
            )


# --- results --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Created:
    record: DatasetRecord


@dataclass(frozen=True, slots=True)
class NameCollision:
    account: str | None
    name: str


@dataclass(frozen=True, slots=True)
class Malformed:
    """The manifest does not read as a ``DatasetSnapshot`` (the message names the field)."""

    message: str


@dataclass(frozen=True, slots=True)
class InvalidSnapshot:
    """It reads, but cannot be stored (the message names the event)."""

    message: str


@dataclass(frozen=True, slots=True)
class MissingInputs:
    inputs: list[str]


CreateResult = Created | NameCollision | InvalidSnapshot | MissingInputs


@dataclass(frozen=True, slots=True)
class Renamed:
    old_name: str
    new_name: str


@dataclass(frozen=True, slots=True)
class RenameUnchanged:
    name: str


@dataclass(frozen=True, slots=True)
class RenameCollision:
    alias: str


@dataclass(frozen=True, slots=True)
class Deleted:
    alias: str


@dataclass(frozen=True, slots=True)
class DeleteBlocked:
    """Other datasets read it: ``readers`` those the caller may read, by alias, of ``count``
    (a reader the caller may not read is counted, never named)."""

    alias: str
    readers: list[str]
    count: int


# --- what the caller may do ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Permissions:
    """What a dataset's settings page may offer the caller: the mutations here allow exactly
    this (``commit``: appending blocks, a push or an ingest)."""

    rename: bool
    set_visibility: bool
    delete: bool
    commit: bool


def permissions(caller: Caller, record: DatasetRecord) -> Permissions:
    def may(action: Action) -> bool:
        return caller.policy.decide(caller.subject, action, record.alias).allowed

    admin = caller.subject.account is not None and may(Action.ADMIN)
    return Permissions(
        admin, admin, admin, caller.subject.account is not None and may(Action.WRITE)
    )


GRANTED_ROLES = {"reader": "READER", "editor": "EDITOR", "maintainer": "MAINTAINER"}
"""A role given by ``Relations`` as the reference names it; owning the account is no such role."""


def role(caller: Caller, record: DatasetRecord) -> str | None:
    account = caller.subject.account
    if account is None:
        return None
    found, _why = caller.policy.role(account, record.alias.lower())
    return None if found is None else GRANTED_ROLES.get(found)


# --- create ---------------------------------------------------------------------------------------


def read_snapshot(text: str) -> DatasetSnapshot | Malformed:
    """One ``DatasetSnapshot`` from manifest YAML, as ``odfd add`` reads it."""
    from protocol.codec import yaml as odf_yaml

    try:
        return odf_yaml.load_snapshot(text, source="snapshot")
    except (DecodeError, ParseError) as error:
        return Malformed(str(error))


def empty_snapshot(kind: DatasetKind, alias: str) -> DatasetSnapshot:
    return DatasetSnapshot(name=_alias(alias), kind=kind, metadata=())


async def create(
    node: Node, caller: Caller, snapshot: DatasetSnapshot, *, public: bool
) -> CreateResult:
    """``odfd add`` of one manifest, where the caller may write (its own account, or one it
    holds an editor role in). The visibility is set first, so a private dataset is never
    readable by others, not even for a moment; it is removed again if nothing was added."""
    alias = str(snapshot.name)
    caller.require(Action.WRITE, alias, "create")
    missing = await _missing_inputs(node, caller, snapshot)
    if missing:
        return MissingInputs(missing)
    if await node.workspace.try_resolve(alias) is not None:
        return _collision(snapshot)
    await _apply_visibility(node, caller, alias, public=public, anonymous=public)
    sink = _Collected()
    await add_datasets(
        node, [snapshot], replace=False, confirm=_no_question, sink=sink, actor=caller.actor
    )
    added = [e for e in sink.events if isinstance(e, DatasetAdded)]
    if added:
        return Created(await node.workspace.resolve(added[0].dataset_id))
    if await node.workspace.try_resolve(alias) is None:
        await _forget_visibility(node, caller, alias)
    failed = [e for e in sink.events if isinstance(e, DatasetNotAdded)]
    return InvalidSnapshot(failed[0].error) if failed else _collision(snapshot)


def _collision(snapshot: DatasetSnapshot) -> NameCollision:
    account = snapshot.name.account_name
    return NameCollision(None if account is None else str(account), str(snapshot.name.dataset_name))


async def _missing_inputs(node: Node, caller: Caller, snapshot: DatasetSnapshot) -> list[str]:
    """The inputs of its transform the caller cannot read here (the reference's
    ``MissingInputs``): one that does not exist, or one the caller may not read, which does not
    exist for it (so a derivative never reads what its author may not)."""
    missing = []
    for event in snapshot.metadata:
        if isinstance(event, SetTransform):
            for entry in event.inputs:
                record = await node.workspace.try_resolve(entry.dataset_ref)
                if record is None or not caller.visible(record):
                    missing.append(str(entry.dataset_ref))
    return missing


def _alias(text: str) -> DatasetAlias:
    try:
        return DatasetAlias.parse(text)
    except ParseError as error:
        raise Refused(f"datasetAlias {text!r} is not a dataset alias: {error}") from None


def _no_question(_question: str) -> None:
    """A mutation is its own confirmation: nothing is asked."""


@dataclass(slots=True)
class _Collected:
    events: list[Event] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        self.events.append(event)


# --- by id: rename, delete, visibility ------------------------------------------------------------


def writable(caller: Caller, record: DatasetRecord | None) -> DatasetRecord | None:
    """``datasets.byId`` of a mutation: a dataset the caller may not read does not exist
    (``None``); one it reads but may not write to is refused, as the reference does."""
    caller.require_account()
    if record is None or not caller.visible(record):
        return None
    caller.require(Action.WRITE, record.alias, "change")
    return record


async def rename(
    node: Node, caller: Caller, record: DatasetRecord, new_name: str
) -> Renamed | RenameUnchanged | RenameCollision:
    """``odfd rename`` within the dataset's account (its visibility and roles follow it there:
    :mod:`odfd.app.resource_datasets`)."""
    caller.require(Action.ADMIN, record.alias, "rename")
    try:
        name = DatasetName.parse(new_name)
    except ParseError as error:
        raise Refused(f"newName {new_name!r} is not a dataset name: {error}") from None
    old = DatasetAlias.parse(record.alias)
    if str(old.dataset_name) == str(name):
        return RenameUnchanged(str(name))
    wanted = DatasetAlias(old.account_name, name)
    existing = await node.workspace.try_resolve(str(wanted))
    if existing is not None and existing.id != record.id:
        return RenameCollision(str(wanted))
    await rename_dataset(node, str(record.id), str(wanted), actor=caller.actor)
    await caller.refresh()
    return Renamed(str(old.dataset_name), str(name))


async def delete(node: Node, caller: Caller, record: DatasetRecord) -> Deleted | DeleteBlocked:
    """``odfd delete`` of one dataset (never recursive): refused while others read it."""
    caller.require(Action.ADMIN, record.alias, "delete")
    readers = [r for r in (await node.workspace.graph()).readers_of(record.id) if r.id != record.id]
    if readers:
        shown = [r.alias for r in readers if caller.visible(r)]
        return DeleteBlocked(record.alias, shown, len(readers))
    await delete_datasets(
        node,
        [str(record.id)],
        recursive=False,
        confirm=_no_question,
        sink=_Collected(),
        actor=caller.actor,
    )
    await caller.refresh()
    return Deleted(record.alias)


async def set_visibility(
    node: Node, caller: Caller, record: DatasetRecord, *, public: bool, anonymous: bool
) -> None:
    """Changing who may read is the owner's (admin action), as applying ``Relations`` is."""
    caller.require(Action.ADMIN, record.alias, "set the visibility of")
    await _apply_visibility(node, caller, record.alias, public=public, anonymous=anonymous)


def visibility_key(alias: str) -> ResourceKey:
    """The name a new ``Relations`` resource holding a dataset's visibility gets: one per
    dataset, in its owner's account, named after it, so setting it again replaces it."""
    parsed = DatasetAlias.parse(alias)
    name = f"{parsed.dataset_name}-visibility"
    account = parsed.account_name
    return ResourceKey(RELATIONS_SCHEMA, name if account is None else f"{account}/{name}")


def _only_visibility_of(record: ResourceRecord, alias: str) -> bool:
    """Whether ``record`` says nothing but the visibility attributes of ``alias``."""
    attributes = record.spec.get("attributes") or []
    key = dataset_key(alias)
    return (
        bool(attributes)
        and not record.spec.get("relations")
        and all(isinstance(a, dict) and names_dataset(a.get("object"), key) for a in attributes)
    )


async def _visibility_record(node: Node, alias: str) -> tuple[ResourceKey, ResourceRecord | None]:
    """The resource holding ``alias``'s visibility, found by what it says (a rename of the
    dataset rewrote it but kept its name), or the key a new one takes: :func:`visibility_key`,
    numbered when a resource about another dataset (renamed away) holds that name."""
    wanted = visibility_key(alias)
    account = wanted.name.rpartition("/")[0].lower()
    taken = set()
    for record in await ResourceTable(node.workspace.catalog).list(RELATIONS_SCHEMA):
        if record.name.rpartition("/")[0].lower() != account:
            continue
        taken.add(record.name.lower())
        if record.name.lower().endswith("-visibility") and _only_visibility_of(record, alias):
            return ResourceKey(RELATIONS_SCHEMA, record.name), record
    name, n = wanted.name, 1
    while name.lower() in taken:
        n += 1
        name = f"{wanted.name}-{n}"
    return ResourceKey(RELATIONS_SCHEMA, name), None


async def _apply_visibility(
    node: Node, caller: Caller, alias: str, *, public: bool, anonymous: bool
) -> None:
    """``odfd apply`` of a ``Relations`` resource setting the dataset's ``allowPublicRead`` and
    ``allowAnonymousRead`` (the reference's private: both false; public: read by any signed-in
    account, and by anyone when ``anonymousAvailable``)."""
    key, _ = await _visibility_record(node, alias)
    account, _, name = key.name.rpartition("/")
    headers: dict[str, object] = {"name": name}
    if account:
        headers["account"] = {"name": account}
    target = f"Dataset:{alias}"
    document = {
        "$schema": RELATIONS_SCHEMA,
        "headers": headers,
        "spec": {
            "attributes": [
                {"object": target, "name": "allowPublicRead", "value": public},
                {"object": target, "name": "allowAnonymousRead", "value": public and anonymous},
            ]
        },
    }
    manifest = parse_manifest(document, f"visibility of {alias}")
    await apply_and_reconcile(node.workspace, [manifest], reconcile_here(node), actor=caller.actor)
    await caller.refresh()


async def _forget_visibility(node: Node, caller: Caller, alias: str) -> None:
    """``odfd delete`` of the visibility resource set for a dataset whose create failed, so a
    dataset later given the alias does not inherit it."""
    key, record = await _visibility_record(node, alias)
    if record is not None:
        await delete_and_undo(node, [key], actor=caller.actor)
