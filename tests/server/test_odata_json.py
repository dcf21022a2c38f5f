"""OData's verbose JSON on a running node: asked for with ``$format=json`` or an ``Accept``
header preferring ``application/json``; Atom otherwise (the reference's only format, still the
default, and what a client asking for OData 3's "JSON light" gets). The documents' shape and
values as [MS-ODATA]'s verbose JSON writes them."""

from __future__ import annotations

import json
import math
from typing import Any

import aiohttp
import numpy as np
import pyarrow as pa
import pytest

from odfd.server.odata import atom
from odfd.server.odata.verbose_json import json_values
from tests.server.odata_node import Served

JSON = "application/json;odata=verbose;charset=utf-8"
ATOM = "application/atom+xml;type=feed;charset=utf-8"


async def fetch(
    served: Served, path: str, accept: str | None = None, version: str | None = None
) -> tuple[str, Any]:
    headers = {} if accept is None else {"Accept": accept}
    if version is not None:
        headers["MaxDataServiceVersion"] = version
    async with aiohttp.ClientSession() as session:
        async with session.get(served.url + path, headers=headers) as response:
            assert response.status == 200, await response.text()
            kind = response.headers["Content-Type"]
            body = await response.text()
            return kind, json.loads(body) if kind == JSON else body


async def test_feed_entry_and_service_document(served: Served) -> None:
    kind, feed = await fetch(served, "/odata/foo.bar?$format=json&$top=2&$inlinecount=allpages")
    assert kind == JSON
    assert feed == {
        "d": {
            "results": [
                {
                    "__metadata": {
                        "uri": f"{served.url}/odata/foo.bar({offset})",
                        "type": "default.foo.bar",
                    },
                    "offset": str(offset),
                    "op": 0,
                    "system_time": "/Date(2524651200000+0000)/",
                    "date": "/Date(1577836800000+0000)/",
                    "city": city,
                    "population": str(population),
                }
                for offset, city, population in [(0, "A", "1000"), (1, "B", "2000")]
            ],
            "__count": "3",
        }
    }
    kind, entry = await fetch(served, "/odata/foo.bar(2)", "application/json")
    assert kind == JSON
    assert entry["d"]["__metadata"]["uri"] == f"{served.url}/odata/foo.bar(2)"
    assert entry["d"]["city"] == "C"
    kind, service = await fetch(served, "/odata/alice?$format=json")
    assert (kind, service) == (JSON, {"d": {"EntitySets": ["weather"]}})
    kind, service = await fetch(served, "/odata", "application/json")
    assert (kind, service) == (JSON, {"d": {"EntitySets": ["foo.bar"]}})  # not the private one
    kind, metadata = await fetch(served, "/odata/$metadata", "application/json")
    assert kind == "application/xml;charset=utf-8"  # CSDL has no JSON form in OData 2/3


async def test_nulls_dates_and_next_link(served: Served) -> None:
    _, feed = await fetch(
        served, "/odata/alice/weather?$select=station,temp,day", "application/json"
    )
    results = feed["d"]["results"]
    assert len(results) == 100
    assert feed["d"]["__next"] == (
        f"{served.url}/odata/alice/weather?$select=station,temp,day&$skip=100"
    )
    assert [(r["station"], r["temp"]) for r in results[1:3]] == [(None, -9.75), ("st-2", None)]
    assert results[0]["day"] == "/Date(1577836800000)/"  # Edm.DateTime: no offset
    assert "reading" not in results[0]  # a decimal is no property


@pytest.mark.parametrize(
    ("accept", "answered"),
    [
        (None, ATOM),
        ("*/*", ATOM),
        ("application/json", JSON),
        ("application/json;odata=verbose", JSON),
        ("application/atom+xml,application/json;q=0.5", ATOM),
        ("application/atom+xml;q=0.5,application/json", JSON),
        ("application/json;odata=minimalmetadata", ATOM),  # JSON light: not written here
        ("application/json;odata=verbose|3.0", JSON),
        ("application/json|2.0", JSON),
        ("application/json|3.0;NetFx", ATOM),  # to an OData 3 client, JSON light
    ],
)
async def test_accept_chooses_the_format(served: Served, accept: str | None, answered: str) -> None:
    media, _, version = (accept or "").partition("|")
    kind, _ = await fetch(served, "/odata/foo.bar?$top=1", media or None, version or None)
    assert kind == answered
    kind, _ = await fetch(served, "/odata/foo.bar?$top=1&$format=atom", "application/json")
    assert kind == ATOM  # $format wins over Accept


async def test_large_feed_is_streamed_in_pieces(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = "/odata/alice/weather?$top=150&$orderby=temp&$format=json"
    _, whole = await fetch(served, path)
    monkeypatch.setattr(atom, "PIECE_ROWS", 40)
    async with aiohttp.ClientSession() as session:
        async with session.get(served.url + path) as response:
            assert response.headers["Transfer-Encoding"] == "chunked"
            assert json.loads(await response.text()) == whole
    assert len(whole["d"]["results"]) == 150


def test_values() -> None:
    """Floats that JSON has no number for are [MS-ODATA]'s words; times are floored to the
    millisecond, before 1970 too; Int64 is a string, smaller integers numbers."""
    floats = pa.array([1.5, math.nan, math.inf, -math.inf, None], pa.float64())
    assert json_values(floats) == [1.5, "NaN", "INF", "-INF", None]
    singles = pa.array([1.1, math.nan, None], pa.float32())  # the digits Atom writes
    assert json.dumps(json_values(singles)) == '[1.1, "NaN", null]'
    halves = pa.array(np.array([0.5, -math.inf], np.float16))
    assert json.dumps(json_values(halves)) == '[0.5, "-INF"]'
    times = pa.array([-1, 1_999_999, None], pa.timestamp("ns"))
    assert json_values(times) == ["/Date(-1)/", "/Date(1)/", None]
    seconds = pa.array([-2], pa.timestamp("s", tz="UTC"))
    assert json_values(seconds) == ["/Date(-2000+0000)/"]
    assert json_values(pa.array([-1], pa.date32())) == ["/Date(-86400000)/"]
    assert json_values(pa.array([2**62], pa.int64())) == [str(2**62)]
    assert json_values(pa.array([7], pa.int16())) == [7]
