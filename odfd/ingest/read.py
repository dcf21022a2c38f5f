"""Read step: a prepared file into a Spark DataFrame, with the declared schema applied.

Readers parse in Spark's FAILFAST mode, so a malformed record stops the ingest instead of being
dropped or silently nulled. When that happens :meth:`Reader.diagnose` re-reads the file to find the
first bad record and names its file, row (and line) and column (see ``odfd.ingest.bad_rows``).

``Json`` and ``GeoJson`` documents (and ``NdGeoJson`` features) are first rewritten as one JSON
object per line, as the reference does, with a GeoJSON feature's ``properties`` as columns and its
``geometry`` kept as a JSON string column named ``geometry`` (written as the reference writes it).
``EsriShapefile`` records are rewritten the same way (see ``odfd.ingest.shapefile``).
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfd.ingest import bad_rows
from odfd.ingest.encoding import check_utf8, is_utf8
from odfd.ingest.errors import BadInputError, IngestError, UnsupportedError
from odfd.ingest.schema import declared_schema
from protocol.model import (
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
    ReadStepParquet,
)
from verifier.engine.columns import col

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

RFC3339 = "rfc3339"


def reader_for(read_step: object, work_dir: Path) -> Reader:
    if isinstance(read_step, ReadStepCsv):
        return CsvReader(read_step)
    if isinstance(read_step, ReadStepNdJson):
        return JsonLinesReader(read_step, _json_options(read_step))
    if isinstance(read_step, ReadStepJson):
        return JsonLinesReader(
            read_step,
            _json_options(read_step),
            convert=_JsonArrayConverter(read_step.sub_path),
            work_dir=work_dir,
        )
    if isinstance(read_step, ReadStepGeoJson):
        return JsonLinesReader(read_step, {}, convert=_GeoJsonConverter(), work_dir=work_dir)
    if isinstance(read_step, ReadStepNdGeoJson):
        return JsonLinesReader(read_step, {}, convert=_NdGeoJsonConverter(), work_dir=work_dir)
    if isinstance(read_step, ReadStepEsriShapefile):
        converter = _ShapefileConverter(read_step.sub_path, work_dir)
        return JsonLinesReader(read_step, {}, convert=converter, work_dir=work_dir)
    if isinstance(read_step, ReadStepParquet):
        return ParquetReader(read_step)
    kind = type(read_step).__name__.removeprefix("ReadStep")
    raise UnsupportedError(
        f"read step {kind} is not supported "
        "(Csv, Json, NdJson, GeoJson, NdGeoJson, EsriShapefile, Parquet)"
    )


class Reader(ABC):
    """Reads one file; knows how to explain why it could not."""

    schema: StructType | None

    @abstractmethod
    def read(self, spark: SparkSession, path: Path) -> DataFrame | None:
        """The file's records; ``None`` for an empty file with nothing declared about its columns."""

    @abstractmethod
    def diagnose(self, spark: SparkSession, path: Path) -> BadInputError | None:
        """The first malformed record of ``path``, if the file has one."""

    def cleanup(self) -> None:  # noqa: B027 (a hook, not abstract: most readers create no files)
        """Removes temporary files the reader created (none by default)."""


def _empty(spark: SparkSession, schema: StructType | None) -> DataFrame | None:
    return None if schema is None else spark.createDataFrame([], schema)


@dataclass
class CsvReader(Reader):
    step: ReadStepCsv

    def __post_init__(self) -> None:
        self.schema = declared_schema(self.step)
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

    def read(self, spark: SparkSession, path: Path) -> DataFrame | None:
        if path.stat().st_size == 0:
            return _empty(spark, self.schema)
        if is_utf8(self.options()["encoding"]):
            check_utf8(path, header=self.header)
        reader = spark.read.options(**self.options(), mode="FAILFAST")
        if self.schema is not None:
            reader = reader.schema(self.schema)
        df = reader.csv(str(path))
        return _wide_integers(df) if self.options()["inferSchema"] == "true" else df

    def diagnose(self, spark: SparkSession, path: Path) -> BadInputError | None:
        if self.schema is None:
            return None
        return bad_rows.diagnose_csv(
            spark, path, self.schema, self.options(), self.header, self.null_value
        )


