"""ReadStep::EsriShapefile: a shapefile rewritten as one JSON object per line, as the reference does.

The input is a zip archive (or a folder) holding a ``.shp`` with its ``.dbf`` (and usually
``.shx``, ``.prj``, ``.cpg``). ``subPath`` picks the ``.shp`` when there are several: an exact path
inside the archive, or a glob. Each record becomes one object: its dBase fields as columns and its
shape as a GeoJSON string column ``geometry``, spelled as the reference spells it.

What the reference (kamu-cli, through the Rust ``shapefile``, ``dbase``, ``geo-types`` and
``geojson`` crates) decides, and odfd does too:

- points are ``Point``, polylines always ``MultiLineString``, polygons always ``MultiPolygon``
  (a ring wound clockwise starts a polygon, a counter-clockwise one is a hole of the polygon
  before it; rings are closed), multipoints ``MultiPoint``; Z and M values are dropped;
- the geometry text is ``{"type":...,"coordinates":...}`` in that key order, numbers written as
  Rust writes ``f64`` (``1.0``, ``1e-7``, ``1e16``);
- numeric fields (``N``) are doubles; float fields (``F``) are read as 32-bit floats and widened;
  text (``C``) is trimmed of spaces, and empty text is null; dates (``D``) are ``Y-M-D`` text
  without zero padding (``2020-1-5``); logicals are booleans;
- the ``.prj`` is not applied: coordinates stay in the shapefile's own reference system.

Where odfd is stricter or reads more: text is decoded with the ``.cpg``'s encoding (UTF-8 without
one) and undecodable bytes are an error instead of U+FFFD; a null shape gives a null geometry
(the reference fails the ingest); deleted dBase records are skipped with their shapes.
"""

from __future__ import annotations

import codecs
import glob
import json
import struct
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from datetime import date
from itertools import pairwise
from pathlib import Path
from typing import Any

import shapefile

from odfd.ingest.errors import BadInputError, UnsupportedError
from protocol.model.maps import format_float

_POINTS = {shapefile.POINT, shapefile.POINTZ, shapefile.POINTM}
_MULTIPOINTS = {shapefile.MULTIPOINT, shapefile.MULTIPOINTZ, shapefile.MULTIPOINTM}
_POLYLINES = {shapefile.POLYLINE, shapefile.POLYLINEZ, shapefile.POLYLINEM}
_POLYGONS = {shapefile.POLYGON, shapefile.POLYGONZ, shapefile.POLYGONM}
#: dBase field types the reference reads from shapefiles (memo fields need a .dbt it never opens).
_FIELD_TYPES = {"C", "N", "F", "L", "D"}


def shapefile_to_lines(source: Path, target: Path, sub_path: str | None, scratch: Path) -> None:
    """Writes the records of the shapefile in ``source`` (a zip archive or a folder) to ``target``,
    one JSON object per line; an archive is unpacked under ``scratch`` and removed afterwards."""
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="shapefile-") as unpacked:
        root = _unpack(source, Path(unpacked))
        shp = _locate(root, sub_path, source)
        where = f"{source}: {shp.relative_to(root)}"
        with open(target, "w", encoding="utf-8") as out:
            for record in _records(shp, where, str(source)):
                out.write(json.dumps(record, sort_keys=True, ensure_ascii=False))
                out.write("\n")


def _unpack(source: Path, into: Path) -> Path:
    if source.is_dir():
        return source
    if not zipfile.is_zipfile(source):
        raise BadInputError(
            f"{source}: not a zip archive (a shapefile source is a zip or a folder holding "
            ".shp, .shx and .dbf files)",
            path=str(source),
        )
    try:
        with zipfile.ZipFile(source) as archive:
            archive.extractall(into)  # member names are sanitized: nothing lands outside `into`
    except (zipfile.BadZipFile, OSError) as err:
        raise BadInputError(f"{source}: cannot unpack the zip archive: {err}") from None
    return into


def _locate(root: Path, sub_path: str | None, source: Path) -> Path:
    """The ``.shp`` to read, found as the reference finds it."""
    every = sorted(p for p in root.rglob("*") if _is_shp(p))
    names = ", ".join(str(p.relative_to(root)) for p in every) or "none"
    if sub_path is None:
        if len(every) == 1:
            return every[0]
        if not every:
            raise BadInputError(f"{source}: holds no .shp file", path=str(source))
        raise BadInputError(
            f"{source}: holds several .shp files; set read.subPath to one of: {names}",
            path=str(source),
        )
    exact = (root / sub_path).resolve()
    if exact.is_file() and exact.is_relative_to(root.resolve()):
        if not _is_shp(exact):
            raise BadInputError(
                f"{source}: read.subPath {sub_path!r} is not a .shp file", path=str(source)
            )
        return exact
    pattern = glob.escape(str(root)) + "/" + sub_path
    matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if _is_shp(Path(p)))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise BadInputError(
            f"{source}: no .shp file matches read.subPath {sub_path!r} (.shp files: {names})",
            path=str(source),
        )
    found = ", ".join(str(p.relative_to(root)) for p in matches)
    raise BadInputError(
        f"{source}: read.subPath {sub_path!r} matches several .shp files: {found}",
        path=str(source),
    )


def _is_shp(path: Path) -> bool:
    return path.suffix.lower() == ".shp" and path.is_file()


def _sibling(shp: Path, suffix: str) -> Path | None:
    for candidate in (shp.with_suffix(suffix), shp.with_suffix(suffix.upper())):
        if candidate.is_file():
            return candidate
    return None


