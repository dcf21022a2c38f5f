"""The one authorization decision of the node: may this subject do this to this dataset, and why.

Every way in (transfer, query API, ingest, Flight SQL, the resource protocol, the console, the
admin socket) asks :meth:`Policy.decide`; none decides on its own. The inputs are:

* the subject: an account (from an issued token or a ``[server]`` token list) or anonymous;
* the dataset's owner: the account part of its alias (``bob/bobs-dataset``), or the built-in
  ``kamu`` account for a dataset without one (single-tenant nodes);
* ``Relations`` resources (``auth/v1alpha1``): a role (``reader`` < ``editor`` < ``maintainer`` <
  ``owner``) of an account on a dataset or on an account (an organisation: the role then holds on
  every dataset the organisation owns), and the dataset attributes ``allowPublicRead`` (any signed-in
  account may read) and ``allowAnonymousRead`` (a client without a token may read too);
* the ``[server] private`` alias patterns: a dataset they match is neither publicly nor
  anonymously readable unless its attributes say so.

A dataset the subject may not read does not exist for it: :attr:`Decision.status` is 404 then,
and 403 only when the subject may read but not do the action.

The decision is cheap: the relations are read into dictionaries once and cached until a
``Relations`` resource changes (:class:`PolicyCache` checks a one-row stamp of the resource table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from odfd.app.accounts import TOKEN_PREFIX, in_token_list, token_account, token_hash
from odfd.app.resource_types import ACCOUNT, DATASET, RELATIONS, resource_ref
from odfd.app.resources import DEFAULT_ACCOUNT
from odfd.config import ServerConfig
from odfd.errors import ManifestError, OdfdError
from storage.catalog.reader import CatalogReader
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace


class Action(StrEnum):
    READ = "read"
    WRITE = "write"
    """Append blocks: push, ingest."""
    MAINTAIN = "maintain"
    """Rewrite history or settings: force push, reset, compaction, delete."""
    ADMIN = "admin"
    """Change who may do what (relations), rename, delete the dataset."""


ROLE_ACTIONS: dict[str, frozenset[Action]] = {
    "reader": frozenset({Action.READ}),
    "editor": frozenset({Action.READ, Action.WRITE}),
    "maintainer": frozenset({Action.READ, Action.WRITE, Action.MAINTAIN}),
    "owner": frozenset(Action),
}
ROLES = tuple(ROLE_ACTIONS)
ATTRIBUTES = ("allowPublicRead", "allowAnonymousRead")


class RelationsError(OdfdError):
    """A ``Relations`` resource that says something the node does not understand."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who asks: ``account`` None is an anonymous client. ``limit`` narrows what the account's
    roles allow (a ``[server] read_tokens`` token acts for ``kamu`` but may only read)."""

    account: str | None
    is_admin: bool = False
    limit: frozenset[Action] | None = None
    everywhere: frozenset[Action] = frozenset()
    """Actions allowed on every dataset whatever the relations say: what a ``[server]`` list
    token could do before accounts existed (a read token reads every dataset, a push token
    pushes to any), so no node breaks on upgrade."""
    via: str = ""
    """How the subject was established (for explanations): ``token``, ``read_tokens``, …"""

    @property
    def label(self) -> str:
        return "anonymous" if self.account is None else self.account


ANONYMOUS = Principal(None)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    visible: bool
    """Whether the subject may read the dataset (when not, it does not exist for it)."""
    reason: str

    @property
    def status(self) -> int:
        """The HTTP status of a refusal: 404 when the dataset is invisible, else 403."""
        return 200 if self.allowed else (403 if self.visible else 404)


def dataset_key(alias: str) -> str:
    """``[account/]name`` lowercased, as relations and aliases compare."""
    return alias.lower()


def owner_of(key: str) -> str:
    account, slash, _ = key.rpartition("/")
    return account if slash else str(DEFAULT_ACCOUNT)


@dataclass(slots=True)
class Policy:
    dataset_roles: dict[str, dict[str, str]] = field(default_factory=dict)
    """dataset key → account → role."""
    account_roles: dict[str, dict[str, str]] = field(default_factory=dict)
    """organisation account → member account → role."""
    attributes: dict[str, dict[str, bool]] = field(default_factory=dict)
    """dataset key → attribute → value."""
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    """(dataset or account key, account) → the Relations resource that gave the role."""
    is_private: Callable[[str], bool] = lambda alias: False

    def role(self, account: str, key: str) -> tuple[str | None, str]:
        """The strongest role of ``account`` on the dataset ``key``, and why."""
        owner = owner_of(key)
        if account == owner:
            return "owner", f"{account} owns the account the dataset belongs to"
        found: list[tuple[str, str]] = []
        direct = self.dataset_roles.get(key, {}).get(account)
        if direct is not None:
            source = self.sources.get((key, account), "?")
            found.append((direct, f"{direct} of the dataset (Relations {source})"))
        member = self.account_roles.get(owner, {}).get(account)
        if member is not None:
            source = self.sources.get((owner, account), "?")
            found.append((member, f"{member} of account {owner} (Relations {source})"))
        if not found:
            return None, "no role"
        return max(found, key=lambda rr: ROLES.index(rr[0]))

    def readable_without_role(self, key: str, anonymous: bool) -> tuple[bool, str]:
        attrs = self.attributes.get(key, {})
        default = not self.is_private(key)
        public = attrs.get("allowPublicRead", default)
        if not anonymous:
            return public, f"allowPublicRead is {str(public).lower()}"
        anon = public and attrs.get("allowAnonymousRead", default)
        return anon, f"allowAnonymousRead is {str(anon).lower()}"

    def decide(self, subject: Principal, action: Action, alias: str) -> Decision:
        key = dataset_key(alias)
        if subject.is_admin:
            return Decision(True, True, f"{subject.label} is a node admin")
        actions: frozenset[Action] = frozenset()
        reason = "no role"
        if subject.account is not None:
            role, reason = self.role(subject.account, key)
            if role is not None:
                actions = ROLE_ACTIONS[role]
                if subject.limit is not None:
                    actions &= subject.limit
                    reason += f", limited to {'/'.join(sorted(subject.limit))} ({subject.via})"
        if subject.everywhere:
            actions |= subject.everywhere
            reason += f"; {'/'.join(sorted(subject.everywhere))} on every dataset ({subject.via})"
        readable = Action.READ in actions
        if not readable:
            readable, why = self.readable_without_role(key, subject.account is None)
            reason = f"{reason}; {why}"
        if action is Action.READ:
            return Decision(readable, readable, reason)
        return Decision(action in actions, readable, reason)

    def decide_account(self, subject: Principal, action: Action, account: str) -> Decision:
        """What ``subject`` may do to what lives in ``account`` besides its datasets: its
        resources (the resource protocol: reading them is :attr:`Action.READ`, applying or
        deleting :attr:`Action.ADMIN`) and its ``RestEndpoint`` Sources (posting records is
        :attr:`Action.WRITE`). An account holds the owner role on itself and an organisation's
        members their role on it; a subject's ``limit`` narrows it as on datasets. The
        ``everywhere`` reach of the ``[server]`` token lists covers datasets only (those tokens
        act for the built-in account's resources and Sources). Accounts are not hidden: a
        refusal is 403."""
        if subject.is_admin:
            return Decision(True, True, f"{subject.label} is a node admin")
        if subject.account is None:
            return Decision(False, True, "anonymous clients have no role on any account")
        key = account.lower()
        if subject.account == key:
            role: str | None = "owner"
            reason = f"{key} is the account itself"
        else:
            role = self.account_roles.get(key, {}).get(subject.account)
            source = self.sources.get((key, subject.account), "?")
            reason = "no role" if role is None else f"{role} of account {key} (Relations {source})"
        actions = ROLE_ACTIONS[role] if role is not None else frozenset()
        if subject.limit is not None and role is not None:
            actions &= subject.limit
            reason += f", limited to {'/'.join(sorted(subject.limit))} ({subject.via})"
        return Decision(action in actions, True, reason)

    def readable(self, subject: Principal, aliases: Iterable[str]) -> list[str]:
        """The aliases ``subject`` may read (listings, search, table lists)."""
        return [a for a in aliases if self.decide(subject, Action.READ, a).allowed]

    def accounts_with_roles(self, key: str) -> set[str]:
        owner = owner_of(key)
        return (
            {owner} | set(self.dataset_roles.get(key, {})) | set(self.account_roles.get(owner, {}))
        )


def _ref(value: Any, where: str) -> tuple[str, str]:
    """A ``ResourceRef`` as (type name, lowercased ``[account/]name``), refused naming ``where``."""
    try:
        return resource_ref(value)
    except ManifestError as err:
        raise RelationsError(f"{where}: {err}") from None


def check_relations(spec: Any, where: str = "spec") -> None:
    """Refuse what the decision would not understand (an unknown role, attribute or target)."""
    read_relations(Policy(), spec, where)


def read_relations(policy: Policy, spec: Any, source: str) -> None:
    """Add the roles and attributes of one ``Relations`` spec to ``policy``."""
    for i, relation in enumerate(spec.get("relations") or []):
        where = f"{source}: spec.relations[{i}]"
        subject_type, subject = _ref(relation["subject"], f"{where}.subject")
        object_type, target = _ref(relation["object"], f"{where}.object")
        if subject_type != ACCOUNT.name:
            raise RelationsError(
                f"{where}.subject: roles are given to Accounts, not {subject_type}"
            )
        if relation.get("relation") != "role" or relation.get("value") not in ROLE_ACTIONS:
            raise RelationsError(
                f"{where}: odfd knows `relation: role` with a value of {', '.join(ROLES)}"
            )
        if object_type == DATASET.name:
            policy.dataset_roles.setdefault(target, {})[subject] = relation["value"]
        elif object_type == ACCOUNT.name:
            policy.account_roles.setdefault(target, {})[subject] = relation["value"]
        else:
            raise RelationsError(f"{where}.object: roles are on Datasets or Accounts")
        policy.sources[(target, subject)] = source
    for i, attribute in enumerate(spec.get("attributes") or []):
        where = f"{source}: spec.attributes[{i}]"
        object_type, target = _ref(attribute["object"], f"{where}.object")
        name = attribute.get("name")
        if object_type != DATASET.name or name not in ATTRIBUTES:
            raise RelationsError(
                f"{where}: odfd knows the Dataset attributes {', '.join(ATTRIBUTES)}"
            )
        if not isinstance(attribute.get("value"), bool):
            raise RelationsError(f"{where}.value: {name} is true or false")
        policy.attributes.setdefault(target, {})[name] = attribute["value"]


def policy_of(specs: Iterable[tuple[str, Any]], is_private: Callable[[str], bool]) -> Policy:
    """The policy ``(name, spec)`` of the ``Relations`` resources declare (one that fails to read
    is skipped: its controller marks it ``Failed`` and says why)."""
    policy = Policy(is_private=is_private)
    for name, spec in specs:
        try:
            check_relations(spec, f"Relations {name}")
        except (RelationsError, KeyError, TypeError, AttributeError):
            continue
        read_relations(policy, spec, name)
    return policy


class PolicyCache:
    """The node's policy, rebuilt only when a ``Relations`` resource changed."""

    def __init__(self, workspace: Workspace, is_private: Callable[[str], bool]) -> None:
        self._table = ResourceTable(workspace.catalog)
        self._is_private = is_private
        self._stamp: tuple[int, str | None, int] | None = None
        self._policy = Policy(is_private=is_private)

    async def policy(self, reader: CatalogReader | None = None) -> Policy:
        """``reader``: a server's own read-only connection, so checking the stamp never waits
        behind another task's catalog transaction."""
        stamp = await (reader or self._table).stamp(RELATIONS.schema)
        if stamp != self._stamp:
            if reader is not None:
                specs = await reader.specs(RELATIONS.schema)
            else:
                specs = [(r.name, r.spec) for r in await self._table.list(RELATIONS.schema)]
            self._policy = policy_of(specs, self._is_private)
            self._stamp = stamp
        return self._policy


_PUSH_EVERYWHERE = frozenset({Action.WRITE, Action.MAINTAIN})


async def principal_of(
    workspace: Workspace,
    server: ServerConfig,
    token: str | None,
    reader: CatalogReader | None = None,
) -> Principal | None:
    """The subject a request's bearer token speaks for: anonymous without one, None for a token
    that is unknown, expired or revoked (the request is refused, not served as anonymous). A
    ``[server]`` list token acts for the built-in account within what its list allowed before."""
    if not token:
        return ANONYMOUS
    if reader is None:
        record = await token_account(workspace, token)
        if record is not None:
            return Principal(record.name, is_admin=record.is_admin, via="token")
    elif token.startswith(TOKEN_PREFIX):
        grant = await reader.token_grant(token_hash(token))
        if grant is not None and grant.live(datetime.now(UTC)):
            return Principal(grant.account, is_admin=grant.is_admin, via="token")
    builtin = str(DEFAULT_ACCOUNT)
    if in_token_list(token, server.admin_tokens):
        return Principal(builtin, is_admin=True, via="admin_tokens")
    if in_token_list(token, server.push_tokens):
        return Principal(
            builtin, limit=_PUSH_EVERYWHERE, everywhere=_PUSH_EVERYWHERE, via="push_tokens"
        )
    if in_token_list(token, server.read_tokens):
        reads = frozenset({Action.READ})
        return Principal(builtin, limit=reads, everywhere=reads, via="read_tokens")
    return None
