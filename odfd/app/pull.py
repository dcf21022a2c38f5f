"""``pull``: bring datasets up to date, from their own sources (ingest into roots from a polling
source, transforms of derivatives: ``odfd.coordinator.pull``) or from the remotes they are
replicas of (``odfd.sync.pull``).

Which of the two a pull is: a URL, the DID of a dataset this node does not hold, ``--as`` /
``--force``, or a dataset with a pull remote is a replication; ``REPO/NAME`` of a named repository becomes its URL first. ``pull --all`` syncs the
replicated datasets first, then brings every other one up to date upstream first, so
derivatives see what their inputs just gained. The replication code (aiohttp, the IPFS client)
is imported only when a pull really replicates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from odfd.app.write_log import Actor, local_actor, record_write
from odfd.sync.did_names import is_did
from odfd.sync.repos import expand
from odfd.sync.transport.url import looks_like_url
from protocol.errors import ParseError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.coordinator.pull import PullOutcome
    from odfd.sync.progress import Progress
    from odfd.sync.pull import PullOptions
    from protocol.model import Timestamp
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


@dataclass(frozen=True, slots=True)
class PullRetrying(Event):
    """Another write moved the dataset's head first: it is pulled again on top of it."""

    name: ClassVar[str] = "pullRetrying"
    alias: str
    head: str


@dataclass(frozen=True, slots=True)
class DerivativeReset(Event):
    """An input's history was rewritten: the derivative's data was dropped, to be recomputed."""

    name: ClassVar[str] = "derivativeReset"
    alias: str


@dataclass(frozen=True, slots=True)
class Recovered(Event):
    """Something an interrupted pull left was settled (a staged transfer) before this one."""

    name: ClassVar[str] = "recovered"
    what: str


@dataclass(frozen=True, slots=True)
class Replicated(Event):
    """One replica synced from one remote."""

    name: ClassVar[str] = "replicated"
    alias: str
    remote: str
    updated: bool
    description: str
    trust: str
    trust_note: str | None


@dataclass(frozen=True, slots=True)
class LocalPull:
    """How datasets are brought up to date from their own sources."""

    recursive: bool = False
    fetch_uncacheable: bool = False
    watermark: Timestamp | None = None
    reset_diverged: bool = False
    """Recompute a derivative whose input's history was rewritten, instead of failing."""


async def is_remote(node: Node, ref: str) -> bool:
    """A URL, or the DID of a dataset this node does not hold (found over IPNS)."""
    if looks_like_url(ref):
        return True
    if not is_did(ref):
        return False
    try:
        return await node.workspace.try_resolve(ref) is None
    except ParseError:
        return True  # a malformed DID: the transport names what is wrong with it


async def expanded(node: Node, ref: str) -> str:
    """A local dataset stays as it is; ``REPO/NAME`` of a named repository becomes its URL."""
    if await is_remote(node, ref):
        return ref
    try:
        if await node.workspace.try_resolve(ref) is not None:
            return ref
    except ParseError:
        pass  # not a dataset reference: maybe REPO/NAME
    return await expand(node.workspace, ref)


async def has_remote(workspace: Workspace, ref: str) -> bool:
    """Whether ``ref`` names a dataset with a pull remote (a pull replicates it)."""
    record = await workspace.try_resolve(ref)
    return record is not None and bool(await workspace.catalog.remote_aliases(record.id, "pull"))


async def is_replication(node: Node, refs: list[str], *, as_alias: str | None, force: bool) -> bool:
    """URLs, ``--as``/``--force``, or datasets that have a pull remote are replication pulls."""
    if as_alias is not None or force:
        return True
    for ref in refs:
        if await is_remote(node, ref) or await has_remote(node.workspace, ref):
            return True
    return False


async def split_for_all(node: Node) -> tuple[list[DatasetRecord], list[DatasetRecord]]:
    """``pull --all``'s two parts: the datasets replicated from a remote, and the others."""
    replicated: list[DatasetRecord] = []
    local: list[DatasetRecord] = []
    for record in await node.workspace.list_datasets():
        is_replica = await has_remote(node.workspace, str(record.id))
        (replicated if is_replica else local).append(record)
    return replicated, local


async def pull_local(
    node: Node, refs: list[str], how: LocalPull, sink: EventSink, *, actor: Actor | None = None
) -> list[PullOutcome]:
    """Updates the datasets from their sources (and, ``recursive``, everything upstream first),
    each update recorded as done by ``actor`` (default: a local command)."""
    from odfd.coordinator.pull import pull_local as coordinate

    def reset(alias: str) -> None:
        sink.emit(DerivativeReset(alias))

    before = {r.alias: r.head for r in await node.workspace.list_datasets()}
    outcomes = await coordinate(
        node.workspace,
        refs,
        engines=node.engines,
        recursive=how.recursive,
        fetch_uncacheable=how.fetch_uncacheable,
        watermark=how.watermark,
        on_retry=lambda alias, lost: sink.emit(PullRetrying(alias, str(lost.actual))),
        reset_diverged=reset if how.reset_diverged else None,
    )
    for outcome in outcomes:
        record = await node.workspace.try_resolve(outcome.dataset) if outcome.updated else None
        if record is not None:
            await record_write(
                node.workspace,
                actor or local_actor(),
                "pull",
                record.alias,
                dataset_id=record.id,
                old_head=before.get(record.alias),
                new_head=record.head,
            )
    return outcomes


async def replicate(
    node: Node,
    refs: list[str],
    options: PullOptions,
    *,
    as_alias: str | None,
    sink: EventSink,
    progress: Callable[[str], Progress] | None = None,
    actor: Actor | None = None,
) -> None:
    """Syncs each URL (into ``as_alias``, else the dataset pulled from there, else the URL's last
    segment) and each replica from its recorded remotes, reached with the node's transport
    settings; ``progress`` gives the display of the
    transfer labelled so (none: nothing drawn); each update is recorded as done by ``actor``
    (default: a local command)."""
    from odfd.sync.pull import pull, pull_from_remotes

    for ref in refs:
        shown = None if progress is None else progress(f"pull {ref}")
        if await is_remote(node, ref):
            results = [
                await pull(
                    node.workspace,
                    ref,
                    alias=as_alias,
                    options=options,
                    progress=shown,
                    settings=node.transport,
                )
            ]
        else:
            results = await pull_from_remotes(
                node.workspace, ref, options=options, progress=shown, settings=node.transport
            )
        for result in results:
            if result.updated:
                await record_write(
                    node.workspace,
                    actor or local_actor(),
                    "pull",
                    result.alias,
                    dataset_id=result.dataset_id,
                    old_head=result.old_head,
                    new_head=result.new_head,
                )
            for note in result.recovered:
                sink.emit(Recovered(note))
            sink.emit(
                Replicated(
                    result.alias,
                    result.remote,
                    result.updated,
                    result.describe(),
                    result.trust,
                    result.trust_note,
                )
            )
