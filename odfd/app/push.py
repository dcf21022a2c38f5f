"""``push``: publish datasets to remotes (Smart Transfer to a node, a ``file://`` folder, S3,
``ipns://``). Every destination is worked out before the first push, so a dataset without one
stops the command before anything moved; ``recursive`` also pushes what a derivative reads,
inputs first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from odfd.sync.repos import RepoError, expand, join
from odfd.sync.transport import looks_like_url

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.sync.progress import Progress
    from odfd.sync.push import PushOptions, PushResult
    from odfd.sync.transport.settings import TransportSettings
    from storage.catalog import DatasetRecord
    from storage.workspace import Workspace


@dataclass(frozen=True, slots=True)
class Pushed(Event):
    """One dataset pushed to one remote (``updated``: the remote's head moved)."""

    name: ClassVar[str] = "pushed"
    alias: str
    updated: bool
    description: str


@dataclass(frozen=True, slots=True)
class PushRequest:
    refs: list[str] | None
    """The datasets (``None``: every one)."""
    to: str | None
    """A URL or named repository; ``None``: each dataset's recorded push remotes."""
    recursive: bool = False
    force: bool = False
    token: str | None = None
    parallel: int = 8


def split_targets(targets: list[str], to: str | None, every: bool) -> tuple[list[str], str | None]:
    """The datasets and the destination ``odfd push TARGETS [--to TO] [--all]`` names: with no
    ``to``, a URL after one dataset is its destination (the long-standing ``push DATASET
    URL``); naming datasets and passing ``every``, or neither, is a ``RepoError``."""
    refs = list(targets)
    if to is None and len(refs) == 2 and looks_like_url(refs[1]):
        refs, to = refs[:1], refs[1]
    if bool(refs) == every:
        raise RepoError("name the datasets to push, or pass --all (not both)")
    return refs, to


async def push_datasets(
    node: Node,
    request: PushRequest,
    sink: EventSink,
    *,
    show_progress: bool = False,
) -> None:
    """Pushes each dataset the request names to each of its destinations; ``show_progress``:
    each push draws its progress line on a terminal's stderr."""
    from odfd.app.transfer_progress import progress_lines
    from odfd.sync.push import PushOptions

    progress = progress_lines(show_progress)
    workspace = node.workspace
    records = (
        await workspace.list_datasets()
        if request.refs is None
        else [await workspace.resolve(ref) for ref in request.refs]
    )
    if request.recursive:
        records = await _with_inputs(workspace, records)
    plan = await _destinations(workspace, records, request.to, several=len(records) > 1)
    options = PushOptions(force=request.force, token=request.token, parallel=request.parallel)
    for record, urls in plan:
        for url in urls:
            shown = None if progress is None else progress(f"push {record.alias}")
            result = await push_to(
                workspace,
                str(record.id),
                url,
                options=options,
                settings=node.transport,
                progress=shown,
            )
            sink.emit(Pushed(result.alias, result.updated, result.describe()))


async def push_to(
    workspace: Workspace,
    ref: str,
    url: str,
    *,
    options: PushOptions,
    settings: TransportSettings,
    progress: Progress | None = None,
) -> PushResult:
    """Pushes dataset ``ref`` to the remote at ``url``, reached with ``settings``: ``odfd push``
    and the daemon's mirror targets both push through here (a push moves no local head, so it
    writes nothing to the write log)."""
    from odfd.sync.push import push

    return await push(workspace, ref, url, options=options, progress=progress, settings=settings)


async def _with_inputs(workspace: Workspace, records: list[DatasetRecord]) -> list[DatasetRecord]:
    """``records`` and everything they read that is here, inputs before their readers."""
    graph = await workspace.graph()
    order = graph.upstream_order([r.id for r in records], skip_missing=True)
    return [graph.records[dataset_id] for dataset_id in order]


async def _destinations(
    workspace: Workspace, records: list[DatasetRecord], to: str | None, *, several: bool
) -> list[tuple[DatasetRecord, list[str]]]:
    plan = []
    missing = []
    base = None if to is None else await expand(workspace, to)
    for record in records:
        if base is not None:
            plan.append((record, [join(base, record.alias) if several else base]))
            continue
        urls = (await workspace.open_dataset(record.id).remote_aliases())["push"]
        if not urls:
            missing.append(record.alias)
        plan.append((record, urls))
    if missing:
        raise RepoError(
            f"no push remote for {', '.join(missing)}: give --to URL|REPO, or add one with "
            "`odfd repo alias add DATASET URL --push`; nothing was pushed"
        )
    return plan
