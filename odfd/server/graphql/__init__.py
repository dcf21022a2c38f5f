"""The reference's GraphQL API at ``/graphql``: what ``kamu search`` asks a node
(``search.query``), the datasets and accounts the kamu web UI reads first, a dataset's overview
and lineage, and its sign-in (``auth``; ``docs/graphql.md`` lists what is served). It reads
through the query API (its node, limits and visibility: a private dataset does not exist for a
caller without read access), so a server serves it when it mounts the query API; it is not in
``/openapi.json``, as in the reference."""

from __future__ import annotations

from aiohttp import web

from odfd.app.dataset_details import SummaryCache
from odfd.server.graphql.documents import Documents
from odfd.server.graphql.routes import DOCUMENTS_KEY, SUMMARIES_KEY, handle

PATHS = ("/graphql", "//graphql")
"""kamu-cli appends ``graphql`` to a repository URL's path as a segment, so a repository URL
under a path ending in ``/`` (``odf+https://host/odfd/``) asks ``/odfd//graphql``; odfd serves at
the root only, and a reverse proxy that strips the prefix hands it ``//graphql``."""


def add_routes(app: web.Application) -> None:
    app[SUMMARIES_KEY] = SummaryCache()
    app[DOCUMENTS_KEY] = Documents()
    for path in PATHS:
        app.router.add_post(path, handle)
        app.router.add_get(path, handle, allow_head=False)
