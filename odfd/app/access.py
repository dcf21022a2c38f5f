"""Who can do what on a dataset, and why (``odfd access``): the authorization decision asked for
every account of the node, every account a relation names, the ``[server]`` token lists, any
other signed-in account and an anonymous client, so an operator reads the policy instead of
reconstructing it from manifests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odfd.app.accounts import list_accounts
from odfd.app.authorization import ANONYMOUS, Action, Decision, PolicyCache, Principal
from odfd.app.node import Node
from odfd.app.resources import DEFAULT_ACCOUNT

PolicyDecide = Callable[[Principal, Action, str], Decision]
OTHER_ACCOUNT = "(any other account)"
"""The row of a signed-in account without a role: named so it cannot clash with an account."""


@dataclass(frozen=True, slots=True)
class AccessRow:
    who: str
    allowed: tuple[Action, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class AccessReport:
    alias: str
    rows: tuple[AccessRow, ...]


def _row(who: str, subject: Principal, alias: str, policy_decide: PolicyDecide) -> AccessRow:
    decisions = {action: policy_decide(subject, action, alias) for action in Action}
    allowed = tuple(a for a, d in decisions.items() if d.allowed)
    # The reason of the strongest allowed action, else of the refused read.
    strongest = allowed[-1] if allowed else Action.READ
    return AccessRow(who, allowed, decisions[strongest].reason)


async def access_report(node: Node, dataset: str) -> AccessReport:
    record = await node.workspace.resolve(dataset)
    server = node.config.server
    policy = await PolicyCache(node.workspace, server.is_private).policy()
    alias = record.alias
    rows: list[AccessRow] = []
    accounts = {a.name: a for a in await list_accounts(node)}
    named = sorted(set(accounts) | policy.accounts_with_roles(alias.lower()))
    for name in named:
        found = accounts.get(name)
        subject = Principal(name, is_admin=found is not None and found.is_admin, via="token")
        rows.append(_row(name, subject, alias, policy.decide))
    builtin = str(DEFAULT_ACCOUNT)
    reads = frozenset({Action.READ})
    writes = frozenset({Action.WRITE, Action.MAINTAIN})
    for label, tokens, subject in (
        ("[server] admin_tokens", server.admin_tokens, Principal(builtin, is_admin=True)),
        (
            "[server] push_tokens",
            server.push_tokens,
            Principal(builtin, limit=writes, everywhere=writes, via="push_tokens"),
        ),
        (
            "[server] read_tokens",
            server.read_tokens,
            Principal(builtin, limit=reads, everywhere=reads, via="read_tokens"),
        ),
    ):
        if tokens:
            rows.append(_row(label, subject, alias, policy.decide))
    rows.append(_row(OTHER_ACCOUNT, Principal("\0other", via="token"), alias, policy.decide))
    rows.append(_row("(anonymous)", ANONYMOUS, alias, policy.decide))
    return AccessReport(alias, tuple(rows))
