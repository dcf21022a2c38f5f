"""SAP's ``pyodata``, unchanged, reads a running node's OData API: it reads ``$metadata``,
asks for ``Accept: application/json`` and parses OData 2's verbose JSON, which the node answers
with (Atom stays the default). Listing the entity sets, reading a collection whole (following
``__next`` links), ``$filter``/``$top``/``$skip``/``$select``/``$orderby``, ``$count`` and one
entry by key, on the datasets of an account, checked against the same rows in Python."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyodata
import pytest
import requests
from pyodata.v2.model import Config

from tests.server.odata_node import Served, serve, weather

ROWS = weather().to_pylist()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("odata-pyodata")) / "ws")


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[Any]:
    with requests.Session() as session:
        yield pyodata.Client(f"{served.url}/odata/alice/", session, config=Config(retain_null=True))


def expected(row: dict[str, Any]) -> dict[str, Any]:
    """A weather row as pyodata reads it: the decimal column is no property, times are UTC
    datetimes (Edm.DateTimeOffset), dates midnight datetimes (Edm.DateTime)."""
    day = row["day"]
    return {
        **{name: row[name] for name in ("offset", "op", "station", "temp", "ok")},
        "system_time": row["system_time"],
        "event_time": row["event_time"],
        "day": dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC),
    }


def read(entity: Any, names: list[str]) -> dict[str, Any]:
    return {name: getattr(entity, name) for name in names}


NAMES = ["offset", "op", "system_time", "event_time", "station", "temp", "ok", "day"]


def test_entity_sets_and_types(client: Any) -> None:
    sets = {entity_set.name for entity_set in client.schema.entity_sets}
    assert sets == {"weather"}  # alice/empty has no schema yet
    properties = client.schema.entity_type("weather").proprties()
    assert [prop.name for prop in properties] == NAMES
    assert [prop.name for prop in client.schema.entity_type("weather").key_proprties] == ["offset"]


def test_whole_collection_follows_next_links(client: Any) -> None:
    """pyodata reads the first page and follows ``__next`` for the rest."""
    found: list[dict[str, Any]] = []
    request: Any = client.entity_sets.weather.get_entities()
    while True:
        page = request.execute()
        found.extend(read(entity, NAMES) for entity in page)
        if page.next_url is None:
            break
        request = client.entity_sets.weather.get_entities().next_url(page.next_url)
    assert len(found) == len(ROWS) == 150
    assert found == [expected(row) for row in ROWS]
    assert found[0]["system_time"] == dt.datetime(2050, 1, 1, 12, tzinfo=dt.UTC)


def test_query_options(client: Any) -> None:
    entities = (
        client.entity_sets.weather.get_entities()
        .filter("temp gt 0 and station ne null")
        .order_by("temp desc")
        .skip(2)
        .top(5)
        .select("offset,temp")
        .execute()
    )
    matching = [r for r in ROWS if r["temp"] is not None and r["temp"] > 0 and r["station"]]
    matching.sort(key=lambda r: -r["temp"])
    assert [(e.offset, e.temp) for e in entities] == [
        (r["offset"], r["temp"]) for r in matching[2:7]
    ]
    # pyodata's own filter builder writes Int64 literals with their L suffix.
    request = client.entity_sets.weather.get_entities()
    by_kwargs = request.filter(request.offset < 3).execute()
    assert [read(e, NAMES) for e in by_kwargs] == [expected(r) for r in ROWS[:3]]
    assert client.entity_sets.weather.get_entities().filter("ok eq true").count().execute() == 75
    inline = client.entity_sets.weather.get_entities().filter("ok eq true").top(2)
    page = inline.count(inline=True).execute()  # $inlinecount=allpages: "__count"
    assert (page.total_count, [e.offset for e in page]) == (75, [0, 2])


def test_entry_by_key_and_nulls(client: Any) -> None:
    for offset in (1, 2, 149):  # a null station, a null temp, the last entry
        entity = client.entity_sets.weather.get_entity(offset).execute()
        assert read(entity, NAMES) == expected(ROWS[offset])
    assert client.entity_sets.weather.get_entity(1).execute().station is None
