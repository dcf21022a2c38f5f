"""References between resources (RFC-018 "References", "Reference resolution").

Each type says where its spec points at other resources: a ``Source``'s ``config`` values and a
``PersistentVolume``'s ``credentials`` (``SecretSet:name#key`` / ``VariableSet:name#key`` or the
struct form ``{type, name, account?, id?, path?}``), a ``Dataset``'s ``volume``, a ``Flow``'s
``Ingest`` source and ``WebhookCall`` target (a bare name, ``Type:name``, or a struct). On apply
every reference is resolved to the target's id when it exists; a dangling one is kept and resolved
when its target is created, and from then on it follows the id, not the name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from odfd.app.resource_types import (
    DATASET,
    FLOW,
    PERSISTENT_VOLUME,
    SECRET_SET,
    SOURCE,
    VARIABLE_SET,
    WEBHOOK_TARGET,
    ResourceType,
    type_of,
)
from odfd.errors import ManifestError
from protocol.errors import ParseError
from protocol.identity import AccountName
from protocol.model.resource_names import ResourceName


@dataclass(frozen=True, slots=True)
class Reference:
    path: str
    """Where in the resource, e.g. ``spec.config.apiKey``."""
    schema: str
    """The target's type."""
    name: str | None
    """The target as ``[account/]name`` (None: given by id only)."""
    id: str | None = None
    """The target's id when the reference names it."""
    key: str | None = None
    """The value within a ``SecretSet`` / ``VariableSet`` (``#key``, the struct's ``path``)."""


_VALUE_SETS = (SECRET_SET, VARIABLE_SET)


def references_of(schema: str, spec: Any, where: str = "") -> list[Reference]:
    """The references a stored spec makes; a malformed one is a :class:`ManifestError`."""
    try:
        return list(_references(schema, spec))
    except ManifestError as err:
        raise ManifestError(f"{where}: {err}" if where else str(err)) from None


def _references(schema: str, spec: Any) -> Iterator[Reference]:
    if not isinstance(spec, dict):
        return
    if schema == SOURCE.schema:
        for key, value in (spec.get("config") or {}).items():
            yield _value_ref(f"spec.config.{key}", value)
    elif schema == PERSISTENT_VOLUME.schema:
        for key, value in (spec.get("credentials") or {}).items():
            yield _value_ref(f"spec.credentials.{key}", value)
    elif schema == DATASET.schema and spec.get("volume") is not None:
        yield _typed_ref("spec.volume", spec["volume"], PERSISTENT_VOLUME)
    elif schema == FLOW.schema:
        for index, task in enumerate(spec.get("tasks") or []):
            if task.get("kind") == "Ingest" and "source" in task:
                yield _typed_ref(f"spec.tasks[{index}].source", task["source"], SOURCE)
            elif task.get("kind") == "WebhookCall" and "target" in task:
                yield _typed_ref(f"spec.tasks[{index}].target", task["target"], WEBHOOK_TARGET)


def _value_ref(path: str, value: Any) -> Reference:
    if isinstance(value, str):
        text, hash_, key = value.partition("#")
        type_text, colon, name = text.partition(":")
        if not colon or not hash_ or not key:
            raise ManifestError(
                f"{path}: {value!r} is not a value reference: expected SecretSet:name#key or "
                "VariableSet:name#key"
            )
        target = _value_set(path, type_text)
        return Reference(path, target.schema, _name(path, name), key=key)
    target = _value_set(path, value["type"])
    key = value.get("path")
    if not key:
        raise ManifestError(f"{path}.path: name the key within the {target.name}")
    return Reference(path, target.schema, _struct_name(path, value), value.get("id"), key)


def _value_set(path: str, text: str) -> ResourceType:
    target = type_of(text)
    if target not in _VALUE_SETS:
        raise ManifestError(f"{path}: a value comes from a SecretSet or a VariableSet, not {text}")
    return target


def _typed_ref(path: str, value: Any, expected: ResourceType) -> Reference:
    """A reference to one type: a bare name, ``Type:[account/]name``, or a struct."""
    if isinstance(value, str):
        type_text, colon, name = value.rpartition(":")
        if colon and type_of(type_text) is not expected:
            raise ManifestError(f"{path}: expected a reference to a {expected.name}, not {value!r}")
        return Reference(path, expected.schema, _name(path, name))
    if "type" in value and type_of(value["type"]) is not expected:
        raise ManifestError(f"{path}.type: expected {expected.name}, not {value['type']}")
    return Reference(path, expected.schema, _struct_name(path, value), value.get("id"))


def _struct_name(path: str, value: dict[str, Any]) -> str | None:
    name = value.get("name")
    if name is None:
        if value.get("id") is None:
            raise ManifestError(f"{path}: a reference needs a name or an id")
        return None
    account = value.get("account")
    account_name = account if isinstance(account, str) or account is None else account.get("name")
    return _name(path, name if account_name is None else f"{account_name}/{name}")


def _name(path: str, text: str) -> str:
    """``[account/]name`` checked against the grammars."""
    account, slash, name = text.rpartition("/")
    try:
        ResourceName(name)
        if slash:
            AccountName(account)
    except ParseError as err:
        raise ManifestError(f"{path}: {err}") from None
    return text
