"""When a transaction must declare its slice's schema with a ``SetDataSchema`` block.

The first slice of a dataset declares the schema; a later slice must have the same columns, or
the same columns plus new ones at the end (schema evolution only adds columns). Types are compared
as Arrow types, so the legacy ``rawArrowSchema`` form compares like the ODF one.
"""

from __future__ import annotations

import pyarrow as pa

from odfd.errors import OdfdError
from protocol.model import SetDataSchema
from verifier.engine.inputs import arrow_schema_of


class IncompatibleSchemaError(OdfdError):
    """A new slice's columns differ from the dataset's declared schema in a way that is not allowed."""


def schema_event(
    current: SetDataSchema | None, slice_schema: pa.Schema, dataset: str
) -> SetDataSchema | None:
    """The ``SetDataSchema`` to commit before a slice with ``slice_schema``, if one is needed."""
    from protocol import arrow_schema

    declared = SetDataSchema(
        schema=arrow_schema.strip_encoding(arrow_schema.schema_from_arrow(slice_schema))
    )
    if current is None:
        return declared
    if current.schema is not None and current.schema == declared.schema:
        return None
    existing = arrow_schema_of(current)
    problems = _incompatibilities(existing, slice_schema)
    if problems:
        raise IncompatibleSchemaError(
            f"{dataset}: the new data does not match the dataset's schema: {'; '.join(problems)}"
        )
    if len(slice_schema) == len(existing):
        return None
    return declared


def _incompatibilities(existing: pa.Schema, new: pa.Schema) -> list[str]:
    problems = []
    for index, field in enumerate(existing):
        if index >= len(new):
            problems.append(f"column '{field.name}' is missing")
            continue
        other = new.field(index)
        if other.name != field.name:
            problems.append(f"column {index + 1} is '{other.name}', expected '{field.name}'")
        elif not _same_type(field.type, other.type):
            problems.append(f"column '{field.name}' is {other.type}, expected {field.type}")
    return problems


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
            return pa.binary()
        return t

    return plain(a) == plain(b)
