"""A source node refusing a mirror's webhook subscription: its words, not its JSON, in the error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from odfd.app.mirror_subscriptions import SubscriptionError, _apply, _delete


async def _refuse(request: web.Request) -> web.Response:
    return web.json_response({"message": "Authentication token invalid"}, status=401)


async def _refuse_in_text(request: web.Request) -> web.Response:
    return web.Response(text="an older node's words\n", status=403)


@pytest.mark.parametrize(
    ("handler", "words"),
    [
        (_refuse, "401: Authentication token invalid"),
        (_refuse_in_text, "403: an older node's words"),
    ],
)
async def test_a_refusal_names_the_source_nodes_words(
    handler: Callable[[web.Request], Awaitable[web.Response]], words: str
) -> None:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession(str(server.make_url("/"))) as client,
    ):
        for call in (_delete(client, "/flow/v1alpha1/flow/x"), _apply(client, "/flow", {})):
            with pytest.raises(SubscriptionError) as raised:
                await call
            assert str(raised.value) == f"the source node answered {words}"
