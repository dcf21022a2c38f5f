"""Declarative resources (RFC-018): reading manifests and applying them to the catalog.

Two kinds are understood:

* ``Dataset`` (``$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset``): the
  desired metadata of a dataset named ``headers.name`` (``spec`` is the spec's
  ``DatasetSpecInput``: ``kind``, ``metadata`` events, optional ``did``), i.e. a
  ``DatasetSnapshot`` in resource form;
* ``Mirror`` (``$schema:`` :data:`MIRROR_SCHEMA`), odfd's own: keep the local dataset
  ``headers.name`` in sync with ``spec.source`` and push it on to ``spec.targets`` (see
  ``docs/daemon.md`` for every field).

Applying validates every manifest first (nothing is stored if one is invalid), then stores each:
a new resource gets an id and generation 1; a changed ``spec``/labels/annotations bumps the
generation and sets the phase back to ``Pending``; an unchanged manifest changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.codec.tree import from_tree, to_tree
from protocol.codec.yaml import parse_documents
from protocol.errors import DecodeError, OdfError, ParseError
from protocol.identity import DatasetAlias
from protocol.model import Dataset as DatasetResource
from storage.catalog.resources import PutResult, ResourceRecord, ResourceTable
from storage.workspace import Workspace

from odfd.config import format_duration, parse_duration
from odfd.sync.remote import parse_remote_url

DATASET_SCHEMA = "https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset"
MIRROR_SCHEMA = "https://odfd.dev/schemas/mirror/v1alpha1/Mirror"
CONDITION_BASE = "https://odfd.dev/schemas/daemon/v1alpha1/"
RECONCILE_ERROR = CONDITION_BASE + "ReconciliationError"
SYNCED = CONDITION_BASE + "Synced"
AUDITED = CONDITION_BASE + "Audited"

KINDS: Mapping[str, str] = {"Dataset": DATASET_SCHEMA, "Mirror": MIRROR_SCHEMA}
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(OdfError):
    """A resource manifest is invalid; the message names the file, document and field."""


def kind_of(schema: str) -> str:
    return next((kind for kind, uri in KINDS.items() if uri == schema), schema)


def schema_of_kind(text: str) -> str:
    """``dataset``, ``datasets``, ``Mirror``, … or a full ``$schema`` URI."""
    if "://" in text:
        return text
    wanted = text.lower().removesuffix("s")
    for kind, schema in KINDS.items():
        if kind.lower() == wanted:
            return schema
    raise ManifestError(f"unknown resource kind {text!r}; known: {', '.join(KINDS)}")


@dataclass(frozen=True, slots=True)
class MirrorSpec:
    source: str
    targets: tuple[str, ...] = ()
    every: float | None = None
    """Seconds between syncs; ``None``: the node's ``[sync] default_interval``."""
    paused: bool = False

    @classmethod
    def from_json(cls, spec: Any, where: str) -> MirrorSpec:
        if not isinstance(spec, dict):
            raise ManifestError(f"{where}: spec: expected a mapping")
        unknown = sorted(set(spec) - {"source", "targets", "every", "paused"})
        if unknown:
            raise ManifestError(f"{where}: spec: unknown field(s) {', '.join(unknown)} "
                                "(a Mirror has source, targets, every, paused)")
        source = spec.get("source")
        if not isinstance(source, str) or not source:
            raise ManifestError(f"{where}: spec.source: expected the URL of the dataset to mirror")
        targets = spec.get("targets", [])
        if not isinstance(targets, list) or not all(isinstance(t, str) and t for t in targets):
            raise ManifestError(f"{where}: spec.targets: expected a list of URLs")
        for field, url in [("source", source)] + [(f"targets[{i}]", t) for i, t in enumerate(targets)]:
            try:
                parse_remote_url(url)
            except OdfError as err:
                raise ManifestError(f"{where}: spec.{field}: {err}") from None
        every = spec.get("every")
        try:
            seconds = None if every is None else parse_duration(every)
        except ValueError as err:
            raise ManifestError(f"{where}: spec.every: {err}") from None
        if seconds is not None and seconds <= 0:
            raise ManifestError(f"{where}: spec.every: must be longer than zero")
        paused = spec.get("paused", False)
        if not isinstance(paused, bool):
            raise ManifestError(f"{where}: spec.paused: expected true or false")
        return cls(source, tuple(targets), seconds, paused)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.targets:
            out["targets"] = list(self.targets)
        if self.every is not None:
            out["every"] = format_duration(self.every)
        if self.paused:
            out["paused"] = True
        return out


@dataclass(frozen=True, slots=True)
class Manifest:
    schema: str
    name: str
    spec: dict[str, Any]
    """Canonical form: what is stored and compared between applies."""
    labels: dict[str, Any]
    annotations: dict[str, Any]
    resource_id: str | None
    where: str

    @property
    def kind(self) -> str:
        return kind_of(self.schema)


