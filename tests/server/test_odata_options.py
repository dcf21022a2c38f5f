"""The OData API beyond the reference's pinned cases, on a running node read with aiohttp and
an XML parser: the services of an account, ``$metadata`` types (a decimal left out, nullable
fields), the collection options (``$select``, ``$filter``, ``$orderby``, ``$skip``, ``$top``)
checked against the same rows selected in Python, nulls, and bad input answered with a status and
a message naming the problem."""

from __future__ import annotations

import dataclasses
import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from odfd.server.odata import atom
from tests.server.odata_node import SERVER, Served, serve, weather
from tests.server.test_odata_reference import get

ATOM = "{http://www.w3.org/2005/Atom}"
D = "{http://schemas.microsoft.com/ado/2007/08/dataservices}"
M = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
EDM = "{http://schemas.microsoft.com/ado/2009/11/edm}"
APP = "{http://www.w3.org/2007/app}"
ROWS = weather().to_pylist()


def entries(body: str) -> list[dict[str, Any]]:
    """Each entry's properties as Python values (by their ``m:type``), with its key as ``_id``."""
    root = ET.fromstring(body)
    found = root.findall(f"{ATOM}entry") if root.tag == f"{ATOM}feed" else [root]
    rows = []
    for entry in found:
        row: dict[str, Any] = {"_id": entry.findtext(f"{ATOM}id")}
        for prop in entry.find(f"{ATOM}content/{M}properties") or []:
            name = prop.tag.removeprefix(D)
            row[name] = _value(prop.get(f"{M}type", ""), prop.text, prop.get(f"{M}null"))
        rows.append(row)
    return rows


def _value(typ: str, text: str | None, null: str | None) -> Any:
    if null == "true":
        return None
    assert text is not None
    if typ in ("Edm.Int16", "Edm.Int32", "Edm.Int64"):
        return int(text)
    if typ == "Edm.Double":
        return float(text)
    if typ == "Edm.Boolean":
        return {"true": True, "false": False}[text]
    if typ == "Edm.DateTime":
        return dt.date.fromisoformat(text.removesuffix("T00:00"))
    if typ == "Edm.DateTimeOffset":
        return dt.datetime.fromisoformat(text)
    return text


async def feed(served: Served, query: str) -> list[dict[str, Any]]:
    status, _, body = await get(served, f"/odata/alice/weather?{query}")
    assert status == 200, body
    return entries(body)


async def test_account_service_and_metadata(served: Served) -> None:
    for path in ["/odata/alice", "/odata/alice/"]:
        status, _, body = await get(served, path)
        assert status == 200
        root = ET.fromstring(body)
        assert root.get("{http://www.w3.org/XML/1998/namespace}base") == f"{served.url}/odata/alice"
        # alice/empty has no schema yet: no collection to describe.
        assert [c.get("href") for c in root.iter(f"{APP}collection")] == ["weather"]
    status, _, body = await get(served, "/odata/alice/$metadata")
    assert status == 200
    (entity,) = ET.fromstring(body).iter(f"{EDM}EntityType")
    assert entity.get("Name") == "weather"
    key = entity.find(f"{EDM}Key/{EDM}PropertyRef")
    assert key is not None and key.get("Name") == "offset"
    types = {
        p.get("Name"): (p.get("Type"), p.get("Nullable")) for p in entity.iter(f"{EDM}Property")
    }
    assert types == {
        "offset": ("Edm.Int64", "true"),
        "op": ("Edm.Int32", "true"),
        "system_time": ("Edm.DateTimeOffset", "true"),
        "event_time": ("Edm.DateTimeOffset", "true"),
        "station": ("Edm.String", "true"),
        "temp": ("Edm.Double", "true"),
        "ok": ("Edm.Boolean", "true"),
        "day": ("Edm.DateTime", "true"),
    }  # the decimal "reading" has no Edm type here, as in the reference: left out


