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

import dataclasses
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from odfd.app.events import Event, EventSink, Recovered
from odfd.app.forwarding import Request
from odfd.errors import OdfdError
from odfd.sync.did_names import is_did
from odfd.sync.errors import SyncError
from odfd.sync.transport import looks_like_url
from protocol.errors import ParseError

if TYPE_CHECKING:
    import aiohttp

    from odfd.app.node import Node
    from odfd.app.write_log import Actor
    from odfd.coordinator.pull import PullOutcome
    from odfd.sync.progress import Progress
    from odfd.sync.pull import PullOptions, PullResult
    from odfd.sync.transport.settings import TransportSettings
    from protocol.identity import DatasetId
    from protocol.model import Timestamp
    from storage.catalog import DatasetRecord
    from storage.chain.rules import ChainState
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
class Pulled(Event):
    """One dataset brought up to date from its own source (or found so already)."""

    name: ClassVar[str] = "pulled"
    alias: str
    updated: bool
    message: str


EVENTS: tuple[type[Event], ...] = (PullRetrying, DerivativeReset, Recovered, Replicated, Pulled)


class PullArgumentError(OdfdError):
    """The request's options contradict each other."""

    exit_code = 2  # an argument error, as argparse's own


@dataclass(frozen=True, slots=True)
class PullRequest(Request):
    """``odfd pull``: which datasets, how from their sources, and how from remotes."""

    command: ClassVar[str] = "pull"
    datasets: tuple[str, ...] = ()
    """Aliases or ids, remote URLs, or ``REPO/NAME`` of named repositories."""
    all: bool = False
    recursive: bool = False
    fetch_uncacheable: bool = False
    set_watermark: str | None = None
    """RFC 3339: advance a root dataset's watermark instead of ingesting."""
    reset_diverged: bool = False
    as_alias: str | None = None
    force: bool = False
    allow_unsigned: bool = False
    token: str | None = None
    protocol: str = "auto"
    parallel: int = 8
    connect_timeout: float | None = None
    first_byte_timeout: float | None = None
    min_rate: int | None = None
    timeout: float | None = None

    def check(self) -> None:
        """Argument errors found before anything runs."""
        if bool(self.datasets) == self.all:
            raise SyncError("name the datasets to pull, or pass --all (not both)")

    def names_a_url(self) -> bool:
        """Whether a dataset is named by a remote URL (a replication pull, whatever the
        workspace holds)."""
        return any(looks_like_url(ref) for ref in self.datasets)


Around = Callable[[str], AbstractAsyncContextManager[object]]
"""Wraps a local pull's work, given a label (the CLI's status line)."""


async def pull(
    node: Node,
    request: PullRequest,
    sink: EventSink,
    *,
    around: Around | None = None,
    show_progress: bool = False,
) -> None:
    """Brings the datasets up to date: replicas from their remotes, the others from their own
    sources (``all``: replicas first, then everything else upstream first). ``show_progress``:
    each transfer draws its progress line on a terminal's stderr."""
    from odfd.app.transfer_progress import progress_lines

    request.check()
    progress = progress_lines(show_progress)
    if request.all:
        replicated, local = await split_for_all(node)
        if replicated:
            refs = [str(r.id) for r in replicated]
            await _replicate(node, request, refs, sink, progress)
        if local:
            await _local(node, request, [str(r.id) for r in local], True, sink, around)
        return
    refs = [await expanded(node, ref) for ref in request.datasets]
    if await is_replication(node, refs, as_alias=request.as_alias, force=request.force):
        await _replicate(node, request, refs, sink, progress)
    else:
        await _local(node, request, refs, request.recursive, sink, around)


async def _local(
    node: Node,
    request: PullRequest,
    refs: list[str],
    recursive: bool,
    sink: EventSink,
    around: Around | None,
) -> None:
    from protocol.model import Timestamp

    watermark = request.set_watermark
    how = LocalPull(
        recursive=recursive,
        fetch_uncacheable=request.fetch_uncacheable,
        watermark=None if watermark is None else Timestamp.parse_rfc3339(watermark),
        reset_diverged=request.reset_diverged,
    )
    async with nullcontext() if around is None else around(f"pull {', '.join(refs)}"):
        outcomes = await pull_local(node, refs, how, sink)
    for outcome in outcomes:
        sink.emit(Pulled(outcome.dataset, outcome.updated, outcome.message))


