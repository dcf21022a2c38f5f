"""``verify``: audit datasets (metadata integrity, data integrity, reproducibility of
transforms) and report per dataset and layer (``verifier.audit``).

Called by ``odfd verify``, by the daemon for a thin client and by the daemon's audits (one
``VerifyRequest`` per scheduled audit, ``odfd.daemon.audits``); the request has a stable JSON
form and this module imports the verifier only when it runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from odfd.app.events import Event, EventSink
from odfd.app.forwarding import Request
from odfd.errors import OdfdError
from verifier.progress import Progress, Titled

if TYPE_CHECKING:
    from odfd.app.node import Node
    from protocol.identity import DatasetId
    from verifier.report import VerifyReport

#: Exit code of a verify that could not start: a dataset it names is unknown.
EXIT_CANNOT_VERIFY = 2


class VerifyTargetNotFound(OdfdError):
    """A dataset the request names is not in the workspace (nothing was verified)."""

    exit_code = EXIT_CANNOT_VERIFY


@dataclass(frozen=True, slots=True)
class VerifyRequest(Request):
    command: ClassVar[str] = "verify"
    datasets: tuple[str, ...]
    recursive: bool = False
    integrity_only: bool = False
    from_block: str | None = None
    """First block (sequence number or hash) whose data and transform are checked."""
    to_block: str | None = None
    jobs: int | None = None
    """Files checked at once (default: all cores)."""
    sample_rows: int = 5
    cross_engine: str | None = None
    full: bool = False
    """Read every data file again, not only those changed since they last verified."""


@dataclass(frozen=True, slots=True)
class LayerBegan(Event):
    """A layer of a dataset's audit starts (``verifier.progress.Progress.begin``)."""

    name: ClassVar[str] = "verifyLayerBegan"
    dataset: str
    layer: str
    """The layer's title (``verifier.report.Layer.title``)."""
    total_blocks: int | None
    total_bytes: int | None


@dataclass(frozen=True, slots=True)
class Checked(Event):
    """More of the layer was checked since the last such event."""

    name: ClassVar[str] = "verifyChecked"
    blocks: int
    size: int
    """Bytes."""


@dataclass(frozen=True, slots=True)
class LayerEnded(Event):
    name: ClassVar[str] = "verifyLayerEnded"


EVENTS: tuple[type[Event], ...] = (LayerBegan, Checked, LayerEnded)

#: Seconds between ``Checked`` events: a terminal redraws no faster (``verifier.progress``).
REPORT_SECONDS = 0.1


class ReportedProgress(Progress):
    """A verify's progress as events for a caller that draws it elsewhere (a daemon's thin
    client): checked blocks and bytes are summed and sent at most every ``REPORT_SECONDS``.
    Workers advance it from their threads, so ``sink`` must take events from any thread."""

    def __init__(self, sink: EventSink, clock: Callable[[], float] = time.monotonic) -> None:
        self._sink = sink
        self._clock = clock
        self._lock = threading.Lock()
        self._blocks = self._bytes = 0
        self._sent_at = 0.0

    def begin(
        self, dataset: str, layer: Titled, *, blocks: int | None = None, bytes: int | None = None
    ) -> None:
        with self._lock:
            self._send()
            self._sink.emit(LayerBegan(dataset, layer.title, blocks, bytes))
            self._sent_at = self._clock()

    def advance(self, *, blocks: int = 0, bytes: int = 0) -> None:
        with self._lock:
            self._blocks += blocks
            self._bytes += bytes
            if self._clock() - self._sent_at >= REPORT_SECONDS:
                self._send()

    def end(self) -> None:
        with self._lock:
            self._send()
            self._sink.emit(LayerEnded())

    def _send(self) -> None:
        if self._blocks or self._bytes:
            self._sink.emit(Checked(self._blocks, self._bytes))
            self._blocks = self._bytes = 0
            self._sent_at = self._clock()


def check_block_selector(text: str) -> str:
    """``text`` when it selects a block (a sequence number or a block hash), kept as text (the
    request carries it so); ``protocol.errors.ParseError`` saying why otherwise."""
    from verifier.selection import parse_block_selector

    parse_block_selector(text)
    return text


async def verify(
    node: Node, request: VerifyRequest, progress: Progress | None = None
) -> VerifyReport:
    """The audit report of the datasets the request names (``VerifyTargetNotFound`` if one is
    unknown)."""
    from odfd.coordinator.commit import RUN_DIR
    from storage.errors import DatasetNotFoundError
    from verifier.audit import VerifyOptions, default_jobs
    from verifier.audit import verify as audit
    from verifier.selection import RangeRequest, parse_block_selector

    def selector(text: str | None) -> Any:
        return None if text is None else parse_block_selector(text)

    options = VerifyOptions(
        recursive=request.recursive,
        integrity_only=request.integrity_only,
        block_range=RangeRequest(selector(request.from_block), selector(request.to_block)),
        jobs=request.jobs if request.jobs is not None else default_jobs(),
        sample_rows=request.sample_rows,
        scratch_dir=node.workspace.root / RUN_DIR,
        cross_engine=request.cross_engine,
        audit_state="full" if request.full else "incremental",
    )
    try:
        return await audit(
            node.workspace, list(request.datasets), options, progress, engines=node.engines
        )
    except DatasetNotFoundError as err:
        raise VerifyTargetNotFound(str(err)) from None


def summarize(report: VerifyReport, dataset_id: DatasetId) -> str:
    """One line: each layer's status, and for the first layer that did not pass, why (what the
    daemon records of an audit of ``dataset_id``)."""
    from verifier.report import Role, Status

    target = next(
        (d for d in report.datasets if d.dataset_id == dataset_id and d.role is Role.TARGET),
        report.datasets[-1],
    )
    parts = [f"{layer.layer.title} {layer.status}" for layer in target.layers]
    for layer in target.layers:
        if layer.status in (Status.FAILED, Status.CANNOT_VERIFY, Status.NOT_REEXECUTABLE):
            detail = str(layer.findings[0]) if layer.findings else (layer.reason or "")
            return f"{layer.layer.title} {layer.status}: {detail}"
    return ", ".join(parts)


def rendered(report: VerifyReport, output: str) -> str:
    """The report as ``odfd verify --output`` prints it (``json``: docs/verify-report.md)."""
    from verifier.report_text import render_text

    return report.dumps() + "\n" if output == "json" else render_text(report)


def result_json(report: VerifyReport) -> dict[str, Any]:
    """A verify's result as a daemon sends it: the exit code and the report rendered as each
    ``--output`` shows it (so that a thin client loads no report model)."""
    return {
        "exitCode": report.exit_code,
        **{out: rendered(report, out) for out in ("text", "json")},
    }
