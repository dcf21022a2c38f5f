"""What the query API's handlers share: the node, the server's state, and who may see what."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from odfd.app.answers import QueryLimits, limits_of
from odfd.server.state import STATE_KEY, ServerState

if TYPE_CHECKING:
    from odfd.app.answers import Visible
    from odfd.app.node import Node

NODE_KEY: web.AppKey[Callable[[], Node]] = web.AppKey("odfd_query_api_node")


def node(request: web.Request) -> Node:
    """The node as it is now (a daemon's reload swaps it: its key, its settings)."""
    return request.app[NODE_KEY]()


def state(request: web.Request) -> ServerState:
    return request.app[STATE_KEY]


def limits(request: web.Request) -> QueryLimits:
    return limits_of(state(request).config)


def visible(request: web.Request) -> Visible:
    """A dataset exists for this request unless it is private (and the request has no read
    token) or withheld by the daemon."""
    served = state(request)
    return lambda record: record.id not in served.withheld and served.visible(record, request)


def base_url(request: web.Request) -> str:
    """This server's URL as the client reaches it (``[server] base_url`` when set)."""
    return state(request).config.base_url or f"{request.url.origin()}/"
