"""A mirror told of its source's head moves by webhook instead of waiting for its next poll.

A ``Mirror`` resource with ``subscribe: true`` whose source is a dataset on an odfd node over
HTTP (``http(s)://node/[account/]name/``) registers, through that node's resource protocol
(:mod:`odfd.server.resource_api`, with the ``[sync.tokens]`` token of the source's URL), a
``WebhookTarget`` pointing at this node's ``POST /hooks/mirrors/<mirror>`` with a fresh random
secret, and a ``Flow`` firing a ``WebhookCall`` on that dataset's ``dataset.ref.updated``. The
secret is kept only encrypted to this node's key, in the mirror's ``Subscribed`` condition. Each
notification is checked (Standard Webhooks signature and timestamp, and that it is about the
mirrored dataset) before the mirror syncs; the mirror's own schedule keeps polling meanwhile,
so a source that stops notifying is still followed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp

from odfd.app.node_secrets import NodeSecrets, SecretError
from odfd.app.resource_types import MIRROR
from odfd.app.resources import CONDITION_BASE, MirrorSpec, utc_now_text
from odfd.errors import OdfdError
from odfd.flows.spec import DATASET_REF_UPDATED
from odfd.sync.transport.simple_http import SimpleHttpTransport
from odfd.sync.transport.url import parse_remote
from odfd.webhooks.signing import SignatureError, verify
from protocol.errors import OdfError
from storage.catalog.resources import ResourceRecord, ResourceTable
from storage.stores.http import refusal_message

if TYPE_CHECKING:
    from odfd.app.node import Node

SUBSCRIBED = CONDITION_BASE + "Subscribed"
HOOK_PATH = "/hooks/mirrors/{name}"
"""Where a subscribed mirror's source posts (on the mirror's node)."""
_TIMEOUT = aiohttp.ClientTimeout(total=30)


class SubscriptionError(OdfdError):
    """The source node refused or could not take the subscription, or a notification is not
    one this node asked for."""


@dataclass(frozen=True, slots=True)
class SourceDataset:
    base_url: str
    """The source node, ``http(s)://host:port/``."""
    dataset: str
    """The dataset's path on it, ``[account/]name``."""

    @classmethod
    def of(cls, url: str) -> SourceDataset:
        try:
            transport = parse_remote(url)
        except OdfError as err:
            raise SubscriptionError(str(err)) from None
        http_base = transport.http_base if isinstance(transport, SimpleHttpTransport) else None
        path = "" if http_base is None else urlsplit(http_base).path
        dataset = path.strip("/")
        if http_base is None or not dataset or dataset.count("/") > 1:
            raise SubscriptionError(
                f"{url} is not a dataset on an odfd node over http(s) "
                "(http(s)://host/[account/]name/), which is what can notify"
            )
        return cls(http_base[: -len(path)] + "/", dataset)


def subscription_name(callback_url: str) -> str:
    """The name of the target and flow at the source: one per mirror of one node."""
    return "odfd-mirror-" + hashlib.sha256(callback_url.encode()).hexdigest()[:16]


async def wanting_subscription(
    node: Node, callback_url: Callable[[str], str | None], name: str | None = None
) -> list[tuple[ResourceRecord, str]]:
    """The ``Mirror`` resources (``name``: only that one) that ask for a subscription and are not
    subscribed at this node's current address (``callback_url`` of the mirror's name; None: the
    node has none yet), each with that address."""
    wanting = []
    for record in await ResourceTable(node.workspace.catalog).list(MIRROR.schema):
        if name is not None and record.name.lower() != name.lower():
            continue
        callback = callback_url(record.name)
        if callback is not None and _wants(record, callback):
            wanting.append((record, callback))
    return wanting


def _wants(record: ResourceRecord, callback: str) -> bool:
    try:
        spec = MirrorSpec.from_json(record.spec, f"Mirror {record.name}")
    except OdfError:
        return False
    if not spec.subscribe or spec.paused:
        return False
    condition = (record.status.get("conditions") or {}).get(SUBSCRIBED) or {}
    return (
        condition.get("status") != "True"
        or condition.get("callback") != callback
        or condition.get("sourceUrl") != spec.source
    )


