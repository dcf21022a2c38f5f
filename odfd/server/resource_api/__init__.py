"""The resource protocol (RFC-018 "REST API strategy") on every odfd server: resources listed,
got (by id, DID or name), applied and deleted over HTTP under ``/<context>/<version>/<type>``,
with ``?account=`` and label filters, and a resource's status watched as it reconciles.

Handlers only translate: HTTP in, the same use cases ``odfd apply``/``get``/``delete`` call
(``odfd.app.resource_service``, ``odfd.app.resources``), JSON out; who may do what is one
hook (``access``). ``/openapi.json`` documents the routes.
"""

from odfd.server.resource_api.handlers import ROUTES, ResourceApi

__all__ = ["ROUTES", "ResourceApi"]
