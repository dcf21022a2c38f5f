"""``odfd sql --remote URL QUERY``: a query answered by another node's query API (``POST
/query``), sent with the token ``odfd login`` kept for that node (or ``[sync.tokens]``), so a
private dataset there answers as it would to that account.

A failure says what the user can do about it: a URL that is no HTTP node, a node that cannot be
reached, a token it refuses (log in again), a URL with no query API behind it (the node's root
URL is wanted), and a table the node does not know: ``did you mean "match.scores"?`` when the
node's dataset listing (``GET /``, odfd's) has that alias, and a reminder to log in when no token
was sent (a private dataset exists only for a token that may read it)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfd.app.query import has_table_hint, table_hint, unknown_table
from odfd.errors import OdfdError
from odfd.sync.errors import UnsupportedUrlError
from odfd.sync.transport.http_errors import cannot_reach
from odfd.sync.transport.url import node_url
from storage.errors import WorkspaceError

if TYPE_CHECKING:
    import aiohttp
    import pyarrow as pa

    from odfd.app.node import Node

_CONNECT_TIMEOUT_SECONDS = 30.0


class RemoteQueryError(OdfdError):
    """The node refused the query or could not be asked."""


async def query_remote(node: Node | None, url: str, sql: str) -> pa.Table:
    """The rows the node at ``url`` answers ``sql`` with (DataFusion SQL there), as a table whose
    columns are in the answer's schema order; asked with the token ``node`` keeps for it (none
    without a local node: what anyone may read there)."""
    import aiohttp

    from odfd.app.answer_tables import answer_table

    base = query_api_url(url)
    token = None if node is None else node.transport.token_for(base)
    body = {"query": sql, "dataFormat": "JsonAoS", "schemaFormat": "OdfJson"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as http:
        try:
            async with http.post(base + "query", json=body) as reply:
                status, text = reply.status, await reply.text()
        except aiohttp.ClientConnectorError as err:
            raise RemoteQueryError(cannot_reach(base, err)) from None
        except aiohttp.ClientError as err:
            raise RemoteQueryError(f"cannot ask {base}query: {err}") from None
        answer = _json(text)
        if status == 200 and isinstance(answer, dict) and isinstance(answer.get("output"), dict):
            return answer_table(answer["output"])
        message = _message(answer, text)
        if status in (404, 405) and not isinstance(answer, dict):
            raise RemoteQueryError(
                f"{base} has no query API ({status} {message}): give the URL the node is "
                "served at (its root, e.g. http://node:8080/), not a dataset's"
            )
        if status == 400 and unknown_table(message) is not None and not has_table_hint(message):
            message += await _unknown_table_hint(http, base, message, sent_token=bool(token))
    raise RemoteQueryError(_refusal(base, status, message, sent_token=bool(token)))


def workspace_found(root: Path | None) -> bool:
    """Whether a workspace is named (``--root``, ``$ODFD_HOME``) or encloses the current folder:
    without one, a remote query is still asked (anonymously) rather than refused."""
    from storage.layout import WORKSPACE_ENV, existing_layout

    if root is not None or os.environ.get(WORKSPACE_ENV):
        return True  # named: a missing one is reported as every command reports it
    try:
        existing_layout(None)
    except WorkspaceError:
        return False
    return True


def query_api_url(url: str) -> str:
    """The root URL of the node at ``url``, whose query API is asked (``node_url``);
    ``RemoteQueryError`` naming the URL wanted when ``url`` is no HTTP node's."""
    try:
        return node_url(url)
    except UnsupportedUrlError:
        raise RemoteQueryError(
            f"{url}: a remote query goes to a node's query API, at its http(s):// URL "
            "(e.g. http://node:8080/)"
        ) from None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _message(answer: Any, text: str) -> str:
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        return str(answer["message"])
    return " ".join(text.split())[:200]


def _refusal(base: str, status: int, message: str, *, sent_token: bool) -> str:
    """The error for a query ``base`` answered with ``status`` and ``message``."""
    said = f"{base}query answered {status}: {message}"
    if status == 401 and sent_token:
        return f"{said}; the token kept for {base} is refused: log in again (`odfd login {base}`)"
    if status == 401:
        return f"{said}; log in first (`odfd login {base}`)"
    return said


async def _unknown_table_hint(
    http: aiohttp.ClientSession, base: str, message: str, *, sent_token: bool
) -> str:
    """What to add to the node's "table not found": the alias meant, when the node lists it
    (odfd's ``GET /``; a node without that listing gives none), else why it may be missing."""
    import aiohttp

    try:
        async with http.get(base, headers={"Accept": "application/json"}) as reply:
            listing = _json(await reply.text()) if reply.status == 200 else None
    except aiohttp.ClientError:
        listing = None
    entries = listing.get("datasets") if isinstance(listing, dict) else None
    aliases = [e["alias"] for e in entries or () if isinstance(e, dict) and "alias" in e]
    hint = table_hint(message, [str(alias) for alias in aliases])
    if hint is not None:
        return f"; {hint}"
    if not sent_token:
        return f"; no token was sent: a private dataset there needs `odfd login {base}` first"
    return ""
