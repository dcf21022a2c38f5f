"""Read step, odfd's half: the input file made ready for the engine that reads it.

Text read as UTF-8 is checked first (``odfd.ingest.encoding``: engines would replace bad bytes
without a word). ``Json`` and ``GeoJson`` documents (and ``NdGeoJson`` features) are rewritten as
one JSON object per line, as the reference does, with a GeoJSON feature's ``properties`` as
columns and its ``geometry`` kept as a JSON string column named ``geometry`` (written as the
reference writes it); ``EsriShapefile`` records are rewritten the same way (see
``odfd.ingest.shapefile``). The engine then reads CSV, JSON lines or Parquet with the declared
schema (``verifier.engine.spark.read``).
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odfd.ingest.encoding import check_utf8, is_utf8
from odfd.ingest.errors import BadInputError
from protocol.model import (
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
)
from protocol.model.maps import json_text
from verifier.engine.contract import IngestInput


@contextmanager
def read_input(read_step: object, path: Path, work: Path) -> Iterator[IngestInput]:
    """``path`` (absolute) as the engine is to read it under ``read_step``; a file converted
    into ``work`` is removed on exit."""
    path = path.absolute()  # the engine may run in another folder (a Connect server, executors)
    converter = _converter_for(read_step, work)
    if _is_text(read_step, converter):
        check_utf8(path, header=isinstance(read_step, ReadStepCsv) and bool(read_step.header))
    if converter is None:
        yield IngestInput(path, path)
        return
    work.mkdir(parents=True, exist_ok=True)
    lines = work / f"read-{uuid.uuid4().hex}.ndjson"
    try:
        converter.to_lines(path, lines)
        yield IngestInput(lines, path, converter.record_unit)
    finally:
        lines.unlink(missing_ok=True)


def _converter_for(read_step: object, work: Path) -> _Converter | None:
    if isinstance(read_step, ReadStepJson):
        return _JsonArrayConverter(read_step.sub_path)
    if isinstance(read_step, ReadStepGeoJson):
        return _GeoJsonConverter()
    if isinstance(read_step, ReadStepNdGeoJson):
        return _NdGeoJsonConverter()
    if isinstance(read_step, ReadStepEsriShapefile):
        return _ShapefileConverter(read_step.sub_path, work)
    return None


def _is_text(read_step: object, converter: _Converter | None) -> bool:
    """Whether the input is text the engine (or the converter) reads as UTF-8."""
    if converter is not None and not converter.text_input:
        return False
    if isinstance(read_step, (ReadStepCsv, ReadStepJson, ReadStepNdJson)):
        return is_utf8(read_step.encoding or "UTF-8")
    return converter is not None


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
    """A feature's geometry as the reference stores it: serde_json's compact text, keys sorted at
    every level (its JSON maps are ordered by key), non-ASCII text kept as UTF-8, floats spelled as
    Rust spells an ``f64`` (``1e-7``, ``1e16``, not Python's ``1e-07``, ``1e+16``)."""
    return json_text(geometry)


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
