"""Selecting resources in bulk (RFC-018 "Selectors"): by type, by a name pattern in SQL ``LIKE``
form (``%`` any run of characters, ``_`` one), and by labels (``odfd get``).

A label filter (the spec's ``LabelFilter``) is a map: each key a label (compared as a type
reference, so ``Team`` and ``team`` are one label) whose value must equal the given one, plus
``$not`` (a filter that must not match) and ``$or`` (a list of filters, one of which must match).
Unlike references, selectors are never resolved to ids: they match whatever fits at the time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odfd.errors import ManifestError
from protocol.errors import ParseError
from protocol.model.resource_names import TypeRef
from storage.catalog.resources import ResourceRecord


@dataclass(frozen=True, slots=True)
class Selector:
    schema: str | None = None
    """The type's ``$schema``; None: every type."""
    name: str | None = None
    """A ``LIKE`` pattern of the resource name (without its account)."""
    labels: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, record: ResourceRecord) -> bool:
        if self.schema is not None and record.schema != self.schema:
            return False
        name = record.name.rpartition("/")[2]
        if self.name is not None and not like(self.name, name):
            return False
        return label_filter_matches(self.labels, record.labels)


def like(pattern: str, text: str) -> bool:
    """SQL ``LIKE`` (case-insensitive, as resource names are)."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.IGNORECASE | re.DOTALL) is not None


def check_label_filter(value: Any) -> None:
    if not isinstance(value, dict):
        raise ManifestError(f"a label filter is a map, got {value!r}")
    for key, item in value.items():
        if key == "$not":
            check_label_filter(item)
        elif key == "$or":
            if not isinstance(item, list):
                raise ManifestError("`$or` in a label filter takes a list of filters")
            for part in item:
                check_label_filter(part)
        else:
            try:
                TypeRef(key)
            except ParseError as err:
                raise ManifestError(f"label filter key: {err}") from None


def label_filter_matches(wanted: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    by_ref = {TypeRef(k): v for k, v in labels.items()}
    for key, value in wanted.items():
        if key == "$not":
            if label_filter_matches(value, labels):
                return False
        elif key == "$or":
            if not any(label_filter_matches(part, labels) for part in value):
                return False
        elif by_ref.get(TypeRef(key), _MISSING) != value:
            return False
    return True


_MISSING = object()


def parse_label_arguments(texts: list[str]) -> dict[str, Any]:
    """``-l env=prod -l team=data`` (or ``env=prod,team=data``) as a label filter; the value
    compares as text, or as the JSON number/boolean it spells (``replicas=3``, ``public=true``)."""
    wanted: dict[str, Any] = {}
    for text in texts:
        for part in text.split(","):
            key, equals, value = part.partition("=")
            if not equals or not key:
                raise ManifestError(f"{part!r} is not a label selector: expected key=value")
            wanted[key.strip()] = _scalar(value.strip())
    check_label_filter(wanted)
    return wanted


def _scalar(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
