"""Values a resource takes from ``SecretSet`` and ``VariableSet`` resources (a ``Source``'s
``config``, a ``PersistentVolume``'s ``credentials``): each key a reference to a key of one,
followed by the id it resolved to on apply.

Secrets are decrypted here, when they are needed, and only held in memory: the
:class:`ResolvedValues` carry which of the values are secret, so whatever reports on the work
can take them out of its messages. A reference that does not resolve, a missing key or a secret
this node cannot decrypt is a :class:`ValueRefError` naming the key and the target, never a
value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odfd.app.node_secrets import NodeSecrets, SecretError
from odfd.app.resource_types import SECRET_SET, short_name
from odfd.errors import OdfdError
from storage.catalog.resource_references import ResourceReferenceTable
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace


class ValueRefError(OdfdError):
    """A value that cannot be had; ``code`` names the condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ResolvedValues:
    values: dict[str, str] = field(default_factory=dict)
    secrets: frozenset[str] = frozenset()
    """The plain secret values among ``values`` (to redact from messages)."""


async def resolve_values(
    workspace: Workspace, resource_id: str, where: str, prefix: str, secrets: NodeSecrets
) -> ResolvedValues:
    """The values of the references at ``prefix`` (e.g. ``spec.config.``) of a resource, by
    key; errors start with ``where`` (e.g. ``Source feed``)."""
    rows = await ResourceReferenceTable(workspace.catalog).list(resource_id)
    table = ResourceTable(workspace.catalog)
    values: dict[str, str] = {}
    plain_secrets: set[str] = set()
    for row in rows:
        if not row.path.startswith(prefix):
            continue
        key = row.path[len(prefix) :]
        field = f"{where}: {row.path}"
        target = f"{short_name(row.target_schema)}:{row.target_name or row.target_id}"
        record = None if row.target_id is None else await table.get(row.target_id)
        if record is None:
            raise ValueRefError("unresolved-reference", f"{field}: {target} does not exist")
        is_secret = record.schema == SECRET_SET.schema
        found = (record.spec.get("secrets" if is_secret else "variables") or {}).get(row.target_key)
        if found is None:
            raise ValueRefError(
                "unresolved-reference", f"{field}: {target} has no key {row.target_key}"
            )
        if is_secret:
            try:
                plain = secrets.decrypt(_stored_value(found))
            except SecretError as err:
                raise ValueRefError(
                    "undecryptable", f"{field}: {target}#{row.target_key}: {err}"
                ) from None
            plain_secrets.add(plain)
        else:
            plain = str(_stored_value(found))
        values[key] = plain
    return ResolvedValues(values, frozenset(plain_secrets))


def _stored_value(value: Any) -> Any:
    return value.get("value") if isinstance(value, dict) else value
