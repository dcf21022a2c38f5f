"""RFC-018 resources: the generic ``$schema`` / ``headers`` / ``spec`` / ``status`` envelope, the
references between resources, and their YAML/JSON forms as the reference (kamu-cli) reads and
writes them. Import from here; the modules behind it are an implementation detail.

The envelope classes themselves live in ``protocol.model`` (``protocol/model/resource.py``, with
the names and DIDs in ``resource_names.py``), so the generated types that embed them
(``protocol.model.Dataset``, ``SecretSet``, …) and this package share one typed model.
"""

from protocol.codec.invalid import Invalid
from protocol.model import (
    AccountHandle,
    AccountId,
    AccountRef,
    AttributeInput,
    Did,
    RelationInput,
    RelationsSpecInput,
    Resource,
    ResourceAnnotations,
    ResourceConditions,
    ResourceHeaders,
    ResourceHeadersInput,
    ResourceInput,
    ResourceLabels,
    ResourceName,
    ResourceRef,
    ResourceStatus,
    TypeRef,
    TypeRefMap,
    parse_account_id,
    parse_did,
)
from protocol.resource.codec import (
    ResourceError,
    dump_resource,
    dump_resource_input,
    load_resource,
    load_resource_input,
    read_resource,
    read_resource_input,
    resource_schema,
    write_resource,
    write_resource_input,
)
from protocol.resource.relations import RELATIONS_SCHEMA, RELATIONS_SPEC
from protocol.resource.specs import (
    GENERIC_SPEC,
    SpecCodec,
    model_spec,
    read_secrets,
    read_variables,
    write_secrets,
    write_variables,
)
from protocol.resource.tree import json_value

__all__ = [
    "GENERIC_SPEC",
    "RELATIONS_SCHEMA",
    "RELATIONS_SPEC",
    "AccountHandle",
    "AccountId",
    "AccountRef",
    "AttributeInput",
    "Did",
    "Invalid",
    "RelationInput",
    "RelationsSpecInput",
    "Resource",
    "ResourceAnnotations",
    "ResourceConditions",
    "ResourceError",
    "ResourceHeaders",
    "ResourceHeadersInput",
    "ResourceInput",
    "ResourceLabels",
    "ResourceName",
    "ResourceRef",
    "ResourceStatus",
    "SpecCodec",
    "TypeRef",
    "TypeRefMap",
    "dump_resource",
    "dump_resource_input",
    "json_value",
    "load_resource",
    "load_resource_input",
    "model_spec",
    "parse_account_id",
    "parse_did",
    "read_resource",
    "read_resource_input",
    "read_secrets",
    "read_variables",
    "resource_schema",
    "write_resource",
    "write_resource_input",
    "write_secrets",
    "write_variables",
]