@dataclass
class JsonLinesReader(Reader):
    step: Any
    json_options: dict[str, str]
    convert: _Converter | None = None
    work_dir: Path | None = None
    _converted: dict[Path, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.schema = declared_schema(self.step)

    def _lines_file(self, path: Path) -> Path:
        if self.convert is None:
            return path
        if path not in self._converted:
            if self.work_dir is None:
                raise IngestError("a JSON reader needs a work directory for its conversion")
            self.work_dir.mkdir(parents=True, exist_ok=True)
            target = self.work_dir / f"read-{uuid.uuid4().hex}.ndjson"
            self._converted[path] = target
            self.convert.to_lines(path, target)
        return self._converted[path]

    def read(self, spark: SparkSession, path: Path) -> DataFrame | None:
        text_input = self.convert is None or self.convert.text_input
        if text_input and is_utf8(self.json_options.get("encoding", "UTF-8")):
            check_utf8(path)
        lines = self._lines_file(path)
        if lines.stat().st_size == 0:
            return _empty(spark, self.schema)
        reader = spark.read.options(**self.json_options, mode="FAILFAST")
        if self.schema is not None:
            reader = reader.schema(self.schema)
        return reader.json(str(lines))

    def diagnose(self, spark: SparkSession, path: Path) -> BadInputError | None:
        if self.schema is None:
            return None
        lines = self._lines_file(path)
        record_unit = self.convert.record_unit if self.convert else None
        return bad_rows.diagnose_json_lines(
            spark, lines, self.schema, self.json_options, source=path, record_unit=record_unit
        )

    def cleanup(self) -> None:
        for target in self._converted.values():
            target.unlink(missing_ok=True)
        self._converted.clear()


@dataclass
class ParquetReader(Reader):
    step: ReadStepParquet

    def __post_init__(self) -> None:
        self.schema = declared_schema(self.step)

    def read(self, spark: SparkSession, path: Path) -> DataFrame | None:
        df = spark.read.parquet(str(path))
        if self.schema is None:
            return df
        return bad_rows.apply_schema(df, self.schema, path)

    def diagnose(self, spark: SparkSession, path: Path) -> BadInputError | None:
        if self.schema is None:
            return None
        return bad_rows.diagnose_casts(spark, path, self.schema)


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


class _Converter(ABC):
    """Rewrites a JSON document (or a shapefile) as one JSON object per line."""

    record_unit = "record"
    text_input = True
    """Whether the input is text to check as UTF-8 before converting it."""

    @abstractmethod
    def to_lines(self, source: Path, target: Path) -> None: ...


@dataclass
class _JsonArrayConverter(_Converter):
    sub_path: str | None

    def to_lines(self, source: Path, target: Path) -> None:
        root = _load_json(source)
        value, walked = root, []
        for key in self.sub_path.split(".") if self.sub_path else []:
            walked.append(key)
            if not isinstance(value, dict) or key not in value:
                raise BadInputError(
                    f"{source}: sub-path {'.'.join(walked)} not found", path=str(source)
                )
            value = value[key]
        if not isinstance(value, list):
            where = ".".join(walked) or "the root element"
            raise BadInputError(f"{source}: {where} is not an array", path=str(source))
        _write_lines(value, target, source)


class _GeoJsonConverter(_Converter):
    record_unit = "feature"

    def to_lines(self, source: Path, target: Path) -> None:
        root = _load_json(source)
        if not isinstance(root, dict) or root.get("type") != "FeatureCollection":
            raise BadInputError(f"{source}: expected a GeoJSON FeatureCollection", path=str(source))
        features = root.get("features")
        if not isinstance(features, list):
            raise BadInputError(
                f"{source}: FeatureCollection has no features array", path=str(source)
            )
        _write_lines(
            (_feature_record(f, source, n) for n, f in enumerate(features, 1)), target, source
        )


class _NdGeoJsonConverter(_Converter):
    record_unit = "feature"

    def to_lines(self, source: Path, target: Path) -> None:
        def records() -> Any:
            with open(source, encoding="utf-8") as inp:
                for number, line in enumerate(inp, 1):
                    if line.strip():
                        try:
                            feature = json.loads(line)
                        except json.JSONDecodeError as err:
                            raise BadInputError(
                                f"{source}, line {number}: not valid JSON: {err.msg}",
                                path=str(source),
                                line=number,
                            ) from None
                        yield _feature_record(feature, source, number)

        _write_lines(records(), target, source)


@dataclass
class _ShapefileConverter(_Converter):
    sub_path: str | None
    scratch: Path
    record_unit = "feature"
    text_input = False

    def to_lines(self, source: Path, target: Path) -> None:
        # pyshp pulls in urllib.request and http.client (~0.08 s): only shapefile reads pay it
        from odfd.ingest.shapefile import shapefile_to_lines

        shapefile_to_lines(source, target, self.sub_path, self.scratch)


def _feature_record(feature: Any, source: Path, number: int) -> dict[str, Any]:
    if not isinstance(feature, dict) or feature.get("type") != "Feature":
        raise BadInputError(
            f"{source}, feature {number}: not a GeoJSON Feature", path=str(source), record=number
        )
    properties = feature.get("properties") or {}
    geometry = feature.get("geometry")
    if not isinstance(properties, dict) or not isinstance(geometry, dict):
        raise BadInputError(
            f"{source}, feature {number}: a Feature needs object-valued properties and geometry",
            path=str(source),
            record=number,
        )
    return {**properties, "geometry": geometry_text(geometry)}


def geometry_text(geometry: dict[str, Any]) -> str:
    """A feature's geometry as the reference stores it: compact JSON, keys sorted at every level
    (its JSON maps are ordered by key), non-ASCII text kept as UTF-8."""
    return json.dumps(geometry, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _load_json(source: Path) -> Any:
    try:
        with open(source, encoding="utf-8") as inp:
            return json.load(inp)
    except json.JSONDecodeError as err:
        raise BadInputError(
            f"{source}, line {err.lineno}, column {err.colno}: not valid JSON: {err.msg}",
            path=str(source),
            line=err.lineno,
        ) from None
    except UnicodeDecodeError as err:
        raise BadInputError(f"{source}: not UTF-8 text: {err}", path=str(source)) from None


def _write_lines(records: Any, target: Path, source: Path) -> None:
    with open(target, "w", encoding="utf-8") as out:
        for number, record in enumerate(records, 1):
            if not isinstance(record, dict):
                raise BadInputError(
                    f"{source}, record {number}: not a JSON object", path=str(source), record=number
                )
            out.write(json.dumps(record, separators=(",", ":")))
            out.write("\n")