def _records(shp: Path, where: str, source: str) -> Iterator[dict[str, Any]]:
    dbf = _sibling(shp, ".dbf")
    if dbf is None:
        raise BadInputError(
            f"{where} has no {shp.stem}.dbf beside it (a shapefile needs its .shp, .shx and .dbf)",
            path=source,
        )
    shx = _sibling(shp, ".shx")
    encoding = _encoding(_sibling(shp, ".cpg"), where, source)
    number = 0
    with ExitStack() as files:
        try:
            reader = shapefile.Reader(
                shp=files.enter_context(open(shp, "rb")),
                shx=files.enter_context(open(shx, "rb")) if shx else None,
                dbf=files.enter_context(open(dbf, "rb")),
                encoding=encoding,
            )
            fields = [f for f in reader.fields if f.name != "DeletionFlag"]
            for field in fields:
                if str(field.field_type) not in _FIELD_TYPES:
                    raise UnsupportedError(
                        f"{where}: field {field.name} has dBase type {field.field_type}, which "
                        "odfd does not read (C, N, F, L and D are read)"
                    )
            shapes = reader.iterShapes()
            rows = reader.iterRecords(deleted_as_None=True)
            for number, (shape, row) in enumerate(zip(shapes, rows, strict=True), start=1):
                if row is None:  # deleted
                    continue
                record = {
                    f.name: _value(f.field_type, v, where, number, f.name)
                    for f, v in zip(fields, row, strict=True)
                }
                record["geometry"] = geometry_text(shape, where, number)
                yield record
        except ValueError as err:
            if "zip()" in str(err):  # strict zip: the .shp and the .dbf disagree on the count
                raise BadInputError(
                    f"{where}: the .shp and the .dbf hold different numbers of records",
                    path=source,
                ) from None
            raise BadInputError(
                f"{where}, record {number + 1}: cannot be read: {err}", path=source
            ) from None
        except shapefile.dbfFileException as err:
            if "decode" not in str(err):
                raise BadInputError(
                    f"{where}, record {number + 1}: cannot be read: {err}", path=source
                ) from None
            raise BadInputError(
                f"{where}, record {number + 1}: text is not valid {encoding} "
                "(name the encoding in a .cpg file beside the .shp)",
                path=source,
            ) from None
        except (shapefile.ShapefileException, struct.error, EOFError, OSError) as err:
            raise BadInputError(
                f"{where}, record {number + 1}: cannot be read: {err}", path=source
            ) from None


def _encoding(cpg: Path | None, where: str, source: str) -> str:
    """The dBase text encoding named by the ``.cpg`` file (UTF-8 without one)."""
    if cpg is None:
        return "utf-8"
    name = cpg.read_bytes().decode("ascii", "replace").strip()
    candidates = [name, f"cp{name}"] if name.isdigit() else [name]
    for candidate in candidates:
        try:
            return codecs.lookup(candidate).name
        except LookupError:
            continue
    raise UnsupportedError(f"{where}: the .cpg names an unknown text encoding {name!r}")


def _value(kind: object, value: Any, where: str, number: int, name: str) -> Any:
    if value is None:
        return None
    kind = str(kind)
    if kind == "C":
        text = str(value).split("\x00", 1)[0].strip(" ")
        return text or None
    if kind == "N":
        return float(value)
    if kind == "F":
        # the reference reads F fields as 32-bit floats
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if kind == "D":
        if not isinstance(value, date):
            raise BadInputError(
                f"{where}, record {number}: field {name} holds an invalid date {value!r}",
                record=number,
                column=name,
            )
        return f"{value.year}-{value.month}-{value.day}"
    return value  # L: already a bool


def geometry_text(shape: Any, where: str, number: int) -> str | None:
    """The record's shape as the reference writes it: GeoJSON, ``type`` then ``coordinates``."""
    kind = shape.shapeType
    points = [(float(p[0]), float(p[1])) for p in shape.points]
    if kind == shapefile.NULL:
        return None
    if kind in _POINTS:
        return _geojson("Point", points[0] if points else [])
    if kind in _MULTIPOINTS:
        return _geojson("MultiPoint", points)
    if kind in _POLYLINES:
        return _geojson("MultiLineString", _parts(points, shape.parts))
    if kind in _POLYGONS:
        return _geojson("MultiPolygon", _polygons(_parts(points, shape.parts), where, number))
    raise UnsupportedError(
        f"{where}, record {number}: shape type {shapefile.SHAPETYPE_LOOKUP.get(kind, kind)} "
        "cannot be written as GeoJSON (odfd reads points, polylines, polygons and multipoints)"
    )


Point = tuple[float, float]


def _parts(points: list[Point], starts: Sequence[int]) -> list[list[Point]]:
    ends = [*starts[1:], len(points)]
    return [points[start:end] for start, end in zip(starts, ends, strict=True)]


def _polygons(rings: list[list[Point]], where: str, number: int) -> list[list[list[Point]]]:
    """Rings grouped into polygons: a clockwise ring starts one, the counter-clockwise rings
    after it are its holes."""
    polygons: list[list[list[Point]]] = []
    for ring in rings:
        closed = ring + [ring[0]] if ring and ring[0] != ring[-1] else ring
        if _is_outer(ring):
            polygons.append([closed])
        elif polygons:
            polygons[-1].append(closed)
        else:
            raise BadInputError(
                f"{where}, record {number}: a polygon's first ring is a hole (wound "
                "counter-clockwise) with no outer ring before it",
                record=number,
            )
    return polygons


def _is_outer(ring: list[Point]) -> bool:
    twice_area = sum((b[0] - a[0]) * (b[1] + a[1]) for a, b in pairwise(ring))
    return twice_area >= 0


def _geojson(kind: str, coordinates: Any) -> str:
    return f'{{"type":"{kind}","coordinates":{_coordinates(coordinates)}}}'


def _coordinates(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_coordinates(v) for v in value) + "]"
    return format_float(value)