async def test_default_page_and_values(served: Served) -> None:
    rows = await feed(served, "")
    assert len(rows) == 100  # the reference's default page
    assert [row["offset"] for row in rows] == list(range(100))
    for row, expected in zip(rows, ROWS, strict=False):
        assert row["_id"] == f"{served.url}/odata/alice/weather({expected['offset']})"
        assert row["station"] == expected["station"]
        assert row["temp"] == expected["temp"]
        assert row["ok"] == expected["ok"]
        assert row["day"] == expected["day"]
        assert row["event_time"] == expected["event_time"]
        assert "reading" not in row


async def test_select_top_skip_orderby(served: Served) -> None:
    rows = await feed(served, "$select=temp,station&$orderby=temp desc&$skip=3&$top=5")
    ordered = sorted(ROWS, key=lambda r: (r["temp"] is not None, r["temp"] or 0), reverse=True)
    # NULLS FIRST in both directions, as the reference sorts
    ordered = [r for r in ROWS if r["temp"] is None] + [r for r in ordered if r["temp"] is not None]
    assert [set(row) for row in rows] == [{"_id", "temp", "station"}] * 5
    assert [row["temp"] for row in rows] == [r["temp"] for r in ordered[3:8]]
    assert [row["_id"].rsplit("(")[1] for row in rows] == [f"{r['offset']})" for r in ordered[3:8]]
    rows = await feed(served, "$orderby=station,offset desc&$top=4&$select=station,offset")
    assert [(r["station"], r["offset"]) for r in rows] == [
        (None, 1),
        ("st-0", 147),
        ("st-0", 144),
        ("st-0", 141),
    ]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (
            "temp gt 20 and ok eq true",
            lambda r: r["temp"] is not None and r["temp"] > 20 and r["ok"],
        ),
        ("station eq 'st-1' or offset lt 3", lambda r: r["station"] == "st-1" or r["offset"] < 3),
        ("not (offset ge 5)", lambda r: r["offset"] < 5),
        ("offset in (4, 8, 15)", lambda r: r["offset"] in (4, 8, 15)),
        ("temp eq null", lambda r: r["temp"] is None),
        (
            "station ne null and offset le 4",
            lambda r: r["station"] is not None and r["offset"] <= 4,
        ),
        ("temp eq -9.5", lambda r: r["temp"] == -9.5),
        (
            "event_time ge datetime'2050-01-01T11:59:57' and event_time lt 2050-01-01T12:00:00Z",
            lambda r: 1 <= r["offset"] <= 3,
        ),
        ("day le 2020-01-03", lambda r: r["day"] <= dt.date(2020, 1, 3)),
        ("offset eq 7L", lambda r: r["offset"] == 7),
    ],
)
async def test_filter(served: Served, condition: str, expected: Any) -> None:
    rows = await feed(served, f"$filter={condition}&$top=1000&$select=offset")
    assert [row["offset"] for row in rows] == [r["offset"] for r in ROWS if expected(r)]


async def test_string_literal_quotes(served: Served) -> None:
    assert await feed(served, "$filter=station eq 'it''s' or station eq '\"'") == []


async def test_entry_keys(served: Served) -> None:
    for key in ["7", "7L", "offset=7"]:
        status, _, body = await get(served, f"/odata/alice/weather({key})?$select=temp")
        assert status == 200, key
        assert entries(body) == [{"_id": f"{served.url}/odata/alice/weather(7)", "temp": -8.25}]


