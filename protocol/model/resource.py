"""The RFC-018 resource envelope as frozen dataclasses, generic in the type of ``spec``.

Two forms, as in the spec's ``ResourceInput`` / ``Resource`` schemas: what a user writes (only
``headers.name`` required; account as a reference) and what a node stores and shows (identity,
owning account handle, generations, times and ``status``). ``Resource.to_input()`` maps the second
to the first exactly as the reference does (status and system-populated headers dropped).

These are the model's only classes for these schemas: ``scripts/gen_model.py`` takes them from here
(checking their fields against the schemas) instead of generating them, so generated types that
embed them (``Dataset.headers``, ``DatasetSpec.volume.account``) hold the same typed values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from protocol.errors import ParseError
from protocol.identity import AccountName
from protocol.model._enums_generated import ResourcePhase
from protocol.model.maps import FrozenMap, JsonValue
from protocol.model.resource_names import AccountId, Did, ResourceName, TypeRef
from protocol.model.timestamp import Timestamp

S = TypeVar("S")


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountRef:
    """Points at an account by any of its id, DID or name; short form: the bare name."""

    id: str | None = None
    did: AccountId | None = None
    name: AccountName | None = None

    @classmethod
    def parse(cls, text: str) -> AccountRef:
        """The short form ``sergiimk`` (an account name)."""
        return cls(name=AccountName(text))


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountHandle:
    """A resolved account: all three identities are known."""

    id: str
    did: AccountId
    name: AccountName

    def as_ref(self) -> AccountRef:
        return AccountRef(id=self.id, did=self.did, name=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceRef:
    """Points at another resource; short form ``Type:name`` or ``Type:account/name``."""

    type: TypeRef
    account: AccountRef | None = None
    id: str | None = None
    did: Did | None = None
    name: ResourceName | None = None

    @classmethod
    def parse(cls, text: str) -> ResourceRef:
        """``TypeName ":" (AccountName "/")? ResourceName``, e.g. ``Dataset:bob/bobs-dataset``.

        Like the reference: the text splits at the first ``:`` (so the type is always a short
        name, never a URI) and then at the first ``/``; every part must match its grammar whole.
        """
        type_text, colon, rest = text.partition(":")
        if not colon:
            raise ParseError(
                f"{text!r} is not a resource reference: expected Type:name or Type:account/name"
            )
        try:
            type_ref = TypeRef(type_text)
            account_text, slash, name_text = rest.partition("/")
            account = AccountRef(name=AccountName(account_text)) if slash else None
            name = ResourceName(name_text if slash else rest)
        except ParseError as error:
            raise ParseError(
                f"{text!r} is not a resource reference (Type:[account/]name): {error}"
            ) from None
        return cls(type=type_ref, account=account, name=name)


class TypeRefMap(FrozenMap[JsonValue]):
    """Labels, annotations or conditions: JSON values keyed by type references.

    Keys are validated as :class:`TypeRef` and kept in the reference's order (schema URIs first,
    then short names case-insensitively), which is the order they are written in. Two keys that
    are the same type reference (``Team`` / ``team``) are an error rather than a silent merge.
    """

    __slots__ = ()

    def __init__(self, entries: Mapping[str, JsonValue] | None = None, /) -> None:
        keyed: dict[TypeRef, tuple[str, JsonValue]] = {}
        for key, value in (entries or {}).items():
            ref = TypeRef(key)
            if ref in keyed:
                raise ParseError(f"keys {keyed[ref][0]!r} and {key!r} name the same type reference")
            keyed[ref] = (key, value)
        self._entries = {key: value for _, (key, value) in sorted(keyed.items())}
        self._hash = None


class ResourceLabels(TypeRefMap):
    """Indexed key/values to organise and select resources."""

    __slots__ = ()


class ResourceAnnotations(TypeRefMap):
    """Unindexed key/values for tools."""

    __slots__ = ()


class ResourceConditions(TypeRefMap):
    """Conditions that controllers report, keyed by the URL of the condition's schema."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceHeadersInput:
    name: ResourceName
    id: str | None = None
    account: AccountRef | None = None
    labels: ResourceLabels | None = None
    annotations: ResourceAnnotations | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceHeaders:
    id: str
    name: ResourceName
    account: AccountHandle
    labels: ResourceLabels
    annotations: ResourceAnnotations
    generation: int
    created_at: Timestamp
    updated_at: Timestamp
    deleted_at: Timestamp | None = None

    def to_input(self) -> ResourceHeadersInput:
        return ResourceHeadersInput(
            id=self.id,
            name=self.name,
            account=self.account.as_ref(),
            labels=self.labels,
            annotations=self.annotations,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceStatus:
    phase: ResourcePhase
    conditions: ResourceConditions
    observed_generation: int | None = None
    reconciled_at: Timestamp | None = None


@dataclass(frozen=True, kw_only=True)  # no slots: they break `ResourceInput[T](...)`
class ResourceInput(Generic[S]):
    """A resource as a user writes it (``$schema``, ``headers``, ``spec``)."""

    schema: str
    headers: ResourceHeadersInput
    spec: S


@dataclass(frozen=True, kw_only=True)  # no slots: they break `Resource[T](...)`
class Resource(Generic[S]):
    """A resource as a node keeps it: with identity, ownership, generations and ``status``."""

    schema: str
    headers: ResourceHeaders
    spec: S
    status: ResourceStatus

    def to_input(self, spec: Callable[[S], Any] | None = None) -> ResourceInput[Any]:
        """The input form; ``spec`` maps a canonical spec to its input type when they differ."""
        return ResourceInput(
            schema=self.schema,
            headers=self.headers.to_input(),
            spec=self.spec if spec is None else spec(self.spec),
        )
