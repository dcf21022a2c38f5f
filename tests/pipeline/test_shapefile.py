"""ReadStep::EsriShapefile: shapefiles the tests write with pyshp, read as the reference reads them.

The conversion tests need no Spark; the ingest tests poll and push real zip archives and folders
and verify the dataset afterwards.
"""

from __future__ import annotations

import json
import zipfile
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import shapefile

from odfd.coordinator.ingest import ingest_push, pull_root
from odfd.ingest.errors import BadInputError, UnsupportedError
from odfd.ingest.shapefile import shapefile_to_lines
from protocol.model import SourceState, Timestamp
from protocol.model.maps import format_float
from storage.workspace import Workspace
from tests.fixtures.manifests import root_snapshot
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, rows
from verifier.audit import VerifyOptions, verify

SQUARE = [[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]]  # clockwise: an outer ring
HOLE = [[2, 2], [4, 2], [4, 4], [2, 4], [2, 2]]  # counter-clockwise: a hole
ISLAND = [[20, 20], [20, 21], [21, 21], [21, 20]]  # clockwise, left open: closed on reading


def write_cities(folder: Path, name: str, cities: list[tuple[str, float, float]]) -> Path:
    """A point shapefile of cities (name, population, x, y) with a .prj, as GIS tools write."""
    folder.mkdir(parents=True, exist_ok=True)
    with shapefile.Writer(str(folder / name), shapeType=shapefile.POINT) as out:
        out.field("name", "C")
        out.field("pop", "N", 10, 0)
        for city, x, y in cities:
            out.point(x, y)
            out.record(city, len(city) * 1000)
    (folder / f"{name}.prj").write_text('GEOGCS["GCS_WGS_1984"]')
    return folder / f"{name}.shp"


def zip_folder(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return target


def convert(source: Path, tmp_path: Path, sub_path: str | None = None) -> list[dict[str, Any]]:
    target = tmp_path / "out.ndjson"
    shapefile_to_lines(source, target, sub_path, tmp_path / "scratch")
    assert list((tmp_path / "scratch").iterdir()) == []  # the unpacked archive is gone
    return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]


def test_geometries_as_the_reference_writes_them(tmp_path: Path) -> None:
    folder = tmp_path / "shapes"
    folder.mkdir()
    with shapefile.Writer(str(folder / "areas"), shapeType=shapefile.POLYGON) as out:
        out.field("id", "N", 4, 0)
        out.poly([SQUARE, HOLE, ISLAND])
        out.record(1)
        out.null()
        out.record(2)
    with shapefile.Writer(str(folder / "roads"), shapeType=shapefile.POLYLINEZ) as out:
        out.field("id", "N", 4, 0)
        out.linez([[[0.5, 1e-7, 9.0], [1e16, -0.25, 9.0]]])
        out.record(3)
    with shapefile.Writer(str(folder / "wells"), shapeType=shapefile.MULTIPOINT) as out:
        out.field("id", "N", 4, 0)
        out.multipoint([[1, 2], [3, 4]])
        out.record(4)
    archive = zip_folder(folder, tmp_path / "shapes.zip")

    areas = convert(archive, tmp_path, "areas.shp")
    assert [a["geometry"] for a in areas] == [
        '{"type":"MultiPolygon","coordinates":[[[[0.0,0.0],[0.0,10.0],[10.0,10.0],[10.0,0.0],'
        "[0.0,0.0]],[[2.0,2.0],[4.0,2.0],[4.0,4.0],[2.0,4.0],[2.0,2.0]]],"
        "[[[20.0,20.0],[20.0,21.0],[21.0,21.0],[21.0,20.0],[20.0,20.0]]]]}",
        None,
    ]
    assert convert(archive, tmp_path, "road*")[0]["geometry"] == (
        '{"type":"MultiLineString","coordinates":[[[0.5,1e-7],[1e16,-0.25]]]}'
    )
    assert convert(archive, tmp_path, "wells.shp")[0]["geometry"] == (
        '{"type":"MultiPoint","coordinates":[[1.0,2.0],[3.0,4.0]]}'
    )


