"""References to datasets, as the spec's grammar defines them and kamu-cli classifies them.

- ``DatasetRef``: a local dataset, by id or alias.
- ``DatasetRefRemote``: a dataset in a repository, by (repo/)id, remote alias or URL.
- ``DatasetRefAny``: either. Its text is ambiguous in one case: ``a/b`` is a multi-tenant local
  alias (account ``a``) or a remote alias (repository ``a``). Like the reference, parsing keeps
  that case as a ``DatasetAliasAmbiguous`` until the caller, who knows the configured
  repositories, disambiguates it.

Each reference wraps one ``target`` of the types its grammar allows, so callers can
``match ref.target:`` on the variant; properties such as ``id`` and ``dataset_name`` read the
common parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from protocol.identity._errors import InvalidText
from protocol.identity.did import DatasetId
from protocol.identity.grammar import (
    has_url_scheme,
    hostname_problem,
    is_hostname,
    split_remote_dataset_id,
)
from protocol.identity.names import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasRemote,
    DatasetName,
    RepoName,
)

IsRepo = Callable[[RepoName], bool]
"""Tells whether a name is a configured repository; used to disambiguate ``a/b``."""

_FORBIDDEN_IN_URL = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True, slots=True)
class DatasetIdRemote:
    """``RepoName "/" DatasetId``: a dataset id to look up in one repository."""

    repo_name: RepoName
    dataset_id: DatasetId

    def __str__(self) -> str:
        return f"{self.repo_name}/{self.dataset_id}"


@dataclass(frozen=True, slots=True)
class DatasetAliasAmbiguous:
    """``a/b`` read as a ``DatasetRefAny``: account ``a`` locally, or repository ``a``."""

    prefix: AccountOrRepoName
    dataset_name: DatasetName

    def as_local_alias(self) -> DatasetAlias:
        return DatasetAlias(self.prefix.as_account_name(), self.dataset_name)

    def as_remote_alias(self) -> DatasetAliasRemote:
        return DatasetAliasRemote(self.prefix.as_repo_name(), None, self.dataset_name)

    def __str__(self) -> str:
        return f"{self.prefix}/{self.dataset_name}"


@dataclass(frozen=True, slots=True)
class DatasetUrl:
    """``Scheme "://" …``: a dataset by URL (``https``, ``odf+https``, ``ipfs``, ``file``, …).

    Kept as written (the reference normalises with a WHATWG parser; we only validate), so ``str()``
    gives back the input. Whitespace and control characters must be percent-encoded.
    """

    url: str

    def __post_init__(self) -> None:
        problem = _url_problem(self.url)
        if problem is not None:
            raise InvalidText(self.url, "dataset URL", problem)

    @property
    def scheme(self) -> str:
        """The scheme in lower case, e.g. ``odf+https``."""
        return self.url.partition("://")[0].lower()

    def parts(self) -> SplitResult:
        """The URL's components, for transports that open it."""
        return urlsplit(self.url)

    def __str__(self) -> str:
        return self.url


def _url_problem(url: str) -> str | None:
    if not has_url_scheme(url):
        return "it must start with a scheme and '://'"
    forbidden = _FORBIDDEN_IN_URL.search(url)
    if forbidden is not None:
        char, position = forbidden.group(), forbidden.start()
        return f"character {char!r} at position {position} must be percent-encoded"
    scheme, _, rest = url.partition("://")
    if not rest:
        return "nothing follows '://'"
    parts = urlsplit(url)
    if scheme.lower() != "file" and not parts.netloc:
        return f"a {scheme} URL needs a host"
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError as error:
        return str(error)
    return None


def _remote_id(text: str, what: str) -> DatasetId | DatasetIdRemote | None:
    """``(RepoName "/")? DatasetId`` if ``text`` has that shape; a bad id there is an error."""
    split = split_remote_dataset_id(text)
    if split is None:
        return None
    repo, id_text = split
    try:
        dataset_id = DatasetId.parse(id_text)
    except InvalidText as error:
        raise InvalidText(text, what, error.reason) from None
    return dataset_id if repo is None else DatasetIdRemote(RepoName(repo), dataset_id)


