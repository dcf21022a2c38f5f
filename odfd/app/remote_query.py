"""``odfd sql --remote URL QUERY``: a query answered by another node's query API (``POST
/query``), sent with the token ``odfd login`` kept for that node (or ``[sync.tokens]``), so a
private dataset there answers as it would to that account."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from odfd.errors import OdfdError
from odfd.sync.transport.url import node_url

if TYPE_CHECKING:
    import pyarrow as pa

    from odfd.app.node import Node

_CONNECT_TIMEOUT_SECONDS = 30.0


class RemoteQueryError(OdfdError):
    """The node refused the query or could not be asked."""


async def query_remote(node: Node, url: str, sql: str) -> pa.Table:
    """The rows the node at ``url`` answers ``sql`` with (DataFusion SQL there), as a table whose
    columns are in the answer's schema order."""
    import aiohttp
    import pyarrow as pa

    base = node_url(url)
    token = node.transport.token_for(base)
    body = {"query": sql, "dataFormat": "JsonAoS", "schemaFormat": "ArrowJson"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_CONNECT_TIMEOUT_SECONDS)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.post(base + "query", json=body, headers=headers) as reply,
        ):
            status, text = reply.status, await reply.text()
    except aiohttp.ClientError as err:
        raise RemoteQueryError(f"cannot ask {base}query: {err}") from None
    try:
        answer: Any = json.loads(text)
    except json.JSONDecodeError:
        answer = None
    if status != 200 or not isinstance(answer, dict) or "output" not in answer:
        message = answer.get("message") if isinstance(answer, dict) else text[:200]
        raise RemoteQueryError(f"{base}query answered {status}: {message}")
    output = answer["output"]
    rows: list[dict[str, Any]] = output.get("data") or []
    fields = (output.get("schema") or {}).get("fields") or []
    names = [str(f["name"]) for f in fields] or list(rows[0] if rows else [])
    return pa.table({name: [row.get(name) for row in rows] for name in names})
