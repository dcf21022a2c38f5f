"""Delivering an event to a ``WebhookTarget``: signed (:mod:`odfd.webhooks.signing`), retried
with exponential back-off while the receiver is down or answers 408/429/5xx, and recorded in the
``webhook_deliveries`` table from its first attempt to its end. The target's resource ``status``
carries the last delivery's outcome (a ``LastDelivery`` condition), so ``odfd get`` shows a
target that is down. The body follows the Standard Webhooks payload shape:
``{"type", "timestamp", "data"}``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from odfd.app.node_secrets import NodeSecrets
from odfd.app.resources import CONDITION_BASE
from odfd.errors import OdfdError
from odfd.webhooks.signing import signed_headers
from storage.catalog.resources import ResourceRecord, ResourceTable
from storage.catalog.webhook_deliveries import WebhookDeliveryTable

LAST_DELIVERY = CONDITION_BASE + "LastDelivery"
_RETRIED_STATUSES = frozenset({408, 429})


class WebhookError(OdfdError):
    """A target that cannot be delivered to (no usable URL or secret)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 5
    first_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 30.0
    timeout: float = 10.0
    """Seconds one attempt may take."""

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_delay, self.first_delay * self.factor ** (attempt - 1)))


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    id: str
    name: str
    url: str
    secret: str

    def __repr__(self) -> str:  # never show the secret
        return f"WebhookTarget({self.name!r}, {self.url!r})"

    @classmethod
    def from_record(cls, record: ResourceRecord, secrets: NodeSecrets) -> WebhookTarget:
        spec = record.spec
        url = spec.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise WebhookError(f"WebhookTarget {record.name}: spec.url must be an http(s) URL")
        stored = spec.get("secret")
        if not isinstance(stored, dict) or not isinstance(stored.get("value"), str):
            raise WebhookError(f"WebhookTarget {record.name}: spec.secret is not set")
        return cls(record.id, record.name, url, secrets.decrypt(stored["value"]))


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    message_id: str
    delivered: bool
    attempts: int
    status: int | None
    error: str | None


class WebhookDeliverer:
    def __init__(
        self,
        deliveries: WebhookDeliveryTable,
        resources: ResourceTable,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.deliveries = deliveries
        self.resources = resources
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    async def deliver(self, target: WebhookTarget, event_type: str, data: Any) -> DeliveryOutcome:
        message_id = f"msg_{uuid.uuid4().hex}"
        body = json.dumps(
            {"type": event_type, "timestamp": datetime.now(UTC).isoformat(), "data": data},
            separators=(",", ":"),
        ).encode()
        await self.deliveries.start(message_id, target.id, target.name, event_type)
        status: int | None = None
        error: str | None = None
        attempt = 0
        timeout = aiohttp.ClientTimeout(total=self.retry.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while attempt < self.retry.attempts:
                attempt += 1
                status, error = await self._attempt(session, target, message_id, body)
                await self.deliveries.attempted(message_id, status, error)
                if error is None:
                    break
                if status is not None and status < 500 and status not in _RETRIED_STATUSES:
                    break  # the receiver refused this delivery: retrying will not change that
                if attempt < self.retry.attempts:
                    await self._sleep(self.retry.delay(attempt))
        delivered = error is None
        await self.deliveries.finish(message_id, "delivered" if delivered else "failed")
        outcome = DeliveryOutcome(message_id, delivered, attempt, status, error)
        await self._record_status(target, outcome)
        return outcome

    async def _attempt(
        self, session: aiohttp.ClientSession, target: WebhookTarget, message_id: str, body: bytes
    ) -> tuple[int | None, str | None]:
        headers = {
            "content-type": "application/json",
            **signed_headers(target.secret, message_id, int(time.time()), body),
        }
        try:
            async with session.post(target.url, data=body, headers=headers) as response:
                if 200 <= response.status < 300:
                    return response.status, None
                return response.status, f"HTTP {response.status} {response.reason or ''}".strip()
        except (aiohttp.ClientError, TimeoutError) as err:
            return None, f"{type(err).__name__}: {err}" if str(err) else type(err).__name__

    async def _record_status(self, target: WebhookTarget, outcome: DeliveryOutcome) -> None:
        condition = {
            "status": "True" if outcome.delivered else "False",
            "messageId": outcome.message_id,
            "attempts": outcome.attempts,
            "updatedAt": datetime.now(UTC).isoformat(),
            **({"message": outcome.error} if outcome.error else {}),
        }
        await self.resources.update_status(target.id, conditions={LAST_DELIVERY: condition})