def test_field_values_as_the_reference_reads_them(tmp_path: Path) -> None:
    with shapefile.Writer(str(tmp_path / "places"), shapeType=shapefile.POINT) as out:
        out.field("name", "C", 20)
        out.field("count", "N", 10, 0)
        out.field("ratio", "N", 12, 3)
        out.field("f", "F", 12, 4)
        out.field("ok", "L")
        out.field("day", "D")
        out.point(30.5, 50.25)
        out.record("  Zürich", 42, 1.5, 0.1, True, date(2020, 1, 5))
        out.point(1, 2)
        out.record("", None, None, None, None, None)
    (tmp_path / "places.cpg").write_text("UTF-8")
    first, second = convert(tmp_path, tmp_path)
    assert first == {
        "name": "Zürich",
        "count": 42.0,
        "ratio": 1.5,
        "f": 0.10000000149011612,  # read as a 32-bit float, widened
        "ok": True,
        "day": "2020-1-5",
        "geometry": '{"type":"Point","coordinates":[30.5,50.25]}',
    }
    assert {k: v for k, v in second.items() if k != "geometry"} == dict.fromkeys(
        first.keys() - {"geometry"}
    )
    assert isinstance(first["count"], float)


def test_text_is_decoded_with_the_cpg_encoding_and_never_replaced(tmp_path: Path) -> None:
    with shapefile.Writer(
        str(tmp_path / "t"), shapeType=shapefile.POINT, encoding="latin-1"
    ) as out:
        out.field("name", "C", 20)
        out.point(0, 0)
        out.record("Genève")
    (tmp_path / "t.cpg").write_text("ISO-8859-1")
    assert convert(tmp_path, tmp_path)[0]["name"] == "Genève"
    (tmp_path / "t.cpg").unlink()
    with pytest.raises(BadInputError) as err:
        convert(tmp_path, tmp_path)
    assert str(err.value) == (
        f"{tmp_path}: t.shp, record 1: text is not valid utf-8 "
        "(name the encoding in a .cpg file beside the .shp)"
    )


def test_coordinates_are_spelled_as_rust_spells_f64() -> None:
    cases = {
        1.0: "1.0",
        -0.0: "-0.0",
        0.1: "0.1",
        123456.789: "123456.789",
        1e15: "1000000000000000.0",
        1e16: "1e16",
        1.5e17: "1.5e17",
        0.0001: "0.0001",
        0.00001: "0.00001",
        1e-7: "1e-7",
        -2.5e-8: "-2.5e-8",
        3456789.125: "3456789.125",
    }
    assert {value: format_float(value) for value in cases} == cases


def test_choosing_the_shp_file(tmp_path: Path) -> None:
    write_cities(tmp_path / "src" / "north", "cities", [("Oslo", 10.7, 59.9)])
    write_cities(tmp_path / "src" / "south", "cities", [("Rome", 12.5, 41.9)])
    archive = zip_folder(tmp_path / "src", tmp_path / "two.zip")
    with pytest.raises(BadInputError) as err:
        convert(archive, tmp_path)
    assert str(err.value) == (
        f"{archive}: holds several .shp files; set read.subPath to one of: "
        "north/cities.shp, south/cities.shp"
    )
    assert convert(archive, tmp_path, "south/cities.shp")[0]["name"] == "Rome"
    assert convert(archive, tmp_path, "nor*/*.shp")[0]["name"] == "Oslo"
    with pytest.raises(BadInputError, match=r"read.subPath '\*/cities.shp' matches several"):
        convert(archive, tmp_path, "*/cities.shp")


def test_unsupported_shapes_and_fields_are_named(tmp_path: Path) -> None:
    with shapefile.Writer(str(tmp_path / "m"), shapeType=shapefile.POINT) as out:
        out.field("note", "M")
        out.point(0, 0)
        out.record("1")
    with pytest.raises(UnsupportedError, match="field note has dBase type M"):
        convert(tmp_path, tmp_path)


