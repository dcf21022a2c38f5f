"""Cross-origin reads of the query API, as the reference's api-server allows them (its
``CorsLayer``: any origin, ``GET`` and ``POST``, any request header): a notebook or web page
served from elsewhere may call ``/query`` from the browser.

No credentials are involved: tokens travel in ``Authorization``, which a page must hold itself,
and ``Access-Control-Allow-Origin: *`` makes browsers refuse cookies; so allowing every origin
gives a page nothing it could not do with ``curl``. Only this API's routes say so (the console
and the transfer protocols are not for other origins)."""

from __future__ import annotations

from aiohttp import web

ROUTES_KEY = web.AppKey("query_api_cors_routes", set[web.AbstractResource])
ALLOWED_METHODS = "GET, POST"
MAX_AGE_SECONDS = "3600"


def allow(app: web.Application, resource: web.AbstractResource) -> None:
    """Answers cross-origin requests to ``resource``: its preflight (``OPTIONS``) and the
    ``Access-Control-Allow-Origin`` of each of its answers, errors included."""
    if ROUTES_KEY not in app:
        app[ROUTES_KEY] = set()
        app.on_response_prepare.append(_allow_origin)
    if resource not in app[ROUTES_KEY] and isinstance(resource, web.Resource):
        app[ROUTES_KEY].add(resource)
        resource.add_route("OPTIONS", preflight)


async def preflight(request: web.Request) -> web.Response:
    """The browser's question before a cross-origin ``POST`` with a JSON body or a token."""
    asked = request.headers.get("Access-Control-Request-Headers")
    headers = {
        "Access-Control-Allow-Methods": ALLOWED_METHODS,
        "Access-Control-Max-Age": MAX_AGE_SECONDS,
    }
    if asked:
        headers["Access-Control-Allow-Headers"] = asked  # any header, as the reference allows
    return web.Response(status=204, headers=headers)


async def _allow_origin(request: web.Request, response: web.StreamResponse) -> None:
    if request.match_info.route.resource in request.app[ROUTES_KEY]:
        response.headers["Access-Control-Allow-Origin"] = "*"