def manifest_files(paths: Iterable[Path]) -> list[Path]:
    """Files named on the command line, and the manifests (``*.yaml``, ``*.yml``, ``*.json``)
    directly in folders named there, in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise ManifestError(f"{path}: no such file or folder")
    return files


def load_manifests(paths: Iterable[Path]) -> list[Manifest]:
    manifests: list[Manifest] = []
    seen: dict[tuple[str, str], str] = {}
    for path in manifest_files(paths):
        try:
            documents = parse_documents(path.read_bytes(), str(path))
        except DecodeError as err:
            raise ManifestError(str(err)) from None
        for n, document in enumerate(documents):
            if document is None:
                continue
            manifest = parse_manifest(document, f"{path} document {n}")
            key = (manifest.schema, manifest.name.lower())
            if key in seen:
                raise ManifestError(f"{manifest.where}: {manifest.kind} {manifest.name} is also defined in "
                                    f"{seen[key]}")
            seen[key] = manifest.where
            manifests.append(manifest)
    return manifests


def parse_manifest(document: Any, where: str) -> Manifest:
    if not isinstance(document, dict):
        raise ManifestError(f"{where}: expected a resource manifest (a mapping with $schema, headers, spec)")
    schema = document.get("$schema")
    if schema not in KINDS.values():
        raise ManifestError(f"{where}: $schema: {schema!r} is not a resource type odfd knows; "
                            f"use one of {', '.join(KINDS.values())}")
    unknown = sorted(set(document) - {"$schema", "headers", "spec", "status"})
    if unknown:
        raise ManifestError(f"{where}: unknown top-level field(s) {', '.join(unknown)}")
    headers = document.get("headers")
    if not isinstance(headers, dict):
        raise ManifestError(f"{where}: headers: expected a mapping with at least a name")
    allowed_headers = {"id", "name", "labels", "annotations"}
    unknown = sorted(set(headers) - allowed_headers)
    if unknown:
        raise ManifestError(f"{where}: headers: field(s) {', '.join(unknown)} are not supported here "
                            f"(odfd reads {', '.join(sorted(allowed_headers))})")
    name = headers.get("name")
    try:
        name = str(DatasetAlias.parse(name)) if isinstance(name, str) else None
    except ParseError as err:
        raise ManifestError(f"{where}: headers.name: {err}") from None
    if name is None:
        raise ManifestError(f"{where}: headers.name: expected the dataset's name")
    labels, annotations = headers.get("labels") or {}, headers.get("annotations") or {}
    for field, value in (("labels", labels), ("annotations", annotations)):
        if not isinstance(value, dict):
            raise ManifestError(f"{where}: headers.{field}: expected a mapping")
    resource_id = headers.get("id")
    if resource_id is not None and not isinstance(resource_id, str):
        raise ManifestError(f"{where}: headers.id: expected a resource id (UUID)")
    if schema == DATASET_SCHEMA:
        try:
            given = {key: value for key, value in document.items() if key != "status"}
            resource: DatasetResource = from_tree(given, "Dataset", where)
        except DecodeError as err:
            raise ManifestError(str(err)) from None
        if resource.spec.volume is not None:
            raise ManifestError(f"{where}: spec.volume: storage volumes are not supported; datasets are "
                                "stored in the node's workspace")
        spec = to_tree(resource.spec)
    else:
        spec = MirrorSpec.from_json(document.get("spec"), where).to_json()
    return Manifest(schema, name, spec, labels, annotations, resource_id, where)


def dataset_resource(record: ResourceRecord) -> DatasetResource:
    """The stored ``Dataset`` resource as the model type (it was validated when applied)."""
    return from_tree({"$schema": record.schema, "headers": {"name": record.name}, "spec": record.spec},
                     "Dataset", f"resource {record.id}")


PENDING_STATUS: dict[str, Any] = {"phase": "Pending", "conditions": {}}


async def apply_manifests(workspace: Workspace, manifests: list[Manifest]) -> list[PutResult]:
    table = ResourceTable(workspace.catalog)
    return [await table.put(m.schema, m.name, m.spec, labels=m.labels, annotations=m.annotations,
                            resource_id=m.resource_id, initial_status=PENDING_STATUS) for m in manifests]


def resource_document(record: ResourceRecord) -> dict[str, Any]:
    """A resource as ``odfd get`` shows it: ``$schema``, ``headers``, ``spec``, ``status``."""
    headers: dict[str, Any] = {"id": record.id, "name": record.name}
    if record.labels:
        headers["labels"] = record.labels
    if record.annotations:
        headers["annotations"] = record.annotations
    headers.update({"generation": record.generation,
                    "createdAt": record.created_at.isoformat().replace("+00:00", "Z"),
                    "updatedAt": record.updated_at.isoformat().replace("+00:00", "Z")})
    return {"$schema": record.schema, "headers": headers, "spec": record.spec, "status": record.status}
