"""``pull`` of local datasets: ingest into roots from their polling source, run derivatives' transforms.

With ``recursive``, the datasets a derivative reads from are updated first, in dependency order,
so one pull brings a whole pipeline up to date. (Pulling from remote repositories is handled by the
replication layer; this module updates datasets from their own sources.)

Ingest (:mod:`odfd.coordinator.ingest`, with the readers and fetchers it brings) and compaction are
imported only by the branches that use them: a derivative's pull loads neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odfd.coordinator.retry import retry_lost_race
from odfd.coordinator.transform import InputHistoryRewrittenError, update_derivative
from odfd.errors import OdfdError
from protocol.identity import DatasetId
from protocol.model import DatasetKind, Timestamp
from storage.dataset import Dataset
from storage.errors import RefCasError
from storage.graph import DependencyCycleError
from storage.workspace import Workspace
from verifier.engine.registry import Engines


class PullError(OdfdError):
    """A pull request cannot be carried out as asked."""


@dataclass(frozen=True, slots=True)
class PullOutcome:
    dataset: str
    updated: bool
    num_records: int
    message: str


async def pull_local(
    workspace: Workspace,
    refs: Sequence[str],
    *,
    engines: Engines,
    recursive: bool = False,
    fetch_uncacheable: bool = False,
    watermark: Timestamp | None = None,
    system_time: Timestamp | None = None,
    on_retry: Callable[[str, RefCasError], None] | None = None,
    reset_diverged: Callable[[str], None] | None = None,
) -> list[PullOutcome]:
    """Updates the named datasets (and, with ``recursive``, everything upstream of them). A
    dataset whose transaction lost the race for its head to another writer is pulled once more
    (``on_retry(alias, error)`` is told). With ``reset_diverged``, a derivative whose input's
    history was rewritten (compacted, reset) is reset to its metadata and recomputed from the
    start (``reset_diverged(alias)`` is told), as the reference's
    ``--reset-derivatives-on-diverged-input``; without it that is an error."""
    targets = [(await workspace.resolve(ref)).id for ref in refs]
    if watermark is not None:
        return [
            await _set_watermark(workspace, dataset_id, watermark, system_time)
            for dataset_id in targets
        ]
    order = await _upstream_order(workspace, targets) if recursive else targets
    outcomes = []
    for dataset_id in order:
        dataset = workspace.open_dataset(dataset_id)
        alias = await dataset.alias() or str(dataset_id)

        def retrying(lost: RefCasError, alias: str = alias) -> None:
            if on_retry is not None:
                on_retry(alias, lost)

        async def attempt(dataset: Dataset = dataset) -> PullOutcome:
            try:
                return await _pull_one(workspace, dataset, engines, fetch_uncacheable, system_time)
            except InputHistoryRewrittenError:
                if reset_diverged is None:
                    raise
            from odfd.coordinator.compact import (
                CompactionOptions,
                execute_compaction,
                plan_compaction,
            )

            name = await dataset.alias() or str(dataset.id)
            plan = await plan_compaction(dataset, name, CompactionOptions(keep_metadata_only=True))
            await execute_compaction(workspace.root, dataset, plan)
            reset_diverged(name)
            return await _pull_one(workspace, dataset, engines, fetch_uncacheable, system_time)

        outcomes.append(await retry_lost_race(attempt, retrying))
    return outcomes


async def _pull_one(
    workspace: Workspace,
    dataset: Dataset,
    engines: Engines,
    fetch_uncacheable: bool,
    system_time: Timestamp | None,
) -> PullOutcome:
    alias = await dataset.alias() or str(dataset.id)
    state = await dataset.chain.state()
    if state.kind is DatasetKind.DERIVATIVE:
        outcome = await update_derivative(
            workspace, dataset, engines=engines, system_time=system_time
        )
        if outcome.up_to_date:
            return PullOutcome(alias, False, 0, f"up to date ({outcome.reason})")
        return PullOutcome(
            alias,
            True,
            outcome.num_records,
            f"{outcome.num_records} new record(s), head {outcome.new_head}",
        )
    if state.polling_source is None:
        return PullOutcome(alias, False, 0, "no polling source (push data with `odfd ingest`)")
    from odfd.coordinator.ingest import pull_root

    results = await pull_root(
        workspace,
        dataset,
        engines=engines,
        fetch_uncacheable=fetch_uncacheable,
        system_time=system_time,
    )
    committed = [r for r in results if not r.up_to_date]
    if not committed:
        return PullOutcome(alias, False, 0, f"up to date ({results[-1].reason})")
    records = sum(r.num_records for r in committed)
    return PullOutcome(
        alias,
        True,
        records,
        f"{records} new record(s) in {len(committed)} block(s), head {committed[-1].new_head}",
    )


async def _set_watermark(
    workspace: Workspace, dataset_id: DatasetId, watermark: Timestamp, system_time: Timestamp | None
) -> PullOutcome:
    dataset = workspace.open_dataset(dataset_id)
    state = await dataset.chain.state()
    alias = await dataset.alias() or str(dataset_id)
    if state.kind is not DatasetKind.ROOT:
        raise PullError(f"{alias}: only a root dataset's watermark can be set by hand")
    from odfd.coordinator.ingest import set_watermark

    outcome = await set_watermark(dataset, watermark, system_time=system_time)
    if outcome.up_to_date:
        return PullOutcome(alias, False, 0, f"up to date ({outcome.reason})")
    return PullOutcome(alias, True, 0, f"watermark set to {watermark}, head {outcome.new_head}")


async def _upstream_order(workspace: Workspace, targets: list[DatasetId]) -> list[DatasetId]:
    """The targets and everything they read from, each after all of its inputs."""
    try:
        return (await workspace.graph()).upstream_order(targets)
    except DependencyCycleError as err:
        raise PullError(str(err)) from None