@pytest.mark.parametrize(
    ("path", "status", "named"),
    [
        ("/odata/nothing", 404, "nothing"),
        ("/odata/alice/nothing", 404, "nothing"),
        ("/odata/bob/$metadata", 200, "EntityContainer"),
        ("/odata/alice/empty", 404, "empty has no data"),
        ("/odata/alice/weather('x')", 400, "'x'"),
        ("/odata/alice/weather(9999)", 404, "weather(9999)"),
        ("/odata/alice/weather?$expand=x", 501, "$expand"),
        ("/odata/alice/weather?$inlinecount=some", 400, "$inlinecount=some"),
        ("/odata/alice/weather?$skiptoken=x", 501, "$skiptoken"),
        ("/odata/alice/empty/$count", 404, "empty has no data"),
        ("/odata/alice/nothing/$count", 404, "nothing"),
        ("/odata/alice/weather?$format=jsonlight", 501, "$format=jsonlight"),
        ("/odata/alice/weather?$top=abc", 400, "$top=abc"),
        ("/odata/alice/weather?$skip=-1", 400, "$skip=-1"),
        ("/odata/alice/weather?$top=1001", 400, "$top=1001"),
        ("/odata/alice/weather?$select=nope", 400, "'nope'"),
        ("/odata/alice/weather?$orderby=nope", 400, "'nope'"),
        ("/odata/alice/weather?$orderby=temp sideways", 400, "temp sideways"),
        ("/odata/alice/weather?$filter=nope eq 1", 400, "'nope'"),
        ("/odata/alice/weather?$filter=substringof('a', station)", 501, "substringof"),
        ("/odata/alice/weather?$filter=offset add 1 eq 2", 501, "arithmetic"),
        ("/odata/alice/weather?$filter=offset eq", 400, "the end"),
        ("/odata/alice/weather?$filter=offset eq 1)", 400, "')'"),
        ("/odata/alice/weather?$filter=offset ~ 1", 400, "'~ 1'"),
        ("/odata/alice/weather?$filter=day eq datetime'2020-13-01'", 400, "2020-13-01"),
        ("/odata/alice/weather?$filter=station eq 1", 400, "over weather: the query failed"),
    ],
)
async def test_bad_input_is_named(served: Served, path: str, status: int, named: str) -> None:
    got, _, body = await get(served, path)
    assert got == status, body
    assert named in body


async def test_custom_options_are_ignored(served: Served) -> None:
    rows = await feed(served, "$top=2&$format=atom&client=excel")
    assert [row["offset"] for row in rows] == [0, 1]


async def offsets_by_page(served: Served, path: str) -> list[list[int]]:
    """The offsets of each page read from ``path`` on, following ``next`` links to the end."""
    url: str | None = served.url + path
    pages = []
    while url is not None:
        status, _, body = await get(served, url.removeprefix(served.url))
        assert status == 200, body
        pages.append([row["offset"] for row in entries(body)])
        link = ET.fromstring(body).find(f"{ATOM}link[@rel='next']")
        url = None if link is None else link.get("href")
    return pages


async def test_next_links_page_through_the_collection(served: Served) -> None:
    """Without ``$top`` the node pages (100 entries) and links the next page, keeping the other
    options, until the last page, as a client following ``next`` links reads it."""
    pages = await offsets_by_page(
        served, "/odata/alice/weather?$filter=offset ge 10&$select=offset"
    )
    assert [len(page) for page in pages] == [100, 40]
    assert sum(pages, []) == list(range(10, 150))
    _, _, body = await get(served, "/odata/alice/weather?$top=100")
    assert ET.fromstring(body).find(f"{ATOM}link[@rel='next']") is None  # the client's page size


