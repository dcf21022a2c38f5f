"""The reference's GraphQL API at ``/graphql``: what ``kamu search`` asks a node
(``search.query``) and the basics of datasets and accounts the kamu web UI reads first
(``docs/graphql.md`` lists what is served). It reads through the query API (its node, limits
and visibility: a private dataset does not exist for a caller without read access), so a server
serves it when it mounts the query API; it is not in ``/openapi.json``, as in the reference."""

from __future__ import annotations

from aiohttp import web

from odfd.app.dataset_details import SummaryCache
from odfd.server.graphql.documents import Documents
from odfd.server.graphql.routes import DOCUMENTS_KEY, SUMMARIES_KEY, handle


def add_routes(app: web.Application) -> None:
    app[SUMMARIES_KEY] = SummaryCache()
    app[DOCUMENTS_KEY] = Documents()
    app.router.add_post("/graphql", handle)
    app.router.add_get("/graphql", handle, allow_head=False)
