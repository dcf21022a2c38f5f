"""The resource use cases every way in shares: ``odfd apply``/``get``/``delete`` and the HTTP
resource protocol (RFC-018 "REST API strategy") call these, so a resource is read, found,
listed, shown and applied the same way whichever door it came through.

Accounts: a stored resource name is ``[account/]name`` (:mod:`odfd.app.resources`); here an
account is the ``AccountScope`` a request acts upon — one account (``None``: the node's own, the
account of datasets without an account part), or every account (``ALL_ACCOUNTS``, the CLI's view
of its own node).
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from odfd.app.controllers import Reconciler, ReconcileResult
from odfd.app.mirror_subscriptions import Unsubscribed, unsubscribe
from odfd.app.resource_types import MIRROR
from odfd.app.resources import (
    CONDITION_BASE,
    DEFAULT_ACCOUNT,
    Manifest,
    ResourceKey,
    account_handle,
    apply_manifests,
    delete_resources,
    kind_of,
    resource_document,
    split_name,
)
from odfd.app.selectors import Selector
from odfd.app.write_log import Actor
from odfd.errors import ManifestError
from protocol.errors import ParseError
from protocol.identity import AccountName
from storage.catalog.resource_references import ReferenceRow, ResourceReferenceTable
from storage.catalog.resources import (
    PutResult,
    ResourceNotFoundError,
    ResourceRecord,
    ResourceTable,
)
from storage.workspace import Workspace

if TYPE_CHECKING:
    from odfd.app.node import Node


class AllAccounts:
    """Every account's resources (the node's own view, as the CLI has it)."""


@dataclass(frozen=True, slots=True)
class AccountDid:
    """The account with this DID (``?account=did:…``)."""

    did: str


log = logging.getLogger(__name__)
ALL_ACCOUNTS: Final = AllAccounts()
AccountScope = AccountName | AccountDid | AllAccounts | None
"""One account (None: the node's own), or every account."""

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


@dataclass(frozen=True, slots=True)
class AppliedResource:
    """One applied resource and where reconciling it got to."""

    result: PutResult
    phase: str
    message: str | None

    @property
    def record(self) -> ResourceRecord:
        return self.result.record


Reconcile = Callable[[list[ResourceRecord]], Awaitable[list[ReconcileResult]]]
"""Runs the controllers over just-applied resources (the daemon's own, else in the caller's
process) and answers each one's outcome. Only those: a resource they unblock (a reference now
resolved) is reconciled by the daemon's next pass, so a thousand single applies do not each
reconcile every resource."""


def reconcile_here(node: Node) -> Reconcile:
    """The controllers run in this process (a server without a daemon on its workspace)."""
    return reconciling_with(Reconciler(node.workspace, node.config.sync))


def reconciling_with(reconciler: Reconciler) -> Reconcile:
    async def reconcile(records: list[ResourceRecord]) -> list[ReconcileResult]:
        return [await reconciler.reconcile(record) for record in records]

    return reconcile


def account_scope(text: str | None, default: AccountName | None) -> AccountScope:
    """The RFC's ``?account=``: absent or empty is ``default`` (the requester's account); else an
    account name or the DID of one (a DID is derived from the name, so it is compared by that)."""
    if not text:
        return default
    if text.startswith("did:"):
        return AccountDid(text)
    try:
        name = AccountName(text)
    except ParseError as err:
        raise ManifestError(f"?account={text}: {err}") from None
    return None if name == DEFAULT_ACCOUNT else name


def in_scope(record: ResourceRecord, scope: AccountScope) -> bool:
    if isinstance(scope, AllAccounts):
        return True
    account, _ = split_name(record.name)
    if isinstance(scope, AccountDid):
        return str(account_handle(account or DEFAULT_ACCOUNT).did) == scope.did
    if account is None or scope is None:
        return account is None and scope is None
    return str(account).lower() == str(scope).lower()


async def list_resources(
    workspace: Workspace,
    selector: Selector,
    scope: AccountScope = ALL_ACCOUNTS,
) -> list[ResourceRecord]:
    """The resources the selector matches (type, name pattern, labels) in the account scope."""
    records = await ResourceTable(workspace.catalog).list(selector.schema)
    return [r for r in records if selector.matches(r) and in_scope(r, scope)]


async def find_resource(
    workspace: Workspace, schema: str, ref: str, scope: AccountScope = ALL_ACCOUNTS
) -> ResourceRecord:
    """A resource of type ``schema`` by its id (UUID), by the DID of its object (a ``Dataset``'s
    dataset), or by its name in the account scope (``[account/]name`` when every account is);
    :class:`ResourceNotFoundError` names what was looked for."""
    table = ResourceTable(workspace.catalog)
    record: ResourceRecord | None = None
    if _UUID.match(ref):
        record = await table.get(ref.lower())
    elif ref.startswith("did:"):
        record = await _by_did(workspace, table, schema, ref)
    elif isinstance(scope, AllAccounts) or scope is None:
        record = await table.find(schema, ref)
    elif not isinstance(scope, AccountDid):
        record = await table.find(schema, f"{scope}/{ref}")
    else:
        record = next(
            (
                r
                for r in await table.list(schema)
                if in_scope(r, scope) and split_name(r.name)[1].lower() == ref.lower()
            ),
            None,
        )
    if record is None or record.schema != schema or not in_scope(record, scope):
        raise ResourceNotFoundError(
            f"no {kind_of(schema)} resource {ref}"
            + ("" if isinstance(scope, AllAccounts) else f" in account {scope or DEFAULT_ACCOUNT}")
        )
    return record


async def _by_did(
    workspace: Workspace, table: ResourceTable, schema: str, did: str
) -> ResourceRecord | None:
    """A resource whose object has that DID: a ``Dataset`` whose spec names it, or whose dataset
    in this workspace has it as its id."""
    for record in await table.list(schema):
        if record.spec.get("did") == did:
            return record
    for dataset in await workspace.list_datasets():
        if str(dataset.id) == did:
            return await table.find(schema, str(dataset.alias))
    return None


async def resource_documents(
    workspace: Workspace, records: Iterable[ResourceRecord]
) -> list[dict[str, Any]]:
    """The canonical documents of ``records`` (``odfd get -o json``, the HTTP protocol's bodies),
    each resolved reference with its target's id; secrets only as the ciphertext stored."""
    records = list(records)
    table = ResourceReferenceTable(workspace.catalog)
    references: dict[str, list[ReferenceRow]] = {}
    for row in await table.list_of(record.id for record in records):
        references.setdefault(row.resource_id, []).append(row)
    return [resource_document(r, references.get(r.id, ())) for r in records]


async def documents_now(
    workspace: Workspace, records: Iterable[ResourceRecord]
) -> list[dict[str, Any]]:
    """The canonical documents of ``records`` as stored now (the status the controllers wrote
    since), in two reads whatever their number: what an apply answers."""
    records = list(records)
    ids = [record.id for record in records]
    current = await ResourceTable(workspace.catalog).get_many(ids)
    references: dict[str, list[ReferenceRow]] = {}
    for row in await ResourceReferenceTable(workspace.catalog).list_of(ids):
        references.setdefault(row.resource_id, []).append(row)
    return [
        resource_document(current.get(record.id, record), references.get(record.id, ()))
        for record in records
    ]


WATCH_POLL_SECONDS = 0.2
"""How often a watch reads the resource again."""


async def watch_resource(
    workspace: Workspace, record: ResourceRecord, seconds: float
) -> AsyncIterator[tuple[str, ResourceRecord]]:
    """A watch of one resource (the HTTP protocol's ``?watch=true``): ``ADDED`` with it as it
    is, then ``MODIFIED`` each time its generation or status changes, until ``DELETED`` or
    for ``seconds``."""
    import asyncio

    yield "ADDED", record
    table = ResourceTable(workspace.catalog)
    seen = (record.generation, record.status)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await asyncio.sleep(min(WATCH_POLL_SECONDS, max(0.0, deadline - loop.time())))
        now = await table.get(record.id)
        if now is None:
            yield "DELETED", record
            return
        if (now.generation, now.status) != seen:
            seen, record = (now.generation, now.status), now
            yield "MODIFIED", now


async def apply_and_reconcile(
    workspace: Workspace,
    manifests: list[Manifest],
    reconcile: Reconcile,
    *,
    actor: Actor | None = None,
) -> list[AppliedResource]:
    """Store the manifests (all validated first) as done by ``actor`` (default: a local
    command), run their controllers, and answer where each applied resource got to
    (``Pending`` if the controllers did not reach it)."""
    results = await apply_manifests(workspace, manifests, actor=actor)
    outcomes = {r.resource.id: r for r in await reconcile([r.record for r in results])}
    applied = []
    for result in results:
        outcome = outcomes.get(result.record.id)
        phase, message = ("Pending", None) if outcome is None else (outcome.phase, outcome.message)
        applied.append(AppliedResource(result, phase, message))
    return applied


UNSUBSCRIBED = CONDITION_BASE + "Unsubscribed"
"""On a deleted Mirror's last document: whether its subscription at the source was removed."""


@dataclass(frozen=True, slots=True)
class Deleted:
    """A deleted resource, and what deleting it undid elsewhere (a subscribed Mirror's
    subscription at its source node)."""

    record: ResourceRecord
    unsubscribed: Unsubscribed | None = None


async def delete_and_undo(
    node: Node, keys: list[ResourceKey], *, actor: Actor | None = None
) -> list[Deleted]:
    """Delete the named resources (``odfd delete``, the resource protocol's ``DELETE``), then
    remove what each made at other nodes: a subscribed Mirror's WebhookTarget and Flow at its
    source. The local deletion stands whatever the source says; a source that cannot be reached
    is in the result (and logged), naming what remains there and how to remove it."""
    records = await delete_resources(node.workspace, keys, actor=actor)
    deleted = []
    for record in records:
        undone = await unsubscribe(node, record) if record.schema == MIRROR.schema else None
        if undone is not None and undone.error is not None:
            log.warning("%s", undone)
        deleted.append(Deleted(record, undone))
    return deleted