def _dataset_id_of(target: object) -> DatasetId | None:
    """The id a reference target names, if it names one (``[repo/]did:odf:…``)."""
    match target:
        case DatasetId():
            return target
        case DatasetIdRemote(dataset_id=dataset_id):
            return dataset_id
    return None


def _url(text: str, what: str) -> DatasetUrl:
    try:
        return DatasetUrl(text)
    except InvalidText as error:
        raise InvalidText(text, what, error.reason) from None


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """``DatasetId / DatasetAlias``: a dataset in the local workspace."""

    target: DatasetId | DatasetAlias

    def __post_init__(self) -> None:
        if isinstance(self.target, DatasetName):
            object.__setattr__(self, "target", DatasetAlias(None, self.target))
        elif not isinstance(self.target, (DatasetId, DatasetAlias)):
            raise TypeError(
                f"a DatasetRef is to a DatasetId or DatasetAlias, not {type(self.target).__name__}"
            )

    @classmethod
    def parse(cls, text: str) -> DatasetRef:
        try:
            return cls(DatasetId.parse(text))
        except InvalidText as error:
            id_problem = error.reason
        try:
            return cls(DatasetAlias.parse(text))
        except InvalidText as error:
            problem = id_problem if text.startswith("did:") else error.reason
        if has_url_scheme(text):
            problem = "a URL refers to a remote dataset"
        raise InvalidText(text, "dataset reference (did:odf:… or [account/]name)", problem)

    @property
    def id(self) -> DatasetId | None:
        return self.target if isinstance(self.target, DatasetId) else None

    @property
    def alias(self) -> DatasetAlias | None:
        return self.target if isinstance(self.target, DatasetAlias) else None

    @property
    def account_name(self) -> AccountName | None:
        return self.target.account_name if isinstance(self.target, DatasetAlias) else None

    @property
    def dataset_name(self) -> DatasetName | None:
        return self.target.dataset_name if isinstance(self.target, DatasetAlias) else None

    def as_any_ref(self) -> DatasetRefAny:
        return DatasetRefAny(self.target)

    def __str__(self) -> str:
        return str(self.target)


@dataclass(frozen=True, slots=True)
class DatasetRefRemote:
    """``(RepoName "/")? DatasetId / DatasetAliasRemote / Url``: a dataset in a repository."""

    target: DatasetId | DatasetIdRemote | DatasetAliasRemote | DatasetUrl

    def __post_init__(self) -> None:
        if not isinstance(
            self.target, (DatasetId, DatasetIdRemote, DatasetAliasRemote, DatasetUrl)
        ):
            raise TypeError(f"not a remote dataset reference target: {type(self.target).__name__}")

    @classmethod
    def parse(cls, text: str) -> DatasetRefRemote:
        what = "remote dataset reference ([repo/]did:odf:…, repo/[account/]name or URL)"
        remote_id = _remote_id(text, what)
        if remote_id is not None:
            return cls(remote_id)
        try:
            return cls(DatasetAliasRemote.parse(text))
        except InvalidText as error:
            problem = error.reason
        if has_url_scheme(text):
            return cls(_url(text, what))
        raise InvalidText(text, what, problem)

    @property
    def id(self) -> DatasetId | None:
        return _dataset_id_of(self.target)

    @property
    def repo_name(self) -> RepoName | None:
        match self.target:
            case DatasetIdRemote(repo_name=repo_name) | DatasetAliasRemote(repo_name=repo_name):
                return repo_name
        return None

    @property
    def alias(self) -> DatasetAliasRemote | None:
        return self.target if isinstance(self.target, DatasetAliasRemote) else None

    @property
    def account_name(self) -> AccountName | None:
        return self.target.account_name if isinstance(self.target, DatasetAliasRemote) else None

    @property
    def dataset_name(self) -> DatasetName | None:
        return self.target.dataset_name if isinstance(self.target, DatasetAliasRemote) else None

    @property
    def url(self) -> DatasetUrl | None:
        return self.target if isinstance(self.target, DatasetUrl) else None

    def as_any_ref(self) -> DatasetRefAny:
        return DatasetRefAny(self.target)

    def __str__(self) -> str:
        return str(self.target)