async def subscribe(node: Node, record: ResourceRecord, callback_url: str) -> dict[str, Any]:
    """Register the webhook of the Mirror resource ``record`` at its source; answers the
    ``Subscribed`` condition written on the resource (a refusal is written there too)."""
    spec = MirrorSpec.from_json(record.spec, f"Mirror {record.name}")
    table = ResourceTable(node.workspace.catalog)
    try:
        source = SourceDataset.of(spec.source)
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        name = subscription_name(callback_url)
        target = {
            "headers": {"name": name},
            "spec": {"url": callback_url, "secret": secret},
        }
        flow = {
            "headers": {"name": name},
            "spec": {
                "target": f"Dataset:{source.dataset.rpartition('/')[2]}",
                "triggers": [{"kind": "Event", "events": {"type": DATASET_REF_UPDATED}}],
                "tasks": [{"kind": "WebhookCall", "target": name}],
            },
        }
        token = node.transport.token_for(source.base_url)
        account = source.dataset.rpartition("/")[0]
        query = f"?account={account}" if account else ""
        async with aiohttp.ClientSession(
            source.base_url.rstrip("/"),
            timeout=_TIMEOUT,
            headers={"Authorization": f"Bearer {token}"} if token else {},
        ) as client:
            await _apply(client, f"/sink/v1alpha1/webhooktarget{query}", target)
            await _apply(client, f"/flow/v1alpha1/flow{query}", flow)
        condition = {
            "status": "True",
            "source": source.base_url,
            "name": name,
            "callback": callback_url,
            "sourceUrl": spec.source,
            "secret": NodeSecrets(node.workspace.keys).encrypt(secret),
            "updatedAt": utc_now_text(),
        }
    except (SubscriptionError, aiohttp.ClientError, TimeoutError) as err:
        condition = {
            "status": "False",
            "message": f"not subscribed, polling only: {err or type(err).__name__}",
            "updatedAt": utc_now_text(),
        }
    await table.update_status(record.id, conditions={SUBSCRIBED: condition})
    return condition


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """What deleting a subscribed Mirror undid at its source, or why it could not."""

    mirror: str
    source: str
    name: str
    """The WebhookTarget and Flow at the source."""
    error: str | None = None
    """Why they are still there (the source unreachable or refusing); None: removed."""

    def __str__(self) -> str:
        made = f"WebhookTarget:{self.name} and Flow:{self.name} at {self.source}"
        if self.error is None:
            return f"mirror {self.mirror}: unsubscribed ({made} removed)"
        return (
            f"mirror {self.mirror}: could not unsubscribe, {made} remain ({self.error}); its "
            f"notifications are refused here; remove them there (DELETE "
            f"{self.source}flow/v1alpha1/flow/{self.name} and "
            f"{self.source}sink/v1alpha1/webhooktarget/{self.name}, with an admin token)"
        )


async def unsubscribe(node: Node, record: ResourceRecord) -> Unsubscribed | None:
    """Remove the Flow and WebhookTarget that subscribing the Mirror resource ``record`` made at
    its source (one already gone counts as removed); ``None`` when it has no subscription. Never
    raises for the source's sake: a source that cannot be reached is answered in the result."""
    condition = (record.status.get("conditions") or {}).get(SUBSCRIBED) or {}
    if condition.get("status") != "True" or not condition.get("name"):
        return None
    source, name = str(condition["source"]), str(condition["name"])
    try:
        account = SourceDataset.of(str(condition.get("sourceUrl") or "")).dataset.rpartition("/")[0]
    except SubscriptionError:
        account = ""
    query = f"?account={account}" if account else ""
    token = node.transport.token_for(source)
    try:
        async with aiohttp.ClientSession(
            source.rstrip("/"),
            timeout=aiohttp.ClientTimeout(total=10),
            headers={"Authorization": f"Bearer {token}"} if token else {},
        ) as client:
            await _delete(client, f"/flow/v1alpha1/flow/{name}{query}")
            await _delete(client, f"/sink/v1alpha1/webhooktarget/{name}{query}")
    except (SubscriptionError, aiohttp.ClientError, TimeoutError) as err:
        return Unsubscribed(record.name, source, name, str(err) or type(err).__name__)
    return Unsubscribed(record.name, source, name)


async def _delete(client: aiohttp.ClientSession, path: str) -> None:
    async with client.delete(path) as response:
        if response.status not in (200, 404):  # 404: already gone
            raise SubscriptionError(
                f"the source node answered {response.status}: "
                f"{refusal_message(await response.text())}"
            )


async def _apply(client: aiohttp.ClientSession, path: str, manifest: dict[str, Any]) -> None:
    async with client.post(path, json=manifest) as response:
        if response.status not in (200, 201):
            raise SubscriptionError(
                f"the source node answered {response.status}: "
                f"{refusal_message(await response.text())}"
            )


async def check_notification(
    node: Node, mirror: str, headers: Mapping[str, str], body: bytes
) -> ResourceRecord:
    """The Mirror resource a notification is for, once its signature checks out with the
    secret this node gave the source and it is about the mirrored dataset."""
    record = await ResourceTable(node.workspace.catalog).find(MIRROR.schema, mirror)
    condition = None if record is None else (record.status.get("conditions") or {}).get(SUBSCRIBED)
    if record is None or not condition or condition.get("status") != "True":
        raise SubscriptionError(f"mirror {mirror} has no webhook subscription on this node")
    try:
        secret = NodeSecrets(node.workspace.keys).decrypt(condition["secret"])
        verify(secret, dict(headers), body, now=time.time())
    except (SecretError, SignatureError) as err:
        raise SubscriptionError(f"mirror {mirror}: {err}") from None
    try:
        event = json.loads(body)["data"]
        alias = str(event["datasetAlias"])
    except (ValueError, KeyError, TypeError):
        raise SubscriptionError(f"mirror {mirror}: the notification names no dataset") from None
    spec = MirrorSpec.from_json(record.spec, f"Mirror {record.name}")
    wanted = SourceDataset.of(spec.source).dataset
    if alias.lower() != wanted.lower() and alias.lower() != wanted.rpartition("/")[2].lower():
        raise SubscriptionError(f"mirror {mirror}: a notification about {alias}, not {wanted}")
    return record
