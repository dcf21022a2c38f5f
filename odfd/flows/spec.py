"""A ``Flow`` resource's spec read into a model: what it targets, what fires it, what it runs.

Read on apply (by the controller, so an invalid cron or duration fails the resource with a
condition naming it) and by the runner. ``Source`` and ``Dataset`` triggers are read and kept,
but fire nothing until this node runs Source resources.
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
class OtherTrigger:
    kind: str


Trigger = ScheduleTrigger | EventTrigger | OtherTrigger


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
    return OtherTrigger(str(kind))


def _task(value: dict[str, Any], where: str) -> Task:
    kind = value.get("kind")
    if kind not in TASK_KINDS:
        raise FlowSpecError("unknown-task", f"{where}.kind: {kind!r} is not one of {TASK_KINDS}")
    target = value.get("target", value.get("source"))
    if isinstance(target, dict):
        target = target.get("name")
    return Task(str(kind), dict(value.get("params") or {}), target, value.get("payload"))
