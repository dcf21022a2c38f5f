"""The schema a read step declares, as a Spark ``StructType``: an ODF ``DataSchema`` or legacy DDL.

Spark's file readers make every column nullable whatever the schema says, so which columns are
required is kept apart (:func:`declared_required`) and enforced when the slice is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from verifier.engine.errors import IngestError
from verifier.engine.spark.internals import from_arrow_schema, parse_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


def declared_schema(read_step: Any, spark: SparkSession) -> StructType | None:
    """The read step's ``schema`` (preferred) or legacy ``ddlSchema`` (parsed by ``spark``);
    ``None`` to infer."""
    from pyspark.sql.types import StructType

    schema = getattr(read_step, "schema", None)
    if schema is not None:
        return spark_schema_of_arrow(arrow_schema_of(schema))
    ddl = getattr(read_step, "ddl_schema", None)
    if ddl:
        text = ", ".join(ddl)
        try:
            parsed = parse_ddl(spark, text)
        except Exception as err:  # Spark's parser raises several exception types
            raise IngestError(
                f"read.ddlSchema: invalid schema {text!r}: {str(err).splitlines()[0]}"
            ) from err
        if not isinstance(parsed, StructType):
            raise IngestError(f"read.ddlSchema: {text!r} is not a list of columns")
        return parsed
    return None


def declared_required(read_step: Any, spark: SparkSession) -> frozenset[str]:
    """Top-level columns the read step's schema makes required, by the reference's rules.

    ``DataSchema`` form: every field not wrapped in ``kind: Option``. Legacy DDL: columns marked
    ``NOT NULL``, and also ``DATE`` and ``DECIMAL(p, s)`` columns, which the reference's DDL
    conversion (``parse_ddl_to_odf_schema``) leaves required. An inferred schema: none.
    """
    from pyspark.sql.types import DateType, DecimalType

    from protocol.model import DataTypeOption

    schema = getattr(read_step, "schema", None)
    if schema is not None:
        return frozenset(f.name for f in schema.fields if not isinstance(f.type, DataTypeOption))
    parsed = declared_schema(read_step, spark)
    if parsed is None:
        return frozenset()
    return frozenset(
        f.name
        for f in parsed.fields
        if not f.nullable or isinstance(f.dataType, (DateType, DecimalType))
    )


def declared_nesting_schema(read_step: Any) -> pa.Schema | None:
    """The read step's ``DataSchema`` as Arrow, whose struct fields and list items keep their
    declared nullability in the slice (Spark's readers lose it); ``None`` for a legacy
    ``ddlSchema`` (its nested fields are nullable, as DataFusion's SQL types, which the
    reference parses it with, make them) or an inferred schema."""
    schema = getattr(read_step, "schema", None)
    return None if schema is None else arrow_schema_of(schema)


def arrow_schema_of(data_schema: Any) -> pa.Schema:
    """An ODF ``DataSchema`` as the Arrow schema it describes (RFC-016)."""
    from protocol.arrow_schema import UnsupportedSchemaError, schema_to_arrow

    try:
        return schema_to_arrow(data_schema)
    except UnsupportedSchemaError as err:
        raise IngestError(f"read.schema: {err}") from err


def spark_schema_of_arrow(schema: pa.Schema) -> StructType:
    try:
        return from_arrow_schema(schema)
    except (TypeError, ValueError) as err:
        raise IngestError(f"read.schema: a column type cannot be read by Spark: {err}") from err
