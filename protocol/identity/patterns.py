"""Wildcard patterns over dataset references, and push targets (the reference's CLI forms).

``%`` matches any run of characters, case-insensitively, as in SQL ``ILIKE``; a pattern is a
Hostname with ``%`` added where the grammar allows (see ``grammar.NAME_PATTERN``). Text without
``%`` is an ordinary reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from protocol.identity._errors import InvalidText
from protocol.identity.did import DatasetId
from protocol.identity.grammar import NAME_PATTERN, has_url_scheme, is_name_pattern
from protocol.identity.names import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasRemote,
    DatasetName,
    RepoName,
    _check_components,
    _Name,
    _split_account,
)
from protocol.identity.refs import DatasetRef, DatasetRefAny, DatasetUrl


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DatasetNamePattern(_Name):
    """A dataset name, possibly with ``%`` wildcards, e.g. ``net.example.%``."""

    KIND: ClassVar[str] = "dataset name pattern"
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _Name.__post_init__(self)
        pieces = (re.escape(piece) for piece in self.text.split("%"))
        object.__setattr__(self, "_regex", re.compile(".*".join(pieces), re.IGNORECASE | re.DOTALL))

    @staticmethod
    def _problem(text: str) -> str | None:
        if is_name_pattern(text):
            return None
        if not text:
            return "it is empty"
        found = NAME_PATTERN.match(text)
        stop = found.end() if found else 0
        return f"unexpected {text[stop]!r} at position {stop}"

    def matches(self, name: DatasetName) -> bool:
        return self._regex.fullmatch(name.text) is not None


@dataclass(frozen=True, slots=True)
class DatasetAliasPattern:
    """``(AccountName "/")? DatasetNamePattern``; without an account it matches in every account."""

    account_name: AccountName | None
    dataset_name_pattern: DatasetNamePattern

    @classmethod
    def parse(cls, text: str) -> DatasetAliasPattern:
        account, pattern = _split_account(text)
        _check_components(
            text,
            "dataset alias pattern ([account/]name-pattern)",
            (AccountName, account),
            (DatasetNamePattern, pattern),
        )
        return cls(None if account is None else AccountName(account), DatasetNamePattern(pattern))

    def matches(self, alias: DatasetAlias) -> bool:
        if self.account_name is not None and self.account_name != alias.account_name:
            return False
        return self.dataset_name_pattern.matches(alias.dataset_name)

    def __str__(self) -> str:
        if self.account_name is None:
            return str(self.dataset_name_pattern)
        return f"{self.account_name}/{self.dataset_name_pattern}"


@dataclass(frozen=True, slots=True)
class DatasetRefPattern:
    """A local reference, or (when the text has ``%``) an alias pattern."""

    target: DatasetRef | DatasetAliasPattern

    @classmethod
    def parse(cls, text: str) -> DatasetRefPattern:
        if "%" in text:
            return cls(DatasetAliasPattern.parse(text))
        return cls(DatasetRef.parse(text))

    @property
    def is_pattern(self) -> bool:
        return isinstance(self.target, DatasetAliasPattern)

    def matches(self, dataset_id: DatasetId, alias: DatasetAlias) -> bool:
        """Whether the dataset with this id and alias is selected."""
        if isinstance(self.target, DatasetAliasPattern):
            return self.target.matches(alias)
        if self.target.id is not None:
            return self.target.id == dataset_id
        return self.target.alias == alias

    def __str__(self) -> str:
        return str(self.target)


@dataclass(frozen=True, slots=True)
class DatasetPatternRemote:
    """``repo/account/pattern``: datasets of one account in one repository."""

    repo_name: RepoName
    account_name: AccountName
    dataset_name_pattern: DatasetNamePattern

    def __str__(self) -> str:
        return f"{self.repo_name}/{self.account_name}/{self.dataset_name_pattern}"


@dataclass(frozen=True, slots=True)
class DatasetPatternAmbiguous:
    """``a/pattern``: account ``a`` in a multi-tenant workspace, else repository ``a``."""

    prefix: AccountOrRepoName
    dataset_name_pattern: DatasetNamePattern

    def __str__(self) -> str:
        return f"{self.prefix}/{self.dataset_name_pattern}"


@dataclass(frozen=True, slots=True)
class DatasetRefAnyPattern:
    """Any reference, or (when the text has ``%``) a local, remote or ambiguous pattern."""

    target: DatasetRefAny | DatasetPatternRemote | DatasetPatternAmbiguous | DatasetNamePattern

    @classmethod
    def parse(cls, text: str) -> DatasetRefAnyPattern:
        if "%" not in text:
            return cls(DatasetRefAny.parse(text))
        repo: str | None = None
        account: str | None = None
        pattern = text
        if "/" in pattern:
            repo, _, pattern = pattern.partition("/")
            if "/" in pattern:
                account, _, pattern = pattern.partition("/")
        _check_components(
            text,
            "dataset pattern ([repo/][account/]name-pattern)",
            (RepoName, repo),
            (AccountName, account),
            (DatasetNamePattern, pattern),
        )
        name_pattern = DatasetNamePattern(pattern)
        if repo is None:
            return cls(name_pattern)
        if account is None:
            return cls(DatasetPatternAmbiguous(AccountOrRepoName(repo), name_pattern))
        return cls(DatasetPatternRemote(RepoName(repo), AccountName(account), name_pattern))

    @property
    def is_pattern(self) -> bool:
        return not isinstance(self.target, DatasetRefAny)

    def is_remote_pattern(self, multi_tenant: bool) -> bool:
        """Whether it selects datasets in a repository (``a/%`` does unless multi-tenant)."""
        match self.target:
            case DatasetPatternRemote():
                return True
            case DatasetPatternAmbiguous():
                return not multi_tenant
        return False

    def pattern_repo_name(self, multi_tenant: bool) -> RepoName | None:
        match self.target:
            case DatasetPatternRemote(repo_name=repo_name):
                return repo_name
            case DatasetPatternAmbiguous(prefix=prefix) if not multi_tenant:
                return prefix.as_repo_name()
        return None

    def __str__(self) -> str:
        return str(self.target)


@dataclass(frozen=True, slots=True)
class DatasetPushTarget:
    """Where ``push`` sends a dataset: a remote alias, a whole repository, or a URL."""

    target: DatasetAliasRemote | RepoName | DatasetUrl

    @classmethod
    def parse(cls, text: str) -> DatasetPushTarget:
        """Try, in the reference's order: remote alias, repository name, URL."""
        try:
            return cls(DatasetAliasRemote.parse(text))
        except InvalidText:
            pass
        try:
            return cls(RepoName(text))
        except InvalidText as error:
            problem = error.reason
        if has_url_scheme(text):
            try:
                return cls(DatasetUrl(text))
            except InvalidText as error:
                problem = error.reason
        raise InvalidText(
            text, "push target (repo/[account/]name, repository name or URL)", problem
        )

    @property
    def repo_name(self) -> RepoName | None:
        match self.target:
            case DatasetAliasRemote(repo_name=repo_name):
                return repo_name
            case RepoName():
                return self.target
        return None

    def __str__(self) -> str:
        return str(self.target)
