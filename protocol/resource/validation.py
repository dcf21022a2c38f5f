"""Resource documents checked against the spec's JSON Schemas (``protocol/spec/schemas``).

The spec marks every embedded object ``unevaluatedProperties: false``, so a field the schema does
not declare is refused; the error names it with its path (``spec.ingress.urll``). Every schema is
registered under its ``$id`` from the packaged copy, so validation never reaches the network. The
schemas declare their own metaschemas in ``$schema``; they are all Draft 2020-12 underneath, so
that validator is used for every one of them. String formats (``resource-name``, ``type-ref``) are
not asserted here: the typed readers parse those and explain what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from protocol.errors import DecodeError


class SchemaViolation(DecodeError):
    """A resource document does not match its type's JSON Schema."""


@cache
def _registry() -> Registry[Any]:
    root = resources.files("protocol.spec") / "schemas"
    entries = []
    for context in root.iterdir():
        if not context.is_dir():
            continue
        for version in context.iterdir():
            if not version.is_dir():
                continue
            for file in version.iterdir():
                if file.name.endswith(".json"):
                    schema = json.loads(file.read_text())
                    entries.append((schema["$id"], DRAFT202012.create_resource(schema)))
    registry: Registry[Any] = Registry().with_resources(entries).crawl()  # anchors found once
    return registry


@cache
def _validator(uri: str) -> Draft202012Validator:
    """One validator per schema, kept: the schema itself at the root (no ``$ref`` to look up
    on every call), its references resolved in the registry built once."""
    registry = _registry()
    return Draft202012Validator(registry.contents(uri), registry=registry)


def validate(document: Any, uri: str, where: str = "") -> None:
    """Raise :class:`SchemaViolation` naming the first offending field of ``document``."""
    errors = [_branch(e) for e in _validator(uri).iter_errors(document)]
    if errors:
        # The deepest error is the cause: a bad field inside an object also leaves that object's
        # other fields "unevaluated" one level up.
        depth = max(len(e.absolute_path) for e in errors)
        deepest = [e for e in errors if len(e.absolute_path) == depth]
        # Then: an unknown `kind` (which leaves the object's fields unevaluated too), an unknown
        # field (often the misspelling of a required one), anything else.
        rank = min(_RANK.get(str(e.validator), 2) for e in deepest)
        error = best_match(e for e in deepest if _RANK.get(str(e.validator), 2) == rank)
        assert error is not None
        raise SchemaViolation(": ".join(p for p in (where, _describe(error)) if p))


def _describe(error: ValidationError) -> str:
    path = _path(error.absolute_path)
    if error.validator == "unevaluatedProperties":
        unexpected = _UNEXPECTED.findall(error.message)
        # A field the schema declares is "unevaluated" too when its branch failed: name the rest.
        declared = _declared(error.schema, None, error.instance)
        unknown = [name for name in unexpected if name not in declared] or unexpected
        if unknown:
            names = ", ".join(f"`{name}`" for name in unknown)
            plural = "s" if len(unknown) > 1 else ""
            return f"{_join(path, unknown[0])}: unknown field{plural} {names}"
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        kinds = _branch_kinds(error.schema)
        if kinds and error.instance.get("kind") not in kinds:
            return (
                f"{_join(path, 'kind')}: unknown kind {error.instance.get('kind')!r}, expected one"
                f" of {', '.join(kinds)}"
            )
    return f"{path or '(document)'}: {error.message}"


_RANK = {"oneOf": 0, "unevaluatedProperties": 1}
_UNEXPECTED = re.compile(r"'([^']*)'")


def _path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, str(part))
    return path


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _branch(error: ValidationError) -> ValidationError:
    """Into a failed ``oneOf``: the branch whose ``kind`` the value names, or for a
    struct-or-string the branch of the value's JSON type; stays put when none fits."""
    while error.validator == "oneOf" and error.context:
        branches: dict[int, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        kinds = _branch_kinds(error.schema)
        chosen: list[ValidationError] | None = None
        if kinds and isinstance(error.instance, dict):
            kind = error.instance.get("kind")
            if kind not in kinds:
                return error
            chosen = branches.get(kinds.index(kind))
        else:
            typed = [
                subs
                for subs in branches.values()
                if not any(s.validator == "type" and not s.relative_path for s in subs)
            ]
            chosen = typed[0] if len(typed) == 1 else None
        if not chosen:
            return error
        match = best_match(chosen)
        if match is None:
            return error
        error = match
    return error


def _branch_kinds(schema: Any) -> list[Any]:
    """The ``kind`` constants of a ``oneOf``'s branches (empty when it is not kind-tagged)."""
    if not isinstance(schema, dict):
        return []
    kinds = []
    for branch in schema.get("oneOf", []):
        parts = [branch, *branch.get("allOf", [])]
        consts = [p.get("properties", {}).get("kind", {}).get("const") for p in parts]
        const = next((c for c in consts if c is not None), None)
        if const is None:
            return []
        kinds.append(const)
    return kinds


def _declared(schema: Any, document: Any, instance: Any) -> set[str]:
    """The property names ``schema`` declares for ``instance``, through ``$ref``, ``allOf`` and
    the ``oneOf`` branch of the instance's ``kind``."""
    if not isinstance(schema, dict):
        return set()
    names = set(schema.get("properties", {}))
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref.startswith("#/") and document is not None:
            target: Any = document
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            names |= _declared(target, document, instance)
        elif not ref.startswith("#"):
            try:
                referenced = _registry().contents(ref)
            except LookupError:
                referenced = {}
            names |= _declared(referenced, referenced, instance)
    for part in schema.get("allOf", []):
        names |= _declared(part, document, instance)
    branches = schema.get("oneOf", [])
    kinds = _branch_kinds(schema)
    if kinds and isinstance(instance, dict) and instance.get("kind") in kinds:
        branches = [branches[kinds.index(instance["kind"])]]
    for part in branches:
        names |= _declared(part, document, instance)
    return names
