"""The reference's OData API (``/odata``): the service document, ``$metadata`` (CSDL, OData 3.0),
each dataset as an Atom feed (``/odata/{dataset}`` with ``$select``, ``$filter``, ``$orderby``,
``$skip``, ``$top``) and one entry by offset (``/odata/{dataset}({offset})``); datasets of an
account under ``/odata/{account}/...``. What Excel, Power BI and Tableau read as an "OData feed".

It reads through the query API (its node, limits and visibility: a private dataset does not
exist for a caller without read access), so a server serves it when it mounts the query API.
``docs/odata.md`` describes it."""

from __future__ import annotations

from aiohttp import web

from odfd.server.odata.routes import ROUTES, odata_errors


def add_routes(app: web.Application) -> None:
    for path, handler in ROUTES:
        app.router.add_get(path, odata_errors(handler), allow_head=False)
