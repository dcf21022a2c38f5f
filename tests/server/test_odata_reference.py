"""The OData API against the reference's own expectations (kamu-cli's
``src/adapter/odata/tests/tests/test_handlers.rs``): its ``foo.bar`` dataset served by a running
node gives the reference's service document, ``$metadata``, feed and entry byte for byte (its
host, ``example.com``, is this server's), with its content types; an unknown entry and a private
dataset are 404."""

from __future__ import annotations

import aiohttp

from tests.server.odata_node import READ_TOKEN, Served

ATOM = "application/atom+xml;type=feed;charset=utf-8"
XML = "application/xml;charset=utf-8"


async def get(served: Served, path: str, token: str | None = None) -> tuple[int, str, str]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session:
        async with session.get(served.url + path, headers=headers) as response:
            return response.status, response.headers.get("Content-Type", ""), await response.text()


def reference(text: str, served: Served) -> str:
    """The reference's expected text (one line per element there) with this server's host."""
    return "".join(text.strip().splitlines()).replace("http://example.com", served.url)


ENTRY_2 = """
<id>http://example.com/odata/foo.bar(2)</id>
<category scheme="http://schemas.microsoft.com/ado/2007/08/dataservices/scheme" term="default.foo.bar"/>
<link rel="edit" title="foo.bar" href="foo.bar(2)"/>
<title/>
<updated>2050-01-01T12:00:00.000Z</updated>
<author><name/></author>
<content type="application/xml">
<m:properties>
<d:offset m:type="Edm.Int64">2</d:offset>
<d:op m:type="Edm.Int32">0</d:op><d:system_time m:type="Edm.DateTimeOffset">2050-01-01T12:00:00.000Z</d:system_time>
<d:date m:type="Edm.DateTimeOffset">2020-01-01T00:00:00.000Z</d:date>
<d:city m:type="Edm.String">C</d:city><d:population m:type="Edm.Int64">3000</d:population>
</m:properties>
</content>
"""


async def test_service_document(served: Served) -> None:
    status, content_type, body = await get(served, "/odata")
    assert (status, content_type) == (200, XML)
    expected = """
<?xml version="1.0" encoding="utf-8"?>
<service xml:base="http://example.com/odata"
 xmlns="http://www.w3.org/2007/app"
 xmlns:atom="http://www.w3.org/2005/Atom">
<workspace>
<atom:title>default</atom:title>
<collection href="foo.bar">
<atom:title>foo.bar</atom:title>
</collection>
</workspace>
</service>
"""
    assert body == reference(expected, served)


async def test_metadata_document(served: Served) -> None:
    status, content_type, body = await get(served, "/odata/$metadata")
    assert (status, content_type) == (200, XML)
    expected = """
<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" Version="1.0">
<edmx:DataServices xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" m:DataServiceVersion="3.0" m:MaxDataServiceVersion="3.0">
<Schema Namespace="default" xmlns="http://schemas.microsoft.com/ado/2009/11/edm">
<EntityType Name="foo.bar">
<Key><PropertyRef Name="offset"/></Key>
<Property Name="offset" Type="Edm.Int64" Nullable="false"/>
<Property Name="op" Type="Edm.Int32" Nullable="false"/>
<Property Name="system_time" Type="Edm.DateTimeOffset" Nullable="false"/>
<Property Name="date" Type="Edm.DateTimeOffset" Nullable="false"/>
<Property Name="city" Type="Edm.String" Nullable="false"/>
<Property Name="population" Type="Edm.Int64" Nullable="false"/>
</EntityType>
<EntityContainer Name="default" m:IsDefaultEntityContainer="true">
<EntitySet Name="foo.bar" EntityType="default.foo.bar"/>
</EntityContainer>
</Schema>
</edmx:DataServices>
</edmx:Edmx>
"""
    assert body == reference(expected, served)


async def test_collection_feed(served: Served) -> None:
    status, content_type, body = await get(served, "/odata/foo.bar")
    assert (status, content_type) == (200, ATOM)
    entries = []
    for offset, city, population in [(0, "A", 1000), (1, "B", 2000)]:
        entries.append(
            ENTRY_2.replace("foo.bar(2)", f"foo.bar({offset})")
            .replace(">2</d:offset>", f">{offset}</d:offset>")
            .replace(">C<", f">{city}<")
            .replace(">3000<", f">{population}<")
        )
    entries.append(ENTRY_2)
    expected = (
        """
<?xml version="1.0" encoding="utf-8"?>
<feed xml:base="http://example.com/odata/"
 xmlns="http://www.w3.org/2005/Atom"
 xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"
 xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
<id>http://example.com/odata/foo.bar</id>
<title type="text">foo.bar</title>
<updated>2050-01-01T12:00:00.000Z</updated>
<link rel="self" title="foo.bar" href="foo.bar"/>
"""
        + "".join(f"<entry>{entry}</entry>" for entry in entries)
        + "</feed>"
    )
    assert body == reference(expected, served)


async def test_entry_by_key(served: Served) -> None:
    status, content_type, body = await get(served, "/odata/foo.bar(2)")
    assert (status, content_type) == (200, ATOM)
    expected = f"""
<?xml version="1.0" encoding="utf-8"?>
<entry xml:base="http://example.com/odata/"
 xmlns="http://www.w3.org/2005/Atom"
 xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"
 xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
{ENTRY_2.strip()}
</entry>
"""
    assert body == reference(expected, served)


async def test_entry_not_found(served: Served) -> None:
    status, _, body = await get(served, "/odata/foo.bar(99999)")
    assert status == 404
    assert "foo.bar(99999)" in body


async def test_private_dataset_is_not_found_without_read_access(served: Served) -> None:
    for path in ["/odata/secret.nums(1)", "/odata/secret.nums"]:
        status, _, body = await get(served, path)
        assert status == 404, path
        assert "secret.nums" in body
    _, _, listing = await get(served, "/odata")
    _, _, metadata = await get(served, "/odata/$metadata")
    assert "secret.nums" not in listing + metadata
    # With a read token it exists, as for the query API.
    status, _, body = await get(served, "/odata/secret.nums(1)", READ_TOKEN)
    assert status == 200
    assert '<d:value m:type="Edm.Int64">8</d:value>' in body
    _, _, listing = await get(served, "/odata", READ_TOKEN)
    assert '<collection href="secret.nums">' in listing
