"""A ``Flow`` resource's spec read into a model: what it targets, what fires it, what it runs.

Read on apply (by the controller, so an invalid cron or duration fails the resource with a
condition naming it) and by the runner. A ``Source`` trigger fires when the named pushed
(``RestEndpoint``) Source holds ``minRecordsToAwait`` records, or its oldest record has waited
``maxAwaitInterval``. ``Dataset`` triggers are read and kept, but fire nothing yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from odfd.app.resource_types import type_of
from odfd.app.selectors import Selector, check_label_filter
from odfd.config import parse_duration
from odfd.errors import ManifestError, OdfdError
from odfd.flows.cron import CronError, CronSchedule
from odfd.flows.payload import Payload, PayloadError

DATASET_REF_UPDATED = "dataset.ref.updated"
TASK_KINDS = ("Ingest", "Compaction", "GarbageCollection", "WebhookCall")
_UNIT_WORDS = re.compile(r"(\d)\s*(min|mins|minutes?|secs?|seconds?|hours?|hrs?|days?)\b")
_UNIT_LETTER = {"mi": "m", "se": "s", "ho": "h", "hr": "h", "da": "d"}


class FlowSpecError(OdfdError):
    """A Flow spec this node cannot run; ``code`` names the condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def duration(text: Any, where: str) -> float:
    """Seconds in ``10min``, ``30s``, ``1h30m`` (the spec's examples spell minutes ``min``)."""
    spelled = _UNIT_WORDS.sub(lambda m: m[1] + _UNIT_LETTER[m[2][:2]], str(text))
    try:
        return parse_duration(spelled)
    except ValueError as err:
        raise FlowSpecError("invalid-duration", f"{where}: {err}") from None


@dataclass(frozen=True, slots=True)
class ScheduleTrigger:
    cron: CronSchedule


@dataclass(frozen=True, slots=True)
class EventTrigger:
    event_type: str
    cooldown: float


@dataclass(frozen=True, slots=True)
class SourceTrigger:
    source: str
    """The Source's ``[account/]name``."""
    min_records: int
    max_wait: float | None
    """Seconds the oldest buffered record may wait (None: only ``min_records`` fires)."""


@dataclass(frozen=True, slots=True)
class OtherTrigger:
    kind: str


Trigger = ScheduleTrigger | EventTrigger | SourceTrigger | OtherTrigger


@dataclass(frozen=True, slots=True)
class Task:
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    target: str | None = None
    """A WebhookCall's ``WebhookTarget`` name; an Ingest's source reference."""
    payload: str | None = None


@dataclass(frozen=True, slots=True)
class FlowSpec:
    target: Selector
    triggers: tuple[Trigger, ...]
    tasks: tuple[Task, ...]

    @classmethod
    def from_json(cls, spec: dict[str, Any], where: str) -> FlowSpec:
        try:
            target = _selector(spec.get("target"))
        except ManifestError as err:
            raise FlowSpecError("invalid-target", f"{where}: spec.target: {err}") from None
        triggers = tuple(
            _trigger(t, f"{where}: spec.triggers[{i}]")
            for i, t in enumerate(spec.get("triggers") or [])
        )
        tasks = tuple(
            _task(t, f"{where}: spec.tasks[{i}]") for i, t in enumerate(spec.get("tasks") or [])
        )
        if not tasks:
            raise FlowSpecError("no-tasks", f"{where}: spec.tasks is empty: nothing to run")
        return cls(target, triggers, tasks)


def _selector(value: Any) -> Selector:
    """The spec's ``ResourceSelector``: ``Type:name-pattern`` or ``{type, name?, labels?}``."""
    if isinstance(value, str):
        type_text, colon, name = value.partition(":")
        if not colon:
            raise ManifestError(f"{value!r} is not a selector: expected Type:name-pattern")
        return Selector(type_of(type_text).schema, name or None)
    if not isinstance(value, dict) or "type" not in value:
        raise ManifestError("a selector is Type:name-pattern or a map with `type`")
    labels = value.get("labels") or {}
    check_label_filter(labels)
    return Selector(type_of(value["type"]).schema, value.get("name"), labels)


def _trigger(value: dict[str, Any], where: str) -> Trigger:
    kind = value.get("kind")
    if kind == "Schedule":
        try:
            return ScheduleTrigger(CronSchedule.parse(str(value.get("cron", ""))))
        except CronError as err:
            raise FlowSpecError("invalid-cron", f"{where}.cron: {err}") from None
    if kind == "Event":
        events = value.get("events") or {}
        event_type = events.get("type") if isinstance(events, dict) else None
        if event_type != DATASET_REF_UPDATED:
            raise FlowSpecError(
                "unsupported-event",
                f"{where}.events.type: {event_type!r} is not an event this node emits "
                f"(it emits {DATASET_REF_UPDATED})",
            )
        cooldown = duration(value["cooldown"], f"{where}.cooldown") if "cooldown" in value else 0
        return EventTrigger(event_type, cooldown)
    if kind == "Source":
        source = value.get("source")
        if isinstance(source, dict):
            source = source.get("name")
        if not isinstance(source, str) or not source:
            raise FlowSpecError("invalid-trigger", f"{where}.source: name the Source to await")
        source = source.removeprefix("Source:")
        min_records = value.get("minRecordsToAwait", 1)
        if isinstance(min_records, bool) or not isinstance(min_records, int) or min_records < 1:
            raise FlowSpecError(
                "invalid-trigger", f"{where}.minRecordsToAwait: expected a positive integer"
            )
        max_wait = (
            duration(value["maxAwaitInterval"], f"{where}.maxAwaitInterval")
            if "maxAwaitInterval" in value
            else None
        )
        return SourceTrigger(source, min_records, max_wait)
    return OtherTrigger(str(kind))


def _task(value: dict[str, Any], where: str) -> Task:
    kind = value.get("kind")
    if kind not in TASK_KINDS:
        raise FlowSpecError("unknown-task", f"{where}.kind: {kind!r} is not one of {TASK_KINDS}")
    target = value.get("target", value.get("source"))
    if isinstance(target, dict):
        target = target.get("name")
    if kind == "Ingest":
        if not isinstance(target, str) or not target:
            raise FlowSpecError("invalid-task", f"{where}.source: name the Source to ingest from")
        target = target.removeprefix("Source:")
    payload = value.get("payload")
    if payload is not None:
        try:
            Payload.parse(str(payload), f"{where}.payload")
        except PayloadError as err:
            raise FlowSpecError("invalid-payload", str(err)) from None
    return Task(str(kind), dict(value.get("params") or {}), target, payload)
