"""How a resource's ``spec`` is read and written: generically (any JSON value) or as a type.

A :class:`SpecCodec` pairs a reader of the plain tree (raising ``Invalid(field, reason)``, whose
path the envelope completes, e.g. ``spec.source``) with a writer back to it; ``json_value`` turns
a tree into plain JSON (YAML's unquoted scalars resolved as serde_yaml does). ``GENERIC_SPEC`` keeps the spec as JSON; ``model_spec("…")`` uses the
generated codec of any ``protocol.model`` type (``DatasetSpecInput``, ``SecretSetSpecInput``, …).
The ``Secrets`` / ``Variables`` helpers let other typed specs embed those maps with their short
forms (``tls: <cert>`` reads as ``tls: {value: <cert>}``, which is how it is written back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from protocol.codec._tree_generated import READERS, WRITERS
from protocol.model import JsonValue, Secrets, Variables
from protocol.resource.tree import json_value, write_json

S = TypeVar("S")


@dataclass(frozen=True)  # no slots: they break `SpecCodec[T](...)`
class SpecCodec(Generic[S]):
    read: Callable[[Any], S]
    write: Callable[[S], Any]


GENERIC_SPEC: SpecCodec[JsonValue] = SpecCodec(json_value, write_json)
"""The spec as a JSON value; written with object keys sorted, as the reference's ``serde_json``."""


def model_spec(type_name: str) -> SpecCodec[Any]:
    """The spec as the ``protocol.model`` type of that name, through its generated codec."""
    if type_name not in READERS:
        raise KeyError(f"{type_name} is not a protocol.model type")
    reader = READERS[type_name]
    writer = next(w for cls, w in WRITERS.items() if cls.__name__ == type_name)
    return SpecCodec(reader, writer)


_SECRETS = model_spec("Secrets")
_VARIABLES = model_spec("Variables")


def read_secrets(value: Any) -> Secrets:
    """A ``Secrets`` map; each entry ``{value, contentEncoding?}`` or the short form, a string."""
    secrets: Secrets = _SECRETS.read(value)
    return secrets


def write_secrets(value: Secrets) -> dict[str, Any]:
    tree: dict[str, Any] = _SECRETS.write(value)
    return tree


def read_variables(value: Any) -> Variables:
    """A ``Variables`` map; each entry ``{value}`` or the short form, a string."""
    variables: Variables = _VARIABLES.read(value)
    return variables


def write_variables(value: Variables) -> dict[str, Any]:
    tree: dict[str, Any] = _VARIABLES.write(value)
    return tree
