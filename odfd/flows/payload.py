"""A ``WebhookCall`` task's ``payload``: text with ``${{ … }}`` templates, rendered into the
``data`` of the delivery for each run.

Templates only look values up — nothing in a manifest is ever executed. Inside the braces: one
or more alternatives separated by ``||``, the first with a value wins; an alternative is a dotted
path into the run's context (``trigger.event``, ``trigger.event.datasetAlias``,
``trigger.kind``, ``flow.name``, ``flow.id``, ``run.id``, ``datasets``), a number, or a
single-quoted string (as in fetch-step templates).

The payload's structure is read before anything is substituted, so a value can never change it:
a payload that is JSON (``'{"dataset": "${{ trigger.event.datasetAlias }}"}'``) is rendered
string by string inside that JSON; any other payload is one string. A string that is exactly one
template becomes that value as it is (``'${{ trigger.event }}'``: the event object); templates
inside longer text are replaced by the value's text (JSON for objects, lists and numbers).
A path that reaches nothing gives ``null`` (an event has no fields on a scheduled run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odfd.errors import OdfdError

_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NUMBER = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?$")
_STRING = re.compile(r"^'([^']*)'$")
ROOTS = ("trigger", "flow", "run", "datasets")
"""What a payload template may look into."""


class PayloadError(OdfdError):
    """A payload template that cannot be read (the message names the field and the template)."""


@dataclass(frozen=True, slots=True)
class RunContext:
    """What a run's payload templates see."""

    flow_id: str
    flow_name: str
    run_id: int
    trigger: str
    """``schedule`` or ``event``."""
    event: Mapping[str, Any] | None
    datasets: tuple[str, ...]

    def values(self) -> dict[str, Any]:
        return {
            "trigger": {
                "kind": self.trigger,
                "event": None if self.event is None else dict(self.event),
            },
            "flow": {"id": self.flow_id, "name": self.flow_name},
            "run": {"id": self.run_id},
            "datasets": list(self.datasets),
        }


@dataclass(frozen=True, slots=True)
class Payload:
    structure: Any
    """The payload's JSON (or the one string it is), templates not yet rendered."""

    @classmethod
    def parse(cls, text: str, where: str) -> Payload:
        """Read and check every template now (at apply), so a run never meets a bad one."""
        try:
            structure: Any = json.loads(text)
        except ValueError:
            structure = text
        for string in _strings(structure):
            for match in _TEMPLATE.finditer(string):
                for part in match.group(1).split("||"):
                    _check(part.strip(), match.group(0), where)
        return cls(structure)

    def render(self, context: RunContext) -> Any:
        values = context.values()
        return _render(self.structure, values)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _check(part: str, template: str, where: str) -> None:
    if _NUMBER.match(part) or _STRING.match(part):
        return
    if not _PATH.match(part):
        raise PayloadError(
            f"{where}: '{part}' in template '{template}' is not a path (e.g. trigger.event), "
            "a number or a 'quoted string'"
        )
    root = part.split(".", 1)[0]
    if root not in ROOTS:
        raise PayloadError(
            f"{where}: '{part}' in template '{template}' looks into {root!r}; a payload can use "
            + ", ".join(ROOTS)
        )


def _render(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _render_string(value, values)
    if isinstance(value, dict):
        return {
            _render_string(k, values, as_text=True): _render(v, values) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_render(item, values) for item in value]
    return value


def _render_string(text: str, values: dict[str, Any], *, as_text: bool = False) -> Any:
    whole = _TEMPLATE.fullmatch(text.strip())
    if whole is not None and not as_text:
        return _evaluate(whole.group(1), values)
    return _TEMPLATE.sub(lambda m: _text(_evaluate(m.group(1), values)), text)


def _evaluate(expression: str, values: dict[str, Any]) -> Any:
    for part in (p.strip() for p in expression.split("||")):
        if _NUMBER.match(part):
            return json.loads(part)
        if quoted := _STRING.match(part):
            return quoted.group(1)
        found: Any = values
        for key in part.split("."):
            found = found.get(key) if isinstance(found, dict) else None
        if found is not None:
            return found
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, separators=(",", ":"))
