"""A dataset's flows, as the kamu web UI's "Flows" tab reads them over GraphQL
(``Dataset.flows``): the ``Flow`` resources that select it (their schedule and compaction
limits) and the runs the daemon recorded for them in the catalog's ``flow_runs``, newest
first. A dataset the caller may not read has no flows for them.

The catalog records a run per flow, not per dataset: the runs listed for a dataset are those of
the flows that select it now (the daemon's own rule, :func:`odfd.flows.tasks.selects`), whichever
of the flow's datasets fired a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app.resource_types import FLOW
from odfd.flows.spec import EventTrigger, FlowSpec, FlowSpecError, ScheduleTrigger
from odfd.flows.tasks import WorkspaceTargets, compaction_options, selects
from protocol.errors import OdfError
from storage.catalog.flow_runs import FlowRunRecord, FlowRunTable
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.answers import Visible
    from odfd.app.node import Node
    from storage.catalog import DatasetRecord

FlowRun = FlowRunRecord
"""One recorded run: trigger, state, start, end, error."""
RUN_STATES = ("running", "succeeded", "failed")
"""Every state a run is recorded in (``flow_runs.state``)."""


@dataclass(frozen=True, slots=True)
class RunPage:
    runs: list[FlowRun]
    """The page's runs, newest first."""
    total: int
    """Runs in all that the filter keeps."""


async def dataset_runs(
    node: Node,
    visible: Visible,
    dataset: DatasetRecord,
    *,
    states: Sequence[str] = RUN_STATES,
    page: int,
    per_page: int,
) -> RunPage:
    """Page ``page`` (from 0) of the runs in ``states`` of the flows that select ``dataset``."""
    if not visible(dataset):
        return RunPage([], 0)
    flow_ids = await _flow_ids(node, dataset)
    runs, total = await FlowRunTable(node.workspace.catalog).page(
        flow_ids, states, page * per_page, per_page
    )
    return RunPage(runs, total)


async def dataset_run(
    node: Node, visible: Visible, dataset: DatasetRecord, run_id: int
) -> FlowRunRecord | None:
    """Run ``run_id`` if it is one of a flow that selects ``dataset`` (else None, as for a run
    that does not exist)."""
    if not visible(dataset):
        return None
    run = await FlowRunTable(node.workspace.catalog).get(run_id)
    if run is None or run.flow_id not in await _flow_ids(node, dataset):
        return None
    return run


@dataclass(frozen=True, slots=True)
class DatasetFlow:
    """A ``Flow`` resource that selects a dataset, as far as kamu's flow settings show one."""

    name: str
    task_kinds: tuple[str, ...]
    cron: str | None
    """Its first ``Schedule`` trigger, as five cron fields (a macro spelled out)."""
    on_update: bool
    """Whether a ``dataset.ref.updated`` of a selected dataset runs it without a cooldown."""
    compaction: tuple[int, int] | None
    """Its ``Compaction`` task's max slice size and records, as its runs use them."""


async def dataset_flows(node: Node, visible: Visible, dataset: DatasetRecord) -> list[DatasetFlow]:
    """The flows that select ``dataset`` now, by name; none for a caller who may not read it."""
    if not visible(dataset):
        return []
    found = []
    for record, spec in await _flows_selecting(node, dataset):
        schedules = [t for t in spec.triggers if isinstance(t, ScheduleTrigger)]
        compaction = next((t for t in spec.tasks if t.kind == "Compaction"), None)
        options = None if compaction is None else compaction_options(compaction)
        found.append(
            DatasetFlow(
                record.name,
                tuple(task.kind for task in spec.tasks),
                schedules[0].cron.five_fields if schedules else None,
                any(isinstance(t, EventTrigger) and not t.cooldown for t in spec.triggers),
                None if options is None else (options.max_slice_size, options.max_slice_records),
            )
        )
    return sorted(found, key=lambda flow: flow.name)


async def _flow_ids(node: Node, dataset: DatasetRecord) -> list[str]:
    return [record.id for record, _ in await _flows_selecting(node, dataset)]


async def _flows_selecting(
    node: Node, dataset: DatasetRecord
) -> list[tuple[ResourceRecord, FlowSpec]]:
    """The ``Flow`` resources whose target selects ``dataset`` now; a flow whose spec does not
    read never ran (its controller says why)."""
    resource = (await WorkspaceTargets(node).dataset_resources()).get(dataset.alias.lower())
    found = []
    for flow in await ResourceTable(node.workspace.catalog).list(FLOW.schema):
        try:
            spec = FlowSpec.from_json(flow.spec, f"Flow {flow.name}")
        except (FlowSpecError, OdfError):
            continue
        if selects(spec.target, dataset.alias, resource):
            found.append((flow, spec))
    return found