async def test_large_feed_is_streamed_in_pieces(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A feed of more entries than a piece is sent chunked, piece by piece, and is the same
    document as when it is sent whole."""
    path = "/odata/alice/weather?$top=150&$orderby=temp"
    async with aiohttp.ClientSession() as session:
        async with session.get(served.url + path) as response:
            whole_headers, whole = response.headers, await response.text()
        monkeypatch.setattr(atom, "PIECE_ROWS", 40)
        async with session.get(served.url + path) as response:
            pieces_headers, pieces = response.headers, await response.text()
    assert "Transfer-Encoding" not in whole_headers
    assert pieces_headers["Transfer-Encoding"] == "chunked"
    assert pieces_headers["Content-Type"] == whole_headers["Content-Type"]
    assert pieces == whole
    assert len(entries(pieces)) == 150


async def test_names_are_case_insensitive_and_trailing_slashes_taken(served: Served) -> None:
    for path in ["/odata/ALICE/Weather(7)", "/odata/alice/weather(7)/"]:
        status, _, body = await get(served, path)
        assert status == 200, path
        assert entries(body)[0]["offset"] == 7
        assert "weather(7)</id>" in body  # the dataset's own name, whatever the case asked
    status, _, body = await get(served, "/odata/alice/$metadata/")
    assert status == 200
    assert '<EntityType Name="weather">' in body
    status, _, body = await get(served, "/odata/FOO.BAR(1)")
    assert status == 200
    assert f"<id>{served.url}/odata/foo.bar(1)</id>" in body


async def test_counts(served: Served) -> None:
    """``$inlinecount=allpages`` puts the number ``$filter`` matches in the feed (whatever the
    page), and ``/$count`` answers it as text, after ``$skip`` and ``$top``."""
    matching = sum(1 for r in ROWS if r["temp"] is not None and r["temp"] > 0)
    path = "/odata/alice/weather?$filter=temp gt 0&$inlinecount=allpages&$top=3&$select=temp"
    status, _, body = await get(served, path)
    assert status == 200
    assert ET.fromstring(body).findtext(f"{M}count") == str(matching)
    assert len(entries(body)) == 3
    _, _, body = await get(served, "/odata/alice/weather?$inlinecount=none&$top=1")
    assert ET.fromstring(body).find(f"{M}count") is None
    for query, expected in [
        ("", matching),
        ("&$skip=5", matching - 5),
        ("&$skip=5&$top=7", 7),
        (f"&$skip={matching + 1}", 0),
    ]:
        status, content_type, body = await get(
            served, f"/odata/alice/weather/$count?$filter=temp gt 0{query}"
        )
        assert (status, content_type, body) == (200, "text/plain;charset=utf-8", str(expected))
    status, _, body = await get(served, "/odata/foo.bar/$count")
    assert (status, body) == (200, "3")


async def test_unknown_property_errors_name_only_odata_properties(served: Served) -> None:
    """An unknown property's error lists the entity's properties as ``$metadata`` shows them:
    the decimal column, which OData is not given, is no property there, nor in the options,
    whose error says why a column the dataset has is not there (its type, not a typo)."""
    for option in ["$filter=nope eq 1", "$select=nope", "$orderby=nope"]:
        status, _, body = await get(served, f"/odata/alice/weather?{option}")
        assert status == 400, body
        assert "offset, op, system_time, event_time, station, temp, ok, day)" in body
        assert "reading" not in body
    for path in [
        "/odata/alice/weather?$filter=reading eq 1",
        "/odata/alice/weather?$select=reading",
        "/odata/alice/weather?$orderby=reading desc",
        "/odata/alice/weather/$count?$filter=reading gt 1",
    ]:
        status, _, body = await get(served, path)
        assert status == 400, body
        option = path.split("?")[1].split("=")[0]
        assert f"{option}: column 'reading' (decimal128(10, 2)) has no OData 3.0 type, so " in body
        assert "the entity has offset, op, system_time, event_time, station, temp, ok, day;" in body


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The same node with a row cap below the default page of 100 entries."""
    server = dataclasses.replace(SERVER, query_max_rows=40)
    yield from serve(Path(tmp_path_factory.mktemp("odata-capped")) / "ws", server)


async def test_next_links_under_a_row_cap_below_the_page(capped: Served) -> None:
    """With ``[server] query_max_rows`` below 100 a page holds the cap's number of entries and
    still links the next, so a client following ``next`` reads the whole collection."""
    pages = await offsets_by_page(capped, "/odata/alice/weather?$select=offset")
    assert [len(page) for page in pages] == [40, 40, 40, 30]
    assert sum(pages, []) == list(range(150))
    status, _, body = await get(capped, "/odata/alice/weather?$top=41")
    assert status == 400 and "$top=41" in body
