"""A node's datasets read through its GraphQL search (``POST <base>/graphql``, the
``search.query`` kamu-cli's remote search asks, page by page): what ``odfd search`` reads of an
``http(s)://`` / ``odf+http(s)://`` repository that has a GraphQL API (an odfd node, a kamu
node), before the odfd JSON listing at ``/`` of a node without one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odfd.sync.errors import SyncError
from odfd.sync.transport.base import Listed

if TYPE_CHECKING:
    import aiohttp

SEARCH = """
query OdfdSearch($page: Int!) {
  search {
    query(query: "", page: $page, perPage: 100) {
      nodes { ... on Dataset { id name alias owner { accountName } kind } }
      pageInfo { hasNextPage }
    }
  }
}
"""
"""Every dataset the token may read (an empty text matches all): ``odfd search`` matches names
itself, as it does over every kind of repository."""
NO_GRAPHQL = frozenset({404, 405, 501})
"""Answers of a node that does not serve GraphQL."""
MAX_PAGES = 10_000
"""A bound on pages, so a node that always says another page follows cannot loop us forever."""


async def graphql_listing(
    session: aiohttp.ClientSession, base: str, headers: dict[str, str] | None
) -> list[Listed] | None:
    """The datasets the node at ``base`` (ending in ``/``) lists through ``/graphql``; ``None``
    when it has no GraphQL API. Raises ``SyncError`` when it has one that refuses the search."""
    found: list[Listed] = []
    for page in range(MAX_PAGES):
        body = {"query": SEARCH, "variables": {"page": page}}
        async with session.post(f"{base}graphql", json=body, headers=headers) as response:
            if response.status in NO_GRAPHQL:
                return None
            try:
                document = await response.json(content_type=None)
            except ValueError:
                if page == 0:
                    return None  # whatever answers there, it is not GraphQL
                raise
            if response.status != 200:
                raise SyncError(f"{base}graphql: HTTP {response.status}: {_message(document)}")
        results = _search_results(base, document)
        found += [_listed(base, node) for node in results.get("nodes", []) if node]
        if not results.get("pageInfo", {}).get("hasNextPage"):
            return found
    raise SyncError(f"{base}graphql: the search has more than {MAX_PAGES} pages")


def _search_results(base: str, document: Any) -> dict[str, Any]:
    data = document.get("data") if isinstance(document, dict) else None
    results = ((data or {}).get("search") or {}).get("query")
    if not isinstance(results, dict):
        raise SyncError(f"{base}graphql: the search failed: {_message(document)}")
    return results


def _listed(base: str, node: dict[str, Any]) -> Listed:
    alias = str(node.get("alias") or node["name"])
    kind = node.get("kind")
    kind_name = kind.capitalize() if isinstance(kind, str) else None
    return Listed(alias, kind_name, f"{base}{alias}/")


def _message(document: Any) -> str:
    """The answer's error messages (GraphQL's ``errors``, or the node's ``message``)."""
    if isinstance(document, dict):
        errors = document.get("errors")
        if isinstance(errors, list) and errors:
            return "; ".join(str(e.get("message", e)) for e in errors if isinstance(e, dict))
        if "message" in document:
            return str(document["message"])
    return "not a GraphQL answer"
