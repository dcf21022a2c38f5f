"""The datasets and accounts the GraphQL API (``/graphql``) names: which datasets a caller sees,
found by id, by owner and name, by account or by a search text; and the accounts that own them.

A dataset exists for a caller as it does for the query API (``visible``: private and withheld
datasets do not exist without read access). A dataset whose alias has no account part is owned
by the node's built-in account (``odfd.app.resources.DEFAULT_ACCOUNT``), as in kamu-cli's
single-tenant nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app.resources import DEFAULT_ACCOUNT, account_handle
from protocol.errors import ParseError
from protocol.identity import AccountName, DatasetAlias, DatasetId

if TYPE_CHECKING:
    from odfd.app.answers import Visible
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord
    from storage.catalog.accounts import AccountRecord


@dataclass(frozen=True, slots=True)
class AccountFacts:
    """An account as GraphQL shows it: a node account's row, or one named only by the aliases
    of its datasets (its id derived from the name, as every account id on this node is)."""

    id: str
    name: str
    display_name: str
    avatar_url: str | None
    is_admin: bool


def owner_name(record: DatasetRecord) -> str:
    """The account that owns the dataset (the built-in one for an alias without account)."""
    account = DatasetAlias.parse(record.alias).account_name
    return str(account if account is not None else DEFAULT_ACCOUNT)


def dataset_name(record: DatasetRecord) -> str:
    return str(DatasetAlias.parse(record.alias).dataset_name)


async def visible_datasets(node: Node, visible: Visible) -> list[DatasetRecord]:
    """Every dataset the caller may read, by alias."""
    records = [record for record in await node.workspace.list_datasets() if visible(record)]
    return sorted(records, key=lambda record: record.alias.lower())


async def search(node: Node, visible: Visible, text: str) -> list[DatasetRecord]:
    """The datasets the caller may read whose alias contains ``text``, case-insensitively (as
    ``odfd search`` matches); an empty text matches every one."""
    needle = text.strip().lower()
    return [r for r in await visible_datasets(node, visible) if needle in r.alias.lower()]


async def by_id(node: Node, visible: Visible, dataset_id: DatasetId) -> DatasetRecord | None:
    """One catalog lookup by id, not a scan of every dataset."""
    record = await record_of(node, dataset_id)
    return record if record is not None and visible(record) else None


async def record_of(node: Node, dataset_id: DatasetId) -> DatasetRecord | None:
    """The dataset of that id whoever asks: the ``datasets`` mutations decide themselves what
    the caller may see and change of it."""
    record: DatasetRecord | None = await node.workspace.catalog.get_dataset(dataset_id)
    return record


async def by_owner_and_name(
    node: Node, visible: Visible, account: str, name: str
) -> DatasetRecord | None:
    """Names are compared case-insensitively, as every ODF name."""
    wanted = (account.lower(), name.lower())
    for record in await visible_datasets(node, visible):
        if (owner_name(record).lower(), dataset_name(record).lower()) == wanted:
            return record
    return None


async def by_account(node: Node, visible: Visible, account: str) -> list[DatasetRecord]:
    wanted = account.lower()
    return [r for r in await visible_datasets(node, visible) if owner_name(r).lower() == wanted]


async def account_by_name(node: Node, visible: Visible, name: str) -> AccountFacts | None:
    """A node account, the built-in account, or an account that owns a dataset the caller may
    read; ``None`` for any other name."""
    from storage.catalog.accounts import AccountTable

    try:
        parsed = AccountName.parse(name)
    except ParseError:
        return None
    row = await AccountTable(node.workspace.catalog).get(str(parsed).lower())
    if row is not None:
        return account_facts(row)
    if str(parsed).lower() != str(DEFAULT_ACCOUNT) and not await by_account(node, visible, name):
        return None
    return derived_account(str(parsed))


async def account_by_id(node: Node, visible: Visible, account_id: str) -> AccountFacts | None:
    """The account whose id (a ``did:odf:`` derived from its name) is ``account_id``."""
    from storage.catalog.accounts import AccountTable

    for row in await AccountTable(node.workspace.catalog).all():
        if row.id == account_id:
            return account_facts(row)
    owners = {owner_name(r) for r in await visible_datasets(node, visible)} | {str(DEFAULT_ACCOUNT)}
    return next(
        (derived_account(o) for o in owners if account_handle(AccountName(o)).id == account_id),
        None,
    )


async def owner(node: Node, record: DatasetRecord) -> AccountFacts:
    """The dataset's owner: its node account when there is one."""
    from storage.catalog.accounts import AccountTable

    name = owner_name(record)
    row = await AccountTable(node.workspace.catalog).get(name.lower())
    if row is not None:
        return account_facts(row)
    return derived_account(name)


def account_facts(row: AccountRecord) -> AccountFacts:
    """A node account (``odfd account``) as GraphQL shows it."""
    return AccountFacts(row.id, row.name, row.display_name, row.avatar_url, row.is_admin)


def derived_account(name: str) -> AccountFacts:
    return AccountFacts(account_handle(AccountName(name)).id, name, name, None, False)
