"""The node's HTTP query API, beside the transfer protocols on every odfd server: the
reference's ``/query``, ``/verify``, ``/{dataset}/tail``, ``/{dataset}/metadata``, ``/info``,
``/datasets/{id}``, ``/accounts/me``, and ``/openapi.json`` describing them; ``/system/health``;
and the reference's ``/platform/login``, ``/platform/token/validate`` and device login (``kamu
login``).

Handlers only translate: HTTP in, a call into ``odfd.app.answers`` or ``odfd.app.dataset_metadata``,
JSON out. Browsers may call the data routes from any origin (``cors``). Datasets are named as the
transfer routes name them (``name``, ``account/name``, a ``did:odf:``), private datasets exist
only for a read or admin token, and every client error is a 4xx with ``{"message": ...}``
(``errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from odfd.app import answers
from odfd.app.device_login import DeviceCodes
from odfd.server.query_api import cors, datasets, device, general, login_page, platform, query
from odfd.server.query_api.context import NODE_KEY
from odfd.server.query_api.device import DEVICE_CODES_KEY
from odfd.server.query_api.errors import json_errors
from odfd.server.query_api.platform import THROTTLE_KEY, LoginThrottle
from odfd.server.simple import DATASET
from odfd.server.state import SELF_JUDGED_KEY

if TYPE_CHECKING:
    from aiohttp import web

    from odfd.app.node import Node
    from odfd.server.app import Mount

ROOT_ROUTES = [
    ("GET", "/query", query.get_query),
    ("POST", "/query", query.post_query),
    ("POST", "/verify", query.post_verify),
    ("GET", "/info", general.info),
    ("GET", "/accounts/me", general.account),
    ("GET", "/datasets/{id}", datasets.dataset_info),
    ("GET", "/openapi.json", general.openapi),
]
PLATFORM_ROUTES = [
    ("POST", "/platform/login", platform.login),
    ("GET", platform.VALIDATE_PATH, platform.validate),
    ("POST", "/platform/token/device/authorization", device.authorization),
    ("POST", "/platform/token/device", device.token),
    ("GET", "/assets/runtime-config.json", device.runtime_config),
    ("GET", "/" + device.LOGIN_PAGE, login_page.show),
    ("POST", "/" + device.LOGIN_PAGE, login_page.submit),
]
"""The reference's login routes, its device login's included (``kamu login URL``: its front
end's runtime configuration and sign-in page are this server's); not in ``/openapi.json``, which
describes the data API."""
SYSTEM_ROUTES = [("GET", "/system/health", general.health)]
"""The reference's health check for container probes; not in ``/openapi.json`` (nor in the
reference's)."""
UNAVAILABLE_ROUTES = [("POST", "/sign/eip712", general.sign_eip712)]
"""The reference's routes odfd does not serve, answered as a reference node with the feature
switched off answers (501, ``{"message": …}``); not in ``/openapi.json``."""
DATASET_ROUTES = [
    ("GET", "tail", datasets.tail),
    ("GET", "metadata", datasets.metadata),
]
"""Routes under a dataset's path (``/{dataset}/<name>``); ``POST /{dataset}/ingest`` beside them is
``odfd.server.ingest_api``'s (its own mount; ``/openapi.json`` documents it too)."""


def query_api_mount(node: Node | Callable[[], Node]) -> Mount:
    """Mounts the query API over ``node`` on a server's app (``odfd.server.app.create_app``);
    a callable gives the node at each request (a daemon's reload swaps it)."""
    return lambda app: add_routes(app, node)


def add_routes(app: web.Application, node: Node | Callable[[], Node]) -> None:
    app[NODE_KEY] = node if callable(node) else lambda: node
    app[THROTTLE_KEY] = LoginThrottle()
    app[DEVICE_CODES_KEY] = DeviceCodes()
    app[SELF_JUDGED_KEY] = frozenset({platform.VALIDATE_PATH})
    for method, path, handler in [*PLATFORM_ROUTES, *SYSTEM_ROUTES, *UNAVAILABLE_ROUTES]:
        app.router.add_route(method, path, json_errors(handler))
    data_routes = [
        *ROOT_ROUTES,
        *((method, f"/{DATASET}/{name}", handler) for method, name, handler in DATASET_ROUTES),
    ]
    for method, path, answer in data_routes:
        route = app.router.add_route(method, path, json_errors(answer))
        assert route.resource is not None
        cors.allow(app, route.resource)
    app.on_startup.append(_warm_up)


async def _warm_up(app: web.Application) -> None:
    """Before the server listens: ``answers.warm_up`` (its imports in worker threads while
    nothing is served: loading a large extension holds the GIL, which a request being served
    would wait for), so the first query costs what any other does."""
    await answers.warm_up(app[NODE_KEY]())
