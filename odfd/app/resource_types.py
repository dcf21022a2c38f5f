"""The resource types this node knows (RFC-018 "Type Identification"): each by its ``$schema`` URL
and its short type name (``SecretSet``), which manifests, ``odfd get``/``delete`` and references
(``SecretSet:my-secrets``) may use instead of the URL.

A type is *controlled* when this node has a controller that makes its spec happen; the others are
accepted, validated and stored (so a set of manifests applies whole and keeps its references), and
their status says plainly that nothing acts on them yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odfd.errors import ManifestError

SPEC_BASE = "https://opendatafabric.org/schemas/"


@dataclass(frozen=True, slots=True)
class ResourceType:
    name: str
    """The short type name, e.g. ``SecretSet``."""
    schema: str
    """The ``$schema`` URL that identifies the type."""
    controlled: bool
    """Whether a controller of this node reconciles resources of this type."""

    @property
    def spec_schema(self) -> str | None:
        """The JSON Schema of the spec's input form (None for odfd's own types)."""
        return self.schema + "SpecInput" if self.schema.startswith(SPEC_BASE) else None


def _spec(path: str, controlled: bool) -> ResourceType:
    return ResourceType(path.rsplit("/", 1)[-1], SPEC_BASE + path, controlled)


DATASET = _spec("dataset/v1alpha1/Dataset", True)
MIRROR = ResourceType("Mirror", "https://odfd.dev/schemas/mirror/v1alpha1/Mirror", True)
SECRET_SET = _spec("config/v1alpha1/SecretSet", True)
VARIABLE_SET = _spec("config/v1alpha1/VariableSet", True)
SOURCE = _spec("source/v1alpha1/Source", True)
FLOW = _spec("flow/v1alpha1/Flow", True)
WEBHOOK_TARGET = _spec("sink/v1alpha1/WebhookTarget", True)
PERSISTENT_VOLUME = _spec("storage/v1alpha1/PersistentVolume", True)
PROJECTION = _spec("dataset/v1alpha1/Projection", True)
ACCOUNT = _spec("auth/v1alpha1/Account", True)
RELATIONS = _spec("auth/v1alpha1/Relations", True)
RESOURCE = _spec("resource/v1alpha1/Resource", True)
"""The generic container: a resource whose ``$schema`` names no type (e.g. another node's
resource as it shows it). Stored as given; its status says why nothing acts on it."""

TYPES: tuple[ResourceType, ...] = (
    DATASET,
    MIRROR,
    SECRET_SET,
    VARIABLE_SET,
    SOURCE,
    FLOW,
    WEBHOOK_TARGET,
    PERSISTENT_VOLUME,
    PROJECTION,
    ACCOUNT,
    RELATIONS,
    RESOURCE,
)
_BY_SCHEMA = {t.schema: t for t in TYPES}
_BY_NAME = {t.name.lower(): t for t in TYPES}


def type_of(text: str) -> ResourceType:
    """A type by its ``$schema`` URL or short name (case-insensitive, a plural ``s`` allowed as
    on the command line: ``odfd get secretsets``)."""
    found = _BY_SCHEMA.get(text)
    if found is None and "://" not in text:
        lower = text.lower()
        found = _BY_NAME.get(lower) or _BY_NAME.get(lower.removesuffix("s"))
    if found is None:
        raise ManifestError(
            f"{text!r} is not a resource type odfd knows; known: "
            + ", ".join(t.name for t in TYPES)
            + " (or their $schema URLs)"
        )
    return found


def short_name(schema: str) -> str:
    """The short type name of a known ``$schema`` (the URL itself when unknown)."""
    found = _BY_SCHEMA.get(schema)
    return schema if found is None else found.name


def resource_ref(value: Any) -> tuple[str, str]:
    """A ``ResourceRef`` (``Type:[account/]name`` or ``{type, name, account?}``) as (type name,
    lowercased ``[account/]name``), as the authorization policy and the resources that follow a
    dataset read it; :class:`ManifestError` when it is neither or names no known type."""
    if isinstance(value, str):
        type_text, colon, name = value.partition(":")
        if not colon:
            raise ManifestError(f"{value!r} needs a type, e.g. Dataset:{value}")
        return type_of(type_text).name, name.lower()
    if isinstance(value, dict) and "type" in value and "name" in value:
        account = value.get("account")
        account_name = account.get("name") if isinstance(account, dict) else account
        name = str(value["name"])
        full = name if account_name is None else f"{account_name}/{name}"
        return type_of(str(value["type"])).name, full.lower()
    raise ManifestError("a reference is `Type:[account/]name` or {type, name}")