AnyTarget = (
    DatasetId
    | DatasetIdRemote
    | DatasetAlias
    | DatasetAliasRemote
    | DatasetAliasAmbiguous
    | DatasetUrl
)


@dataclass(frozen=True, slots=True)
class DatasetRefAny:
    """``DatasetRefRemote / DatasetRef``: any dataset, local or remote.

    Parsing classifies as the reference does: ``did:odf:…`` → ``DatasetId``; ``repo/did:odf:…`` →
    ``DatasetIdRemote``; ``name`` → ``DatasetAlias`` (local, no account); ``a/b`` →
    ``DatasetAliasAmbiguous``; ``repo/account/name`` → ``DatasetAliasRemote``; else a URL.
    """

    target: AnyTarget

    def __post_init__(self) -> None:
        target = self.target
        if isinstance(target, DatasetName):
            object.__setattr__(self, "target", DatasetAlias(None, target))
        elif not isinstance(
            target,
            (
                DatasetId,
                DatasetIdRemote,
                DatasetAlias,
                DatasetAliasRemote,
                DatasetAliasAmbiguous,
                DatasetUrl,
            ),
        ):
            raise TypeError(f"not a dataset reference target: {type(target).__name__}")

    @classmethod
    def parse(cls, text: str) -> DatasetRefAny:
        what = "dataset reference ([repo/]did:odf:…, [repo/][account/]name or URL)"
        remote_id = _remote_id(text, what)
        if remote_id is not None:
            return cls(remote_id)
        if is_hostname(text):
            return cls(DatasetAlias(None, DatasetName(text)))
        try:
            alias = DatasetAliasRemote.parse(text)
        except InvalidText as error:
            problem = error.reason if "/" in text else hostname_problem(text)
        else:
            if alias.account_name is None:
                return cls(
                    DatasetAliasAmbiguous(
                        AccountOrRepoName(str(alias.repo_name)), alias.dataset_name
                    )
                )
            return cls(alias)
        if has_url_scheme(text):
            return cls(_url(text, what))
        raise InvalidText(text, what, problem)

    @property
    def id(self) -> DatasetId | None:
        return _dataset_id_of(self.target)

    def disambiguate(self, is_repo: IsRepo) -> DatasetRef | DatasetRefRemote:
        """Decide local or remote; ``a/b`` is remote exactly when ``is_repo(RepoName(a))``."""
        match self.target:
            case DatasetId() | DatasetAlias():
                return DatasetRef(self.target)
            case DatasetAliasAmbiguous():
                if is_repo(self.target.prefix.as_repo_name()):
                    return DatasetRefRemote(self.target.as_remote_alias())
                return DatasetRef(self.target.as_local_alias())
            case _:
                return DatasetRefRemote(self.target)

    def as_local_ref(self, is_repo: IsRepo) -> DatasetRef:
        """This reference as a local one; ``ParseError`` if it names a remote dataset."""
        resolved = self.disambiguate(is_repo)
        if isinstance(resolved, DatasetRefRemote):
            raise InvalidText(str(self), "local dataset reference", "it refers to a remote dataset")
        return resolved

    def as_remote_ref(self, is_repo: IsRepo) -> DatasetRefRemote:
        """This reference as a remote one; ``ParseError`` if it names a local dataset."""
        resolved = self.disambiguate(is_repo)
        if isinstance(resolved, DatasetRef):
            raise InvalidText(str(self), "remote dataset reference", "it refers to a local dataset")
        return resolved

    def __str__(self) -> str:
        return str(self.target)
