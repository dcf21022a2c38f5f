"""OData's error document and version header, so an OData client (Excel, Power BI, pyodata)
shows the node's reason instead of a bare status: ``{"error": {"code": …, "message": {"lang":
"en-US", "value": …}}}`` for a request answered in verbose JSON, ``<m:error>`` for one answered
in Atom/XML. The statuses and messages are the reference's (its OData adapter answers the same
cases 400, 404 and 501, though in its generic ``{"message"}`` body, and no version header).

Every OData answer names its protocol version (``DataServiceVersion``): 3.0 for ``$metadata``
(the version its document declares, as the reference's), 2.0 for the rest (feeds with next
links, ``$inlinecount``, verbose JSON's ``results`` and ``$count`` are OData 2)."""

from __future__ import annotations

import json
from xml.sax.saxutils import escape

from aiohttp import web

from odfd.app.odata_query import UnsupportedODataError
from odfd.server.odata.formats import wants_json

VERSION_HEADER = "DataServiceVersion"
DATA_VERSION = "2.0"
METADATA_VERSION = "3.0"
MEDIA_TYPE_XML = "application/xml;charset=utf-8"
MEDIA_TYPE_JSON = "application/json;odata=verbose;charset=utf-8"
_METADATA_NS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"


def is_odata(path: str) -> bool:
    return path == "/odata" or path.startswith("/odata/")


def error_document(request: web.Request, status: int, message: str) -> tuple[str, str]:
    """The body and content type of an error answered in the request's format (XML when the
    format itself is what is wrong: an unknown ``$format``)."""
    code = str(status)
    try:
        json_wanted = wants_json(request.query, request.headers)
    except UnsupportedODataError:
        json_wanted = False
    if json_wanted:
        body = {"error": {"code": code, "message": {"lang": "en-US", "value": message}}}
        return json.dumps(body), MEDIA_TYPE_JSON
    xml = (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<m:error xmlns:m="{_METADATA_NS}"><m:code>{code}</m:code>'
        f'<m:message xml:lang="en-US">{escape(message)}</m:message></m:error>'
    )
    return xml, MEDIA_TYPE_XML


def error_response(request: web.Request, status: int, message: str) -> web.Response:
    body, content_type = error_document(request, status, message)
    return web.Response(
        status=status,
        body=body.encode(),
        headers={"Content-Type": content_type, VERSION_HEADER: DATA_VERSION},
    )


def reshape(request: web.Request, error: web.HTTPException, message: str) -> None:
    """``error`` (raised before an OData handler ran: a refused token, a method) answered as
    OData's error, in place (its other headers, ``Allow`` or ``WWW-Authenticate``, stay)."""
    body, content_type = error_document(request, error.status, message)
    error.text = body
    error.headers["Content-Type"] = content_type
    error.headers[VERSION_HEADER] = DATA_VERSION
