"""Read step in Spark: an ingest's input file into a DataFrame, with the declared schema applied.

Readers parse in Spark's FAILFAST mode, so a malformed record stops the ingest instead of being
dropped or silently nulled. When that happens :meth:`Reader.diagnose` re-reads the file to find the
first bad record and names its file, row (and line) and column (see
``verifier.engine.spark.bad_rows``).

Documents that are not one record per line (``Json``, ``GeoJson``, ``NdGeoJson``,
``EsriShapefile``) arrive already rewritten as JSON lines (``odfd.ingest.read``), and text
inputs already checked to be valid UTF-8 where they are read as UTF-8.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import InitVar, dataclass
from typing import TYPE_CHECKING, Any

from protocol.model import (
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
    ReadStepParquet,
)
from verifier.engine.contract import IngestInput
from verifier.engine.errors import BadInputError, UnsupportedError
from verifier.engine.spark import bad_rows
from verifier.engine.spark.columns import col
from verifier.engine.spark.schema import declared_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

RFC3339 = "rfc3339"


def reader_for(read_step: object, spark: SparkSession) -> Reader:
    """The reader of ``read_step``; a legacy DDL schema is parsed by ``spark`` (a classic or a
    Connect session: neither needs the other to exist)."""
    if isinstance(read_step, ReadStepCsv):
        return CsvReader(read_step, spark)
    if isinstance(read_step, (ReadStepJson, ReadStepNdJson)):
        return JsonLinesReader(read_step, spark, _json_options(read_step))
    if isinstance(read_step, (ReadStepGeoJson, ReadStepNdGeoJson, ReadStepEsriShapefile)):
        return JsonLinesReader(read_step, spark, {})
    if isinstance(read_step, ReadStepParquet):
        return ParquetReader(read_step, spark)
    kind = type(read_step).__name__.removeprefix("ReadStep")
    raise UnsupportedError(
        f"read step {kind} is not supported "
        "(Csv, Json, NdJson, GeoJson, NdGeoJson, EsriShapefile, Parquet)"
    )


class Reader(ABC):
    """Reads one file; knows how to explain why it could not."""

    schema: StructType | None

    @abstractmethod
    def read(self, spark: SparkSession, input: IngestInput) -> DataFrame | None:
        """The file's records; ``None`` for an empty file with nothing declared about its columns."""

    @abstractmethod
    def diagnose(self, spark: SparkSession, input: IngestInput) -> BadInputError | None:
        """The first malformed record of the input, if the file has one."""


def _empty(spark: SparkSession, schema: StructType | None) -> DataFrame | None:
    return None if schema is None else spark.createDataFrame([], schema)


@dataclass
class CsvReader(Reader):
    step: ReadStepCsv
    spark: InitVar[SparkSession]

    def __post_init__(self, spark: SparkSession) -> None:
        self.schema = declared_schema(self.step, spark)
        for name in ("separator", "quote", "escape"):
            value = getattr(self.step, name)
            if value is not None and len(value) > 1:
                raise UnsupportedError(f"read.{name} must be a single character, got {value!r}")

    @property
    def header(self) -> bool:
        return bool(self.step.header)

    @property
    def null_value(self) -> str:
        return self.step.null_value if self.step.null_value is not None else ""

    def options(self) -> dict[str, str]:
        step = self.step
        options = {
            "sep": step.separator if step.separator is not None else ",",
            "encoding": _encoding(step.encoding),
            "quote": step.quote if step.quote is not None else '"',
            "escape": step.escape if step.escape is not None else "\\",
            "header": "true" if step.header else "false",
            "inferSchema": "true" if (step.infer_schema and self.schema is None) else "false",
            "nullValue": self.null_value,
            "multiLine": "false",
        }
        if step.date_format and step.date_format != RFC3339:
            options["dateFormat"] = step.date_format
        if step.timestamp_format and step.timestamp_format != RFC3339:
            options["timestampFormat"] = step.timestamp_format
        return options

    def read(self, spark: SparkSession, input: IngestInput) -> DataFrame | None:
        if input.path.stat().st_size == 0:
            return _empty(spark, self.schema)
        reader = spark.read.options(**self.options(), mode="FAILFAST")
        if self.schema is not None:
            reader = reader.schema(self.schema)
        df = reader.csv(str(input.path))
        return _wide_integers(df) if self.options()["inferSchema"] == "true" else df

    def diagnose(self, spark: SparkSession, input: IngestInput) -> BadInputError | None:
        if self.schema is None:
            return None
        return bad_rows.diagnose_csv(
            spark, input.path, self.schema, self.options(), self.header, self.null_value
        )


@dataclass
class JsonLinesReader(Reader):
    step: Any
    spark: InitVar[SparkSession]
    json_options: dict[str, str]

    def __post_init__(self, spark: SparkSession) -> None:
        self.schema = declared_schema(self.step, spark)

    def read(self, spark: SparkSession, input: IngestInput) -> DataFrame | None:
        if input.path.stat().st_size == 0:
            return _empty(spark, self.schema)
        reader = spark.read.options(**self.json_options, mode="FAILFAST")
        if self.schema is not None:
            reader = reader.schema(self.schema)
        return reader.json(str(input.path))

    def diagnose(self, spark: SparkSession, input: IngestInput) -> BadInputError | None:
        if self.schema is None:
            return None
        return bad_rows.diagnose_json_lines(
            spark,
            input.path,
            self.schema,
            self.json_options,
            source=input.source,
            record_unit=input.record_unit,
        )


@dataclass
class ParquetReader(Reader):
    step: ReadStepParquet
    spark: InitVar[SparkSession]

    def __post_init__(self, spark: SparkSession) -> None:
        self.schema = declared_schema(self.step, spark)

    def read(self, spark: SparkSession, input: IngestInput) -> DataFrame | None:
        df = spark.read.parquet(str(input.path))
        if self.schema is None:
            return df
        return bad_rows.apply_schema(df, self.schema, input.path)

    def diagnose(self, spark: SparkSession, input: IngestInput) -> BadInputError | None:
        if self.schema is None:
            return None
        return bad_rows.diagnose_casts(spark, input.path, self.schema)


def _wide_integers(df: DataFrame) -> DataFrame:
    """Inferred integer columns as Int64, as the reference infers them (Spark picks Int32 when
    the values fit)."""
    from pyspark.sql.types import IntegerType, LongType

    if not any(isinstance(f.dataType, IntegerType) for f in df.schema.fields):
        return df
    return df.select(
        *[
            col(f.name).cast(LongType()) if isinstance(f.dataType, IntegerType) else col(f.name)
            for f in df.schema.fields
        ]
    )


def _encoding(value: str | None) -> str:
    if value is None or value.lower().replace("-", "") == "utf8":
        return "UTF-8"
    return value


def _json_options(step: ReadStepJson | ReadStepNdJson) -> dict[str, str]:
    options = {"encoding": _encoding(step.encoding)}
    if step.date_format and step.date_format != RFC3339:
        options["dateFormat"] = step.date_format
    if step.timestamp_format and step.timestamp_format != RFC3339:
        options["timestampFormat"] = step.timestamp_format
    return options