async def _replicate(
    node: Node,
    request: PullRequest,
    refs: list[str],
    sink: EventSink,
    progress: Callable[[str], Progress] | None,
) -> None:
    options = pull_options(node, request)
    if request.as_alias is not None and len(refs) != 1:
        raise PullArgumentError("--as names one dataset: give exactly one URL")
    await replicate(node, refs, options, as_alias=request.as_alias, sink=sink, progress=progress)


def pull_options(node: Node, request: PullRequest) -> PullOptions:
    """The request's options, time-outs defaulting to the node's transport settings."""
    from odfd.sync.pull import PullOptions

    transport = node.transport
    limits = transport.limits
    changes: dict[str, Any] = {
        "connect": request.connect_timeout,
        "first_byte": request.first_byte_timeout,
        "min_rate": request.min_rate,
    }
    limits = dataclasses.replace(limits, **{k: v for k, v in changes.items() if v is not None})
    if limits.min_rate < 0:
        raise SyncError("--min-rate must be 0 or more bytes per second")
    return PullOptions(
        force=request.force,
        parallel=request.parallel,
        token=request.token,
        protocol=request.protocol,
        limits=limits,
        operation_timeout=(
            request.timeout if request.timeout is not None else transport.operation_timeout
        ),
        allow_unsigned=request.allow_unsigned,
    )


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
    from odfd.sync.repos import expand

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
    from odfd.app.write_log import local_actor, record_write
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


def input_moved(input_id: DatasetId, derivative: ChainState, input_state: ChainState) -> bool:
    """Whether the input (at ``input_state``) has blocks past what the derivative's last
    ``ExecuteTransform`` consumed: a pull of the derivative would run a transaction on them
    (the daemon's catch-up asks, without an engine)."""
    from odfd.coordinator.transform import next_query_input

    return next_query_input(input_id, derivative, input_state).new_block_hash is not None


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
    from odfd.app.write_log import local_actor
    from odfd.sync.pull import pull_from_remotes

    for ref in refs:
        shown = None if progress is None else progress(f"pull {ref}")
        if await is_remote(node, ref):
            result = await pull_from(
                node.workspace,
                ref,
                alias=as_alias,
                options=options,
                settings=node.transport,
                actor=actor or local_actor(),
                progress=shown,
            )
            _emit_replicated(sink, result)
            continue
        for result in await pull_from_remotes(
            node.workspace, ref, options=options, progress=shown, settings=node.transport
        ):
            await _record_pulled(node.workspace, result, actor or local_actor())
            _emit_replicated(sink, result)


def _emit_replicated(sink: EventSink, result: PullResult) -> None:
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


async def pull_from(
    workspace: Workspace,
    url: str,
    *,
    alias: str | None,
    options: PullOptions,
    settings: TransportSettings,
    actor: Actor,
    progress: Progress | None = None,
    session: aiohttp.ClientSession | None = None,
) -> PullResult:
    """One replication pull of the dataset at ``url`` (into ``alias``, else the dataset pulled
    from there, else the URL's last segment), its head move recorded as done by ``actor``:
    ``odfd pull URL`` and the daemon's mirror syncs both pull through here."""
    from odfd.sync.pull import pull

    result = await pull(
        workspace,
        url,
        alias=alias,
        options=options,
        progress=progress,
        session=session,
        settings=settings,
    )
    await _record_pulled(workspace, result, actor)
    return result


async def _record_pulled(workspace: Workspace, result: PullResult, actor: Actor) -> None:
    """The write log's entry of a pull that moved the head (``odfd.app.write_log``)."""
    from odfd.app.write_log import record_write

    if result.updated:
        await record_write(
            workspace,
            actor,
            "pull",
            result.alias,
            dataset_id=result.dataset_id,
            old_head=result.old_head,
            new_head=result.new_head,
        )