@pytest.mark.spark
async def test_polling_zips_first_nothing_new_then_new_data_and_verify(
    workspace: Workspace, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    zip_folder(
        write_cities(
            tmp_path / "a", "cities", [("Kyiv", 30.5, 50.45), ("Lviv", 24.03, 49.84)]
        ).parent,
        inbox / "2024-01.zip",
    )
    dataset = await create(
        workspace,
        f"""
kind: DatasetSnapshot
version: 1
content:
  name: cities
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: FilesGlob
        path: {inbox}/*.zip
      read:
        kind: EsriShapefile
        schema:
          fields:
            - name: name
              type: string
            - name: pop
              type: float64
            - name: geometry
              type: string
      merge:
        kind: Append
""",
    )
    [first] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 1), engines=TEST_ENGINES
    )
    assert first.num_records == 2
    [again] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 2), engines=TEST_ENGINES
    )
    assert again.up_to_date
    zip_folder(
        write_cities(tmp_path / "b", "cities", [("Odesa", 30.72, 46.48)]).parent,
        inbox / "2024-02.zip",
    )
    [second] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 3), engines=TEST_ENGINES
    )
    assert second.num_records == 1
    assert await rows(dataset, "offset", "name", "pop", "geometry") == [
        (0, "Kyiv", 4000.0, '{"type":"Point","coordinates":[30.5,50.45]}'),
        (1, "Lviv", 4000.0, '{"type":"Point","coordinates":[24.03,49.84]}'),
        (2, "Odesa", 5000.0, '{"type":"Point","coordinates":[30.72,46.48]}'),
    ]
    assert [e.new_source_state for e in await data_events(dataset)] == [
        SourceState(source_name="default", kind="odf/etag", value="2024-01.zip"),
        SourceState(source_name="default", kind="odf/etag", value="2024-02.zip"),
    ]
    report = await verify(workspace, ["cities"], VerifyOptions(), engines=TEST_ENGINES)
    assert report.exit_code == 0


@pytest.mark.spark
async def test_a_folder_pushed_with_inferred_columns(workspace: Workspace, tmp_path: Path) -> None:
    folder = write_cities(tmp_path / "upload", "cities", [("Kyiv", 30.5, 50.45)]).parent
    dataset = await create(workspace, root_snapshot("pushed", "kind: EsriShapefile"))
    outcome = await ingest_push(
        workspace, dataset, folder, event_time=Timestamp.of(2024, 1, 1), engines=TEST_ENGINES
    )
    assert outcome.num_records == 1
    assert await rows(dataset, "geometry", "name", "pop") == [
        ('{"type":"Point","coordinates":[30.5,50.45]}', "Kyiv", 4000.0)
    ]


@pytest.mark.spark
@pytest.mark.parametrize("broken", ["missing dbf", "subPath matches nothing"])
async def test_bad_shapefiles_fail_in_one_line_and_commit_nothing(
    workspace: Workspace, tmp_path: Path, broken: str
) -> None:
    folder = write_cities(tmp_path / "src", "cities", [("Kyiv", 30.5, 50.45)]).parent
    read = "kind: EsriShapefile"
    if broken == "missing dbf":
        (folder / "cities.dbf").unlink()
        expected = "cities.shp has no cities.dbf beside it"
    else:
        read += "\nsubPath: roads/*.shp"
        expected = "no .shp file matches read.subPath 'roads/*.shp' (.shp files: cities.shp)"
    archive = zip_folder(folder, tmp_path / "in.zip")
    dataset = await create(workspace, root_snapshot("bad", read))
    head = await dataset.chain.head()
    with pytest.raises(BadInputError) as err:
        await ingest_push(
            workspace, dataset, archive, event_time=Timestamp.of(2024, 1, 1), engines=TEST_ENGINES
        )
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert await dataset.chain.head() == head
