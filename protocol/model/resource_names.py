"""Names, type references and DIDs that RFC-018 resources use to point at each other.

Grammar and comparison follow the reference (kamu-cli ``resource_types.rs``, ``grammar.rs``):

```
ResourceName = Hostname                      (case-insensitive, printed as written)
TypeName     = Subdomain                     e.g. ``SecretSet``
TypeUri      = "https:" ...                  any text starting with ``https:``, not validated
TypeRef      = TypeUri / TypeName
```

The schemas name these by string format (``resource-name``, ``type-ref``, ``account-id``, ``did``),
which ``scripts/gen_model.py`` maps to the types here. Resource ids (``resource-id``) are opaque
text in the reference (a UUID in practice), so they stay ``str``. Account DIDs are ``did:odf`` (the
reference also knows ``did:pkh`` wallets, which odfd does not support); other resources' DIDs may
also be ``did:key``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import ClassVar, Self, TypeAlias

from protocol.errors import ParseError
from protocol.identity import DatasetId, DidKey
from protocol.identity.names import _Name

_SUBDOMAIN = re.compile(r"[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*")
_TYPE_URI_PREFIX = "https:"

AccountId: TypeAlias = DatasetId
"""An account's ``did:odf`` (the same key-based identifier as a dataset's)."""

Did: TypeAlias = DatasetId | DidKey
"""The DID of any resource: ``did:odf`` or ``did:key``."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ResourceName(_Name):
    """The name of a resource within its owning account (Hostname grammar, case-insensitive)."""

    KIND: ClassVar[str] = "ResourceName"


@total_ordering
@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TypeRef:
    """A resource type: a full schema URI (``https://…/SecretSet``) or a short name (``SecretSet``).

    Short names compare case-insensitively; URIs exactly. Ordered as the reference's ``BTreeMap``
    keys (every URI before every short name), which fixes the order of labels and conditions.
    """

    text: str
    _key: tuple[int, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"a TypeRef is text, got {type(self.text).__name__}")
        if self.text.startswith(_TYPE_URI_PREFIX):
            key = (0, self.text)
        elif _SUBDOMAIN.fullmatch(self.text):
            key = (1, self.text.lower())
        else:
            raise ParseError(
                f"{self.text!r} is not a valid type reference: expected a type name (letters, digits "
                f"and inner '-') or a schema URI starting with {_TYPE_URI_PREFIX!r}"
            )
        object.__setattr__(self, "_key", key)

    @classmethod
    def parse(cls, text: str) -> Self:
        return cls(text)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"TypeRef({self.text!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(("TypeRef", self._key))

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key < other._key


def parse_account_id(text: str) -> AccountId:
    """An account DID: ``did:odf:<multibase>``."""
    if text.startswith("did:pkh:"):
        raise ParseError(
            f"{text!r}: did:pkh (wallet) accounts are not supported; use a did:odf account"
        )
    return DatasetId.parse(text)


def parse_did(text: str) -> Did:
    """A resource DID: ``did:odf:…`` or ``did:key:…``."""
    if text.startswith("did:key:"):
        return DidKey.parse(text)
    if text.startswith("did:odf:"):
        return DatasetId.parse(text)
    raise ParseError(f"{text!r} is not a supported DID: expected did:odf:… or did:key:…")
