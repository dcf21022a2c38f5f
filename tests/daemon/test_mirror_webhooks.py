"""A mirror subscribed to its source node's ``dataset.ref.updated`` webhooks: two daemons in this
process, the mirror applied over the mirror node's resource protocol with ``subscribe: true``;
the mirror node registers a WebhookTarget and a Flow at the source through the source's resource
protocol, and a head move at the source reaches the mirror's head long before its one-hour poll.
A forged notification is refused; a source that cannot be subscribed leaves the mirror polling,
saying why."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from odfd.app.mirror_subscriptions import SUBSCRIBED, subscription_name
from odfd.app.node import Node
from odfd.app.resource_service import UNSUBSCRIBED, delete_and_undo
from odfd.app.resource_types import FLOW, MIRROR, WEBHOOK_TARGET
from odfd.app.resources import ResourceKey, apply_manifests, load_manifests
from odfd.config import NodeConfig
from odfd.daemon.service import Daemon
from odfd.webhooks.signing import signed_headers
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from tests.fixtures.daemons import QUIET_DAEMON, start_daemon
from tests.replication.datagen import create_root

SOURCE_ADMIN = "source-admin-token"
MIRROR_ADMIN = "mirror-admin-token"
COMMON = QUIET_DAEMON


async def _eventually(what: str, check: Callable[[], Awaitable[Any]], within: float = 15) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_a_head_move_reaches_a_subscribed_mirror_by_webhook(tmp_path: Path) -> None:
    """Run in ``asyncio.run``: two daemons' start-ups (console warm-ups) share one loop here,
    which the per-daemon loop check of this folder's async tests is not about."""
    asyncio.run(_two_daemons(tmp_path))


async def _two_daemons(tmp_path: Path) -> None:
    async with (
        await Workspace.init(tmp_path / "source") as source_ws,
        await Workspace.init(tmp_path / "mirror") as mirror_ws,
    ):
        writer = await create_root(source_ws, "cities", slices=1, seed=3)
        source = await start_daemon(
            source_ws, f'[server]\nadmin_tokens = ["{SOURCE_ADMIN}"]\n' + COMMON
        )
        try:
            assert source.server_url is not None
            mirror = await start_daemon(
                mirror_ws,
                f'[server]\nadmin_tokens = ["{MIRROR_ADMIN}"]\n'
                + COMMON
                + f'[sync.tokens]\n"{source.server_url}" = "{SOURCE_ADMIN}"\n',
            )
            try:
                await _check(source, source_ws, mirror, mirror_ws, writer)
            finally:
                await mirror.shutdown()
                # Each daemon makes its executor the loop's; two share this test's loop.
                asyncio.get_running_loop().set_default_executor(source._executor)
        finally:
            await source.shutdown()


