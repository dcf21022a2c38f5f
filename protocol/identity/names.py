"""Dataset, account and repository names, and the aliases built from them.

The spec makes every name component case-insensitive ("ny-newyork" and "NY-NewYork" are the same
dataset) while a name keeps the spelling it was given, for display. So names compare, hash and
sort by their ASCII-lowercased form but print as written. A name never equals a plain ``str``:
compare ``str(name)`` when the exact spelling matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import total_ordering
from typing import ClassVar, Self

from protocol.identity._errors import InvalidText, quoted
from protocol.identity.grammar import hostname_problem, is_hostname


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class _Name:
    """A case-insensitive Hostname-grammar name; subclasses differ only in what they name."""

    text: str
    _folded: str = field(init=False, repr=False)

    KIND: ClassVar[str]

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a {self.KIND} is text, got {type(self.text).__name__}")
        problem = self._problem(self.text)
        if problem is not None:
            raise InvalidText(self.text, self.KIND, problem)
        object.__setattr__(self, "_folded", self.text.lower())

    @staticmethod
    def _problem(text: str) -> str | None:
        """Why ``text`` is not a valid name, or None; the spec's Hostname grammar by default."""
        return None if is_hostname(text) else hostname_problem(text)

    @classmethod
    def parse(cls, text: str) -> Self:
        return cls(text)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._folded == other._folded

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._folded))

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._folded < other._folded


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DatasetName(_Name):
    """A dataset's name in its account or workspace, e.g. ``ca.bankofcanada.exchange-rates``."""

    KIND: ClassVar[str] = "dataset name"
    MAX_LEN: ClassVar[int] = 100
    """The reference enforces this length in its database only, not when parsing; so do we."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AccountName(_Name):
    """The owner of datasets in a multi-tenant workspace or repository."""

    KIND: ClassVar[str] = "account name"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RepoName(_Name):
    """The local name of a remote repository, e.g. ``kamu-hub``."""

    KIND: ClassVar[str] = "repository name"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AccountOrRepoName(_Name):
    """The first part of ``a/b``, which names an account locally and a repository remotely."""

    KIND: ClassVar[str] = "account or repository name"

    def as_account_name(self) -> AccountName:
        return AccountName(self.text)

    def as_repo_name(self) -> RepoName:
        return RepoName(self.text)


def _require(value: object, kind: type, field_name: str, *, optional: bool = False) -> None:
    """Catch mix-ups such as passing a ``str`` where a name is expected, at construction."""
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise TypeError(f"{field_name} must be a {kind.__name__}, got {type(value).__name__}")


def _component_problem(kind: type[_Name], component: str | None, whole: str) -> str | None:
    """Why one component of ``whole`` is invalid, naming the component unless it is all of it."""
    if component is None:
        return None
    problem = kind._problem(component)
    if problem is None or component == whole:
        return problem
    return f"{kind.KIND} {quoted(component)}: {problem}"


def _check_components(whole: str, what: str, *components: tuple[type[_Name], str | None]) -> None:
    """Raise ``InvalidText`` (``whole`` read as ``what``) for the first invalid component."""
    for kind, component in components:
        problem = _component_problem(kind, component, whole)
        if problem is not None:
            raise InvalidText(whole, what, problem)


def _split_account(text: str) -> tuple[str | None, str]:
    """``(AccountName "/")? rest``: without a ``/`` there is no account."""
    account, slash, rest = text.partition("/")
    return (account, rest) if slash else (None, text)


def _optional_key(name: _Name | None) -> tuple[int, str]:
    """Sort a missing name first, as the reference's ``Option`` does."""
    return (0, "") if name is None else (1, name._folded)


@total_ordering
@dataclass(frozen=True, slots=True)
class DatasetAlias:
    """``(AccountName "/")? DatasetName``: how a workspace names one of its datasets."""

    account_name: AccountName | None
    dataset_name: DatasetName

    def __post_init__(self) -> None:
        _require(self.account_name, AccountName, "account_name", optional=True)
        _require(self.dataset_name, DatasetName, "dataset_name")

    @classmethod
    def parse(cls, text: str) -> DatasetAlias:
        account, name = _split_account(text)
        _check_components(
            text, "dataset alias ([account/]name)", (AccountName, account), (DatasetName, name)
        )
        return cls(None if account is None else AccountName(account), DatasetName(name))

    @property
    def is_multi_tenant(self) -> bool:
        return self.account_name is not None

    def as_remote_alias(self, repo_name: RepoName) -> DatasetAliasRemote:
        """The same dataset as named in repository ``repo_name``."""
        return DatasetAliasRemote(repo_name, self.account_name, self.dataset_name)

    def __str__(self) -> str:
        if self.account_name is None:
            return str(self.dataset_name)
        return f"{self.account_name}/{self.dataset_name}"

    def _order_key(self) -> tuple[tuple[int, str], str]:
        return _optional_key(self.account_name), self.dataset_name._folded

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DatasetAlias):
            return NotImplemented
        return self._order_key() < other._order_key()


@total_ordering
@dataclass(frozen=True, slots=True)
class DatasetAliasRemote:
    """``RepoName "/" (AccountName "/")? DatasetName``: a dataset in a named remote repository."""

    repo_name: RepoName
    account_name: AccountName | None
    dataset_name: DatasetName

    def __post_init__(self) -> None:
        _require(self.repo_name, RepoName, "repo_name")
        _require(self.account_name, AccountName, "account_name", optional=True)
        _require(self.dataset_name, DatasetName, "dataset_name")

    @classmethod
    def parse(cls, text: str) -> DatasetAliasRemote:
        what = "remote dataset alias (repo/[account/]name)"
        repo, slash, rest = text.partition("/")
        if not slash:
            raise InvalidText(text, what, "it has no '/'")
        account, name = _split_account(rest)
        _check_components(text, what, (RepoName, repo), (AccountName, account), (DatasetName, name))
        return cls(
            RepoName(repo), None if account is None else AccountName(account), DatasetName(name)
        )

    @property
    def is_multi_tenant(self) -> bool:
        return self.account_name is not None

    def local_alias(self) -> DatasetAlias:
        """The alias without the repository, as a local copy would be named."""
        return DatasetAlias(self.account_name, self.dataset_name)

    def __str__(self) -> str:
        return f"{self.repo_name}/{self.local_alias()}"

    def _order_key(self) -> tuple[str, tuple[int, str], str]:
        return self.repo_name._folded, _optional_key(self.account_name), self.dataset_name._folded

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DatasetAliasRemote):
            return NotImplemented
        return self._order_key() < other._order_key()
