"""RFC-018 resources to and from YAML/JSON, byte-identical to the reference's serde_yaml output.

Reading is strict like the reference (unknown fields are errors, every name and DID is parsed)
and accepts its short forms (``account: sergiimk``, ``object: Dataset:bob/bobs-dataset``, a
secret or variable given as a bare string). Writing always uses the long forms, in the field
order of the reference's structs; labels, annotations and conditions in ``TypeRef`` order.
Errors are :class:`ResourceError` reading ``<source>: <field path>: <reason>``.
"""

from __future__ import annotations

from typing import Any

from protocol.codec.invalid import Invalid
from protocol.codec.yaml import parse_documents
from protocol.codec.yaml_emitter import dump
from protocol.errors import DecodeError
from protocol.model import ResourcePhase
from protocol.model.resource import (
    Resource,
    ResourceAnnotations,
    ResourceConditions,
    ResourceHeaders,
    ResourceHeadersInput,
    ResourceInput,
    ResourceLabels,
    ResourceStatus,
)
from protocol.resource.specs import GENERIC_SPEC, SpecCodec
from protocol.resource.tree import (
    account_handle,
    account_ref,
    field,
    optional,
    resource_name,
    struct,
    text,
    timestamp,
    type_ref_map,
    uint64,
    write_account_handle,
    write_account_ref,
    write_type_ref_map,
)

_PHASES = {
    spelling: phase for phase in ResourcePhase for spelling in (phase.value, phase.value.lower())
}


class ResourceError(DecodeError):
    """A resource document is malformed; the message names the source and the field path."""


def _fail(where: str, error: Invalid) -> ResourceError:
    return ResourceError(": ".join(p for p in (where, error.field_path(), error.reason) if p))


def resource_schema(tree: Any, where: str = "") -> str:
    """The ``$schema`` of a resource document, to choose how to read its ``spec``."""
    try:
        if not isinstance(tree, dict):
            raise Invalid("", "expected a resource (a map with $schema, headers and spec)")
        return field(tree, "$schema", text)
    except Invalid as error:
        raise _fail(where, error) from None


def read_resource_input(
    tree: Any, spec: SpecCodec[Any] = GENERIC_SPEC, where: str = ""
) -> ResourceInput[Any]:
    try:
        document = struct(tree, "ResourceInput", ("$schema", "headers", "spec"))
        return ResourceInput(
            schema=field(document, "$schema", text),
            headers=field(document, "headers", _headers_input),
            spec=field(document, "spec", spec.read),
        )
    except Invalid as error:
        raise _fail(where, error) from None


def read_resource(tree: Any, spec: SpecCodec[Any] = GENERIC_SPEC, where: str = "") -> Resource[Any]:
    try:
        document = struct(tree, "Resource", ("$schema", "headers", "spec", "status"))
        return Resource(
            schema=field(document, "$schema", text),
            headers=field(document, "headers", _headers),
            spec=field(document, "spec", spec.read),
            status=field(document, "status", _status),
        )
    except Invalid as error:
        raise _fail(where, error) from None


def write_resource_input(
    resource: ResourceInput[Any], spec: SpecCodec[Any] = GENERIC_SPEC
) -> dict[str, Any]:
    headers = resource.headers
    out: dict[str, Any] = {}
    if headers.id is not None:
        out["id"] = headers.id
    out["name"] = str(headers.name)
    if headers.account is not None:
        out["account"] = write_account_ref(headers.account)
    if headers.labels is not None:
        out["labels"] = write_type_ref_map(headers.labels)
    if headers.annotations is not None:
        out["annotations"] = write_type_ref_map(headers.annotations)
    return {"$schema": resource.schema, "headers": out, "spec": spec.write(resource.spec)}


