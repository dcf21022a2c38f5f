"""The daemon's side of mirror webhooks (:mod:`odfd.app.mirror_subscriptions`): it subscribes
each ``Mirror`` resource with ``subscribe: true`` at its source (after an apply, and again on
each reconcile pass while a subscription is missing, refused, or points at an old address of this
node), and serves ``POST /hooks/mirrors/<mirror>``, where a checked notification queues the
mirror's sync at once."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from aiohttp import web

from odfd.app.mirror_subscriptions import (
    HOOK_PATH,
    SubscriptionError,
    check_notification,
    subscribe,
    wanting_subscription,
)
from protocol.errors import OdfError

if TYPE_CHECKING:
    from odfd.app.node import Node

log = logging.getLogger(__name__)
MAX_NOTIFICATION_BYTES = 64 * 1024


class MirrorWebhooks:
    def __init__(
        self,
        node: Callable[[], Node],
        base_url: Callable[[], str | None],
        sync_now: Callable[[str], None],
    ) -> None:
        self._node = node
        self._base_url = base_url
        self._sync_now = sync_now

    def __call__(self, app: web.Application) -> None:
        app.router.add_post(HOOK_PATH, self.notified)

    async def notified(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if request.content_length is not None and request.content_length > MAX_NOTIFICATION_BYTES:
            return _answer(413, f"a notification is at most {MAX_NOTIFICATION_BYTES} bytes")
        body = await request.content.read(MAX_NOTIFICATION_BYTES + 1)
        try:
            record = await check_notification(self._node(), name, request.headers, body)
        except SubscriptionError as err:
            log.warning("mirror notification refused", extra={"mirror": name, "error": str(err)})
            return _answer(403, str(err))
        self._sync_now(record.name)
        return _answer(202, f"sync of {record.name} queued")

    def callback_url(self, name: str) -> str | None:
        base = self._base_url()
        if base is None:
            return None
        return base.rstrip("/") + HOOK_PATH.replace("{name}", quote(name, safe=""))

    async def ensure(self, name: str | None = None) -> None:
        """Subscribe the mirror ``name`` (None: every mirror) where it asks for it and is not
        subscribed at this node's current address."""
        for record, callback in await wanting_subscription(self._node(), self.callback_url, name):
            try:
                condition = await subscribe(self._node(), record, callback)
            except OdfError as err:  # the spec itself: its controller reports it
                log.warning("mirror subscription", extra={"mirror": record.name, "error": str(err)})
                continue
            log.info(
                "mirror subscription",
                extra={"mirror": record.name, "subscribed": condition["status"] == "True"},
            )


def _answer(status: int, message: str) -> web.Response:
    return web.Response(
        status=status, text=json.dumps({"message": message}), content_type="application/json"
    )
