"""The values a ``Source`` brings into its ``config``: each key a reference to a key of a
``SecretSet`` or a ``VariableSet``, followed by the id it resolved to on apply.

Secrets are decrypted here, when a run needs them, and only held in memory for that run: the
:class:`SourceValues` carry which of the values are secret, so whatever reports on the run can
take them out of its messages. A reference that does not resolve, a missing key or a secret this
node cannot decrypt is a :class:`SourceSpecError` naming the config key and the target, never a
value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odfd.app.node_secrets import NodeSecrets, SecretError
from odfd.app.resource_types import SECRET_SET, short_name
from odfd.sources.spec import SourceSpecError
from storage.catalog.resource_references import ResourceReferenceTable
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace

_CONFIG_PATH = "spec.config."


@dataclass(frozen=True, slots=True)
class SourceValues:
    values: dict[str, str] = field(default_factory=dict)
    secrets: frozenset[str] = frozenset()
    """The plain secret values among ``values`` (to redact from messages)."""


async def source_values(
    workspace: Workspace, source_id: str, source_name: str, secrets: NodeSecrets
) -> SourceValues:
    rows = await ResourceReferenceTable(workspace.catalog).list(source_id)
    table = ResourceTable(workspace.catalog)
    values: dict[str, str] = {}
    plain_secrets: set[str] = set()
    for row in rows:
        if not row.path.startswith(_CONFIG_PATH):
            continue
        key = row.path[len(_CONFIG_PATH) :]
        target = f"{short_name(row.target_schema)}:{row.target_name or row.target_id}"
        record = None if row.target_id is None else await table.get(row.target_id)
        if record is None:
            raise SourceSpecError(
                "unresolved-reference",
                f"Source {source_name}: spec.config.{key}: {target} does not exist",
            )
        is_secret = record.schema == SECRET_SET.schema
        found = (record.spec.get("secrets" if is_secret else "variables") or {}).get(row.target_key)
        if found is None:
            raise SourceSpecError(
                "unresolved-reference",
                f"Source {source_name}: spec.config.{key}: {target} has no key {row.target_key}",
            )
        if is_secret:
            try:
                plain = secrets.decrypt(_stored_value(found))
            except SecretError as err:
                raise SourceSpecError(
                    "undecryptable",
                    f"Source {source_name}: spec.config.{key}: {target}#{row.target_key}: {err}",
                ) from None
            plain_secrets.add(plain)
        else:
            plain = str(_stored_value(found))
        values[key] = plain
    return SourceValues(values, frozenset(plain_secrets))


def _stored_value(value: Any) -> Any:
    return value.get("value") if isinstance(value, dict) else value
