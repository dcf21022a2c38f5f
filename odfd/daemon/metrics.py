"""Prometheus metrics of one daemon, in a registry of its own (so tests and embedders can run
several daemons in one process), served at ``/metrics`` in the text exposition format."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST

# ``*_created`` timestamp series double the output and no dashboard of ours reads them.
disable_created_metrics()


class DaemonMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.syncs = Counter(
            "odfd_syncs",
            "Mirror sync attempts by outcome (unchanged, updated, failed, cancelled).",
            ["outcome"],
            registry=r,
        )
        self.sync_failures = Counter(
            "odfd_sync_failures", "Mirror sync attempts that failed.", registry=r
        )
        self.sync_blocks = Counter(
            "odfd_sync_blocks", "Metadata blocks pulled by mirrors.", registry=r
        )
        self.sync_objects = Counter(
            "odfd_sync_objects", "Data and checkpoint objects pulled by mirrors.", registry=r
        )
        self.sync_bytes = Counter(
            "odfd_sync_bytes", "Bytes of objects pulled by mirrors.", registry=r
        )
        self.sync_duration = Histogram(
            "odfd_sync_duration_seconds",
            "Duration of mirror sync attempts.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
            registry=r,
        )
        self.pushes = Counter(
            "odfd_pushes",
            "Pushes of mirrored datasets to their targets by outcome.",
            ["outcome"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "odfd_sync_queue_depth", "Mirror syncs due and waiting for a worker.", registry=r
        )
        self.in_flight = Gauge("odfd_syncs_in_flight", "Mirror syncs running now.", registry=r)
        self.mirrors = Gauge("odfd_mirrors", "Configured mirrors by state.", ["state"], registry=r)
        self.transforms = Counter(
            "odfd_transforms",
            "Derivative updates by outcome (updated, unchanged, failed).",
            ["outcome"],
            registry=r,
        )
        self.audits = Counter(
            "odfd_audits", "Audits by scope and result.", ["scope", "status"], registry=r
        )
        self.audit_queue_depth = Gauge(
            "odfd_audit_queue_depth", "Audits waiting for a worker.", registry=r
        )
        self.datasets = Gauge("odfd_datasets", "Datasets in the workspace.", registry=r)
        self.datasets_failing = Gauge(
            "odfd_datasets_failing", "Datasets whose latest audit failed.", registry=r
        )
        self.resources = Gauge(
            "odfd_resources",
            "Declarative resources by kind and phase.",
            ["kind", "phase"],
            registry=r,
        )

        self.loop_lag = Histogram(
            "odfd_event_loop_lag_seconds",
            "How late the event loop ran a timer (what a request waited before being served).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
