"""The ODF metadata model: frozen dataclasses generated from the spec's schemas, plus helpers.

The RFC-018 resource envelope (``ResourceInput``, ``Resource``, headers, references, names) is
written by hand in ``resource.py`` / ``resource_names.py`` and used by the generated types that
embed it; ``protocol.resource`` reads and writes it.

Union variants are joined names (``FetchStep::Url`` -> ``FetchStepUrl``); each union is a type
alias of its variants (``MetadataEvent``). Sequences are tuples, maps are read-only ``FrozenMap``s.
"""

from __future__ import annotations

from protocol.model._generated import *  # noqa: F403 (the generated model, re-exported whole)
from protocol.model._generated import KIND_NAMES, UNION_VARIANTS
from protocol.model._generated import MetadataEvent as MetadataEvent
from protocol.model.maps import FrozenMap as FrozenMap
from protocol.model.maps import JsonValue as JsonValue
from protocol.model.resource import TypeRefMap as TypeRefMap
from protocol.model.resource_names import AccountId as AccountId
from protocol.model.resource_names import Did as Did
from protocol.model.resource_names import ResourceName as ResourceName
from protocol.model.resource_names import TypeRef as TypeRef
from protocol.model.resource_names import parse_account_id as parse_account_id
from protocol.model.resource_names import parse_did as parse_did
from protocol.model.timestamp import Timestamp as Timestamp

METADATA_EVENT_TYPES: tuple[type, ...] = UNION_VARIANTS["MetadataEvent"]
"""Every ``MetadataEvent`` variant, in the spec's order (the FlatBuffers union order)."""


def kind_name(value: object) -> str:
    """The ``kind`` tag of a union variant (``AddData``, ``Url`` for ``FetchStepUrl``, ...)."""
    try:
        return KIND_NAMES[type(value)]
    except KeyError:
        raise TypeError(f"{type(value).__name__} is not a union variant") from None


__all__ = [name for name in dir() if not name.startswith("_") and name not in ("annotations",)] + [
    "FrozenMap",
    "JsonValue",
    "MetadataEvent",
    "Timestamp",
]