async def _check(
    source: Daemon, source_ws: Workspace, mirror: Daemon, mirror_ws: Workspace, writer: Any
) -> None:
    assert source.server_url is not None and mirror.server_url is not None
    manifests = [
        {
            "$schema": "Mirror",
            "headers": {"name": "cities"},
            "spec": {"source": f"{source.server_url}cities/", "every": "1h", "subscribe": True},
        },
        {
            "$schema": "Mirror",
            "headers": {"name": "unreachable"},
            "spec": {"source": "http://127.0.0.1:9/nothing/", "every": "1h", "subscribe": True},
        },
    ]
    headers = {"Authorization": f"Bearer {MIRROR_ADMIN}"}
    async with aiohttp.ClientSession(headers=headers) as client:
        url = f"{mirror.server_url}mirror/v1alpha1/mirror"
        async with client.post(url, json=manifests) as response:
            assert response.status == 200, await response.text()

    resources = ResourceTable(mirror_ws.catalog)

    async def subscribed(name: str) -> dict[str, Any] | None:
        record = await resources.find(MIRROR.schema, name)
        assert record is not None
        condition: dict[str, Any] | None = (record.status.get("conditions") or {}).get(SUBSCRIBED)
        return condition

    condition = await _eventually("the subscription", lambda: subscribed("cities"))
    assert condition["status"] == "True", condition
    assert condition["secret"].count(".") == 4  # kept only as a JWE
    refused = await _eventually("the refused subscription", lambda: subscribed("unreachable"))
    assert refused["status"] == "False" and "polling only" in refused["message"]

    # At the source: a target and a flow, through its resource protocol.
    name = subscription_name(condition["callback"])
    at_source = ResourceTable(source_ws.catalog)
    target = await at_source.find(WEBHOOK_TARGET.schema, name)
    flow = await at_source.find(FLOW.schema, name)
    assert target is not None and flow is not None
    assert target.spec["url"] == condition["callback"]
    assert flow.status["phase"] == "Ready"

    async def mirrored_head() -> Any:
        record = await mirror_ws.catalog.find_by_alias("cities")
        return None if record is None else record.head

    first = await _eventually("the first sync", mirrored_head)
    assert first == await writer.dataset.chain.head()

    # A head move at the source: the mirror follows by webhook, not by its one-hour poll.
    moved = await writer.append(slices=1)
    record = await source_ws.catalog.find_by_alias("cities")
    assert record is not None
    started = time.monotonic()
    await source._ingested(record.id)  # what a push into the source's daemon announces
    await _eventually("the webhook-triggered sync", lambda: _equals(mirrored_head, moved))
    assert time.monotonic() - started < 10

    # A notification not signed with the secret this node gave is refused.
    body = json.dumps({"type": "dataset.ref.updated", "data": {"datasetAlias": "cities"}}).encode()
    forged = signed_headers("whsec_Zm9yZ2Vk", "msg_forged", int(time.time()), body)
    async with (
        aiohttp.ClientSession() as client,
        client.post(
            condition["callback"],
            data=body,
            headers={**forged, "content-type": "application/json"},
        ) as response,
    ):
        assert response.status == 403
        assert "signature" in (await response.json())["message"]

    # Deleting the mirror removes what it made at the source, through the source's protocol.
    deleted = await _delete_mirror(mirror, "cities")
    said = deleted["status"]["conditions"][UNSUBSCRIBED]
    assert said["status"] == "True" and name in said["message"], said
    assert await at_source.find(WEBHOOK_TARGET.schema, name) is None
    assert await at_source.find(FLOW.schema, name) is None
    # The other mirror was never subscribed: nothing to undo, nothing said.
    deleted = await _delete_mirror(mirror, "unreachable")
    assert UNSUBSCRIBED not in deleted["status"]["conditions"]


async def _delete_mirror(mirror: Daemon, name: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {MIRROR_ADMIN}"}
    async with (
        aiohttp.ClientSession(headers=headers) as client,
        client.delete(f"{mirror.server_url}mirror/v1alpha1/mirror/{name}") as response,
    ):
        assert response.status == 200, await response.text()
        document: dict[str, Any] = await response.json()
        return document


async def test_a_source_unreachable_at_delete_time_is_said_precisely(tmp_path: Path) -> None:
    """The mirror is deleted here whatever the source says; what remains there is named, with
    how to remove it, in the delete's answer (and the log)."""
    async with await Workspace.init(tmp_path / "ws") as workspace:
        path = tmp_path / "mirror.yaml"
        path.write_text(
            "$schema: Mirror\nheaders: {name: gone}\n"
            "spec: {source: 'http://127.0.0.1:9/cities/', subscribe: true}\n"
        )
        [applied] = await apply_manifests(workspace, load_manifests([path]))
        await ResourceTable(workspace.catalog).update_status(
            applied.record.id,
            conditions={
                SUBSCRIBED: {
                    "status": "True",
                    "source": "http://127.0.0.1:9/",
                    "name": "odfd-mirror-0123456789abcdef",
                    "sourceUrl": "http://127.0.0.1:9/cities/",
                }
            },
        )
        node = Node(workspace, NodeConfig())
        [deleted] = await delete_and_undo(node, [ResourceKey(MIRROR.schema, "gone")])
        assert await ResourceTable(workspace.catalog).find(MIRROR.schema, "gone") is None
        assert deleted.unsubscribed is not None and deleted.unsubscribed.error
        said = str(deleted.unsubscribed)
        assert "could not unsubscribe" in said
        assert (
            "WebhookTarget:odfd-mirror-0123456789abcdef and Flow:odfd-mirror-0123456789abcdef"
            in said
        )
        assert "DELETE http://127.0.0.1:9/flow/v1alpha1/flow/odfd-mirror-0123456789abcdef" in said


async def _equals(read: Callable[[], Awaitable[Any]], expected: Any) -> bool:
    return bool(await read() == expected)