def write_resource(resource: Resource[Any], spec: SpecCodec[Any] = GENERIC_SPEC) -> dict[str, Any]:
    headers, status = resource.headers, resource.status
    out: dict[str, Any] = {
        "id": headers.id,
        "name": str(headers.name),
        "account": write_account_handle(headers.account),
        "labels": write_type_ref_map(headers.labels),
        "annotations": write_type_ref_map(headers.annotations),
        "generation": headers.generation,
        "createdAt": headers.created_at.to_rfc3339(),
        "updatedAt": headers.updated_at.to_rfc3339(),
    }
    if headers.deleted_at is not None:
        out["deletedAt"] = headers.deleted_at.to_rfc3339()
    status_out: dict[str, Any] = {"phase": status.phase.value}
    if status.observed_generation is not None:
        status_out["observedGeneration"] = status.observed_generation
    if status.reconciled_at is not None:
        status_out["reconciledAt"] = status.reconciled_at.to_rfc3339()
    status_out["conditions"] = write_type_ref_map(status.conditions)
    return {
        "$schema": resource.schema,
        "headers": out,
        "spec": spec.write(resource.spec),
        "status": status_out,
    }


def load_resource_input(
    data: str | bytes, spec: SpecCodec[Any] = GENERIC_SPEC, source: str = ""
) -> ResourceInput[Any]:
    """One YAML (or JSON) document in the input form."""
    return read_resource_input(_single(data, source), spec, source)


def load_resource(
    data: str | bytes, spec: SpecCodec[Any] = GENERIC_SPEC, source: str = ""
) -> Resource[Any]:
    """One YAML (or JSON) document in the canonical form."""
    return read_resource(_single(data, source), spec, source)


def dump_resource_input(resource: ResourceInput[Any], spec: SpecCodec[Any] = GENERIC_SPEC) -> str:
    return dump(write_resource_input(resource, spec))


def dump_resource(resource: Resource[Any], spec: SpecCodec[Any] = GENERIC_SPEC) -> str:
    return dump(write_resource(resource, spec))


def _single(data: str | bytes, source: str) -> Any:
    documents = parse_documents(data, source)
    if len(documents) != 1:
        raise ResourceError(
            f"{source or 'input'}: expected one resource document, found {len(documents)}"
        )
    return documents[0]


def _headers_input(value: Any) -> ResourceHeadersInput:
    tree = struct(value, "ResourceHeadersInput", ("id", "name", "account", "labels", "annotations"))
    return ResourceHeadersInput(
        id=optional(tree, "id", text),
        name=field(tree, "name", resource_name),
        account=optional(tree, "account", account_ref),
        labels=optional(tree, "labels", type_ref_map(ResourceLabels)),
        annotations=optional(tree, "annotations", type_ref_map(ResourceAnnotations)),
    )


def _headers(value: Any) -> ResourceHeaders:
    tree = struct(
        value,
        "ResourceHeaders",
        (
            "id",
            "name",
            "account",
            "labels",
            "annotations",
            "generation",
            "createdAt",
            "updatedAt",
            "deletedAt",
        ),
    )
    return ResourceHeaders(
        id=field(tree, "id", text),
        name=field(tree, "name", resource_name),
        account=field(tree, "account", account_handle),
        labels=field(tree, "labels", type_ref_map(ResourceLabels)),
        annotations=field(tree, "annotations", type_ref_map(ResourceAnnotations)),
        generation=field(tree, "generation", uint64),
        created_at=field(tree, "createdAt", timestamp),
        updated_at=field(tree, "updatedAt", timestamp),
        deleted_at=optional(tree, "deletedAt", timestamp),
    )


def _status(value: Any) -> ResourceStatus:
    tree = struct(
        value, "ResourceStatus", ("phase", "observedGeneration", "reconciledAt", "conditions")
    )
    return ResourceStatus(
        phase=field(tree, "phase", _phase),
        observed_generation=optional(tree, "observedGeneration", uint64),
        reconciled_at=optional(tree, "reconciledAt", timestamp),
        conditions=field(tree, "conditions", type_ref_map(ResourceConditions)),
    )


def _phase(value: Any) -> ResourcePhase:
    phase = _PHASES.get(text(value))
    if phase is None:
        raise Invalid(
            "",
            f"unknown ResourcePhase {value!r}, expected one of "
            + ", ".join(f"`{p.value}`" for p in ResourcePhase),
        )
    return phase
