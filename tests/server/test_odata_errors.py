"""OData's errors as an OData client reads them: the error document in the answer's format
(``<m:error>`` for Atom/XML, ``{"error": …}`` for verbose JSON) with the reference's statuses,
for a handler's refusal and for one made before any handler runs (a refused token, a method);
and the ``DataServiceVersion`` header on every OData answer."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import aiohttp

from tests.server.odata_node import Served

M = "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


async def ask(
    served: Served, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as session:
        async with session.request(method, served.url + path, headers=headers) as response:
            return response.status, dict(response.headers), await response.text()


def xml_error(body: str) -> tuple[str, str]:
    root = ET.fromstring(body)
    assert root.tag == f"{M}error"
    message = root.find(f"{M}message")
    assert message is not None and message.get(XML_LANG) == "en-US"
    return root.findtext(f"{M}code") or "", message.text or ""


async def test_errors_in_atom_requests_are_m_error_documents(served: Served) -> None:
    status, headers, body = await ask(served, "/odata/no.such")
    assert status == 404
    assert headers["Content-Type"].startswith("application/xml")
    assert headers["DataServiceVersion"] == "2.0"
    code, message = xml_error(body)
    assert code == "404" and "no.such" in message
    status, _, body = await ask(served, "/odata/foo.bar?$filter=city < 'b")
    assert status == 400
    assert "$filter" in xml_error(body)[1] and "< 'b" in xml_error(body)[1]  # XML's characters
    status, _, body = await ask(served, "/odata/foo.bar?$format=csv")
    assert status == 501 and "$format=csv" in xml_error(body)[1]


async def test_errors_in_verbose_json_requests_are_json_error_documents(served: Served) -> None:
    for path, accept in [
        ("/odata/no.such?$format=json", None),
        ("/odata/no.such", "application/json;odata=verbose"),
    ]:
        status, headers, body = await ask(
            served, path, headers=None if accept is None else {"Accept": accept}
        )
        assert status == 404
        assert headers["Content-Type"] == "application/json;odata=verbose;charset=utf-8"
        error = json.loads(body)["error"]
        assert error["code"] == "404"
        assert error["message"]["lang"] == "en-US" and "no.such" in error["message"]["value"]
    status, _, body = await ask(served, "/odata/foo.bar?$format=json&$skip=-1")
    assert status == 400 and "$skip" in json.loads(body)["error"]["message"]["value"]


async def test_refusals_before_the_handler_are_odata_errors(served: Served) -> None:
    """A token the node does not accept is refused in the reference's words, in OData's shape
    (with its ``WWW-Authenticate`` challenge); a method OData does not take, too (with
    ``Allow``)."""
    status, headers, body = await ask(
        served, "/odata/foo.bar", headers={"Authorization": "Bearer not-a-token"}
    )
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert xml_error(body) == ("401", "Authentication token invalid")
    status, headers, body = await ask(
        served,
        "/odata/foo.bar?$format=json",
        headers={"Authorization": "Bearer not-a-token"},
    )
    assert json.loads(body)["error"]["message"]["value"] == "Authentication token invalid"
    status, headers, body = await ask(served, "/odata/foo.bar", method="POST")
    assert status == 405 and "GET" in headers["Allow"]
    assert "POST is not allowed" in xml_error(body)[1]


async def test_every_answer_names_its_odata_version(served: Served) -> None:
    for path, version in [
        ("/odata", "2.0"),
        ("/odata/$metadata", "3.0"),
        ("/odata/foo.bar", "2.0"),
        ("/odata/foo.bar(0)", "2.0"),
        ("/odata/foo.bar?$format=json", "2.0"),
        ("/odata/foo.bar/$count", "2.0"),
        ("/odata/alice/weather", "2.0"),
    ]:
        status, headers, _ = await ask(served, path)
        assert status == 200, path
        assert headers["DataServiceVersion"] == version, path
