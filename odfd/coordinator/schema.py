"""When a transaction must declare its slice's schema with a ``SetDataSchema`` block.

Ingest follows the reference (its data writer's ``validate_schema_compatible``): the first slice
of a dataset declares the schema; every later slice must have exactly the dataset's columns, in
the same order, with the same types (32/64-bit and view layouts of strings, binaries and lists
count as the same type) and without making optional a column the schema requires. An ingest
never rewrites an existing schema; columns are added by committing a new ``SetDataSchema`` first.

A transform's result may also add columns at the end, which commits a new ``SetDataSchema``
(:func:`schema_event`).
"""

from __future__ import annotations

import pyarrow as pa

from odfd.errors import OdfdError
from protocol.model import SetDataSchema
from verifier.engine.inputs import arrow_schema_of


class IncompatibleSchemaError(OdfdError):
    """A new slice's columns differ from the dataset's declared schema (``IncompatibleSchema``)."""


def ingest_schema_event(
    current: SetDataSchema | None, slice_schema: pa.Schema, dataset: str
) -> SetDataSchema | None:
    """The ``SetDataSchema`` an ingest commits before a slice (only a dataset's first one)."""
    if current is None:
        return _declared(slice_schema)
    problems = incompatibilities(arrow_schema_of(current), slice_schema)
    if problems:
        raise IncompatibleSchemaError(
            f"{dataset}: the new data does not match the dataset's schema (SetDataSchema): "
            + "; ".join(problems)
        )
    return None


def schema_event(
    current: SetDataSchema | None, slice_schema: pa.Schema, dataset: str
) -> SetDataSchema | None:
    """The ``SetDataSchema`` to commit before a transform's slice, if one is needed."""
    declared = _declared(slice_schema)
    if current is None:
        return declared
    if current.schema is not None and current.schema == declared.schema:
        return None
    existing = arrow_schema_of(current)
    problems = _fields(list(existing), list(slice_schema)[: len(existing)], "", nullability=False)
    if problems:
        raise IncompatibleSchemaError(
            f"{dataset}: the new data does not match the dataset's schema: {'; '.join(problems)}"
        )
    if len(slice_schema) == len(existing):
        return None
    return declared


def _declared(slice_schema: pa.Schema) -> SetDataSchema:
    from protocol import arrow_schema

    return SetDataSchema(
        schema=arrow_schema.strip_encoding(arrow_schema.schema_from_arrow(slice_schema))
    )


def incompatibilities(existing: pa.Schema, new: pa.Schema) -> list[str]:
    """Why a slice with schema ``new`` cannot be added under ``existing``; empty if it can."""
    problems = _fields(list(existing), list(new), "")
    problems.extend(f"column '{f.name}' is not in the schema" for f in list(new)[len(existing) :])
    return problems


def _fields(
    existing: list[pa.Field], new: list[pa.Field], prefix: str, *, nullability: bool = True
) -> list[str]:
    problems = []
    for index, field in enumerate(existing):
        path = f"{prefix}{field.name}"
        if index >= len(new):
            problems.append(f"column '{path}' is missing")
            continue
        other = new[index]
        if other.name != field.name:
            problems.append(f"column {index + 1} is '{prefix}{other.name}', expected '{path}'")
        else:
            problems.extend(_field(field, other, path, nullability))
    return problems


def _field(field: pa.Field, other: pa.Field, path: str, nullability: bool) -> list[str]:
    if nullability and not field.nullable and other.nullable:
        return [f"column '{path}' is optional, the schema requires it"]
    a, b = field.type, other.type
    if nullability and _is_list(a) and _is_list(b):
        return _field(a.value_field, b.value_field, f"{path}[]", nullability)
    if nullability and pa.types.is_struct(a) and pa.types.is_struct(b):
        problems = _fields(list(a), list(b), f"{path}.")
        problems.extend(f"field '{path}.{f.name}' is not in the schema" for f in list(b)[len(a) :])
        return problems
    if _plain(a) != _plain(b):
        return [f"column '{path}' is {b}, expected {a}"]
    return []


def _is_list(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _plain(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t
