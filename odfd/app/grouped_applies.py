"""Applies arriving together stored together (group commit): what a server does with many
concurrent single-resource requests.

Every apply goes through the one catalog connection, statement by statement; a thousand
clients each applying one resource would each pay for the transactions, the reference
resolution and the condition refresh that one batch of a thousand pays once. So requests that
arrive while a group is being stored wait for the next group, which is applied as one batch in
one transaction (``odfd.app.resources.apply_manifests``) and reconciled once. Each request still
gets exactly its own results. Should a group fail, nothing of it is stored (one transaction) and
each request of it is applied again on its own, so one request's problem is never another's.

Only requests with the same workspace and the same acting account are grouped: the audit trail
records each write under the account that asked for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from odfd.app.resource_service import (
    AppliedResource,
    Reconcile,
    apply_and_reconcile,
    documents_now,
)
from odfd.app.resources import Manifest, apply_manifests
from odfd.app.write_log import Actor
from storage.workspace import Workspace

MAX_GROUP = 500
"""Manifests stored in one transaction at most (a group holds the catalog that long)."""


@dataclass(frozen=True, slots=True)
class Answered:
    """One request's resources as applied, and their documents as stored right after."""

    applied: list[AppliedResource]
    documents: list[dict[str, Any]]


@dataclass
class _Request:
    workspace: Workspace
    manifests: list[Manifest]
    actor: Actor
    answer: asyncio.Future[Answered] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupedApplies:
    """``apply_and_reconcile`` for concurrent callers, grouped."""

    def __init__(self, reconcile: Reconcile) -> None:
        self._reconcile = reconcile
        self._waiting: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None

    async def apply(
        self, workspace: Workspace, manifests: list[Manifest], actor: Actor
    ) -> Answered:
        """Store ``manifests`` (validated already) as done by ``actor`` and reconcile them, in
        the next group; answers where each got to, as ``apply_and_reconcile`` does, and their
        documents (read for the whole group at once)."""
        request = _Request(workspace, manifests, actor)
        self._waiting.append(request)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        return await asyncio.shield(request.answer)

    async def _work(self) -> None:
        while self._waiting:
            group = self._next_group()
            try:
                await self._apply_group(group)
            except BaseException:  # cancelled with the server: nobody is left to answer
                for request in group + self._waiting:
                    request.answer.cancel()
                raise

    def _next_group(self) -> list[_Request]:
        first = self._waiting[0]
        group: list[_Request] = []
        rest: list[_Request] = []
        size = 0
        for request in self._waiting:
            same = request.workspace is first.workspace and request.actor == first.actor
            if same and (not group or size + len(request.manifests) <= MAX_GROUP):
                group.append(request)
                size += len(request.manifests)
            else:
                rest.append(request)
        self._waiting = rest
        return group

    async def _apply_group(self, group: list[_Request]) -> None:
        if len(group) == 1:
            await self._apply_alone(group[0])
            return
        first = group[0]
        manifests = [manifest for request in group for manifest in request.manifests]
        try:
            async with first.workspace.catalog.sql.transaction():
                results = await apply_manifests(first.workspace, manifests, actor=first.actor)
        except Exception:  # noqa: BLE001 - nothing stored: each is applied alone, its error its own
            for request in group:
                await self._apply_alone(request)
            return
        try:  # outside the transaction: a controller may call out (a mirror's source node)
            latest = {result.record.id: result.record for result in results}  # the last apply's
            reconciled = await self._reconcile(list(latest.values()))
        except Exception as error:  # noqa: BLE001 - stored, not reconciled: as an apply alone says
            for request in group:
                request.answer.set_exception(error)
            return
        outcomes = {outcome.resource.id: outcome for outcome in reconciled}
        try:
            documents = await documents_now(first.workspace, [r.record for r in results])
        except Exception as error:  # noqa: BLE001 - stored and reconciled; the reading failed
            for request in group:
                request.answer.set_exception(error)
            return
        at = 0
        for request in group:
            shown = documents[at : at + len(request.manifests)]
            mine = results[at : at + len(request.manifests)]
            at += len(request.manifests)
            answer = []
            for result in mine:
                outcome = outcomes.get(result.record.id)
                if outcome is None:
                    answer.append(AppliedResource(result, "Pending", None))
                else:
                    answer.append(AppliedResource(result, outcome.phase, outcome.message))
            request.answer.set_result(Answered(answer, shown))

    async def _apply_alone(self, request: _Request) -> None:
        try:
            applied = await apply_and_reconcile(
                request.workspace, request.manifests, self._reconcile, actor=request.actor
            )
            shown = await documents_now(request.workspace, [a.record for a in applied])
        except Exception as error:  # noqa: BLE001 - handed to the one caller it belongs to
            request.answer.set_exception(error)
        else:
            request.answer.set_result(Answered(applied, shown))
