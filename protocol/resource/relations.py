"""The spec of ODF's ``Relations`` resource (``auth/v1alpha1``): relations and attributes that
auth policies act on, each pointing at resources by ``ResourceRef`` (short forms allowed).

The classes are the generated ``protocol.model`` ones; this reader keeps the reference's field
order in its error messages and the writer its output order."""

from __future__ import annotations

from typing import Any

from protocol.codec.invalid import Invalid
from protocol.model import AttributeInput, RelationInput, RelationsSpecInput
from protocol.resource.specs import SpecCodec
from protocol.resource.tree import (
    field,
    json_value,
    optional,
    resource_ref,
    sequence,
    struct,
    text,
    write_json,
    write_resource_ref,
)

RELATIONS_SCHEMA = "https://opendatafabric.org/schemas/auth/v1alpha1/Relations"


def _relation(value: Any) -> RelationInput:
    tree = struct(value, "RelationInput", ("subject", "relation", "value", "object"))
    return RelationInput(
        subject=field(tree, "subject", resource_ref),
        relation=field(tree, "relation", text),
        value=json_value(tree["value"]) if "value" in tree else None,
        object=field(tree, "object", resource_ref),
    )


def _attribute(value: Any) -> AttributeInput:
    tree = struct(value, "AttributeInput", ("object", "name", "value"))
    if "value" not in tree:
        raise Invalid("value", "missing field `value`")
    return AttributeInput(
        object=field(tree, "object", resource_ref),
        name=field(tree, "name", text),
        value=json_value(tree["value"]),
    )


def _read(value: Any) -> RelationsSpecInput:
    tree = struct(value, "RelationsSpecInput", ("relations", "attributes"))
    return RelationsSpecInput(
        relations=optional(tree, "relations", sequence(_relation)),
        attributes=optional(tree, "attributes", sequence(_attribute)),
    )


def _write(spec: RelationsSpecInput) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.relations is not None:
        out["relations"] = [_write_relation(r) for r in spec.relations]
    if spec.attributes is not None:
        out["attributes"] = [
            {"object": write_resource_ref(a.object), "name": a.name, "value": write_json(a.value)}
            for a in spec.attributes
        ]
    return out


def _write_relation(relation: RelationInput) -> dict[str, Any]:
    out: dict[str, Any] = {
        "subject": write_resource_ref(relation.subject),
        "relation": relation.relation,
    }
    if relation.value is not None:
        out["value"] = write_json(relation.value)
    out["object"] = write_resource_ref(relation.object)
    return out


RELATIONS_SPEC: SpecCodec[RelationsSpecInput] = SpecCodec(_read, _write)
