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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from odfd.config import format_duration, parse_duration
from odfd.errors import ManifestError
from odfd.sync.transport.url import parse_remote
from protocol.codec.tree import from_tree
from protocol.codec.yaml import parse_documents
from protocol.errors import DecodeError, OdfError
from protocol.identity import AccountName, DatasetAlias, DatasetId, DatasetName
from protocol.model import Dataset as DatasetResource
from protocol.model import ResourcePhase, Timestamp
from protocol.resource import (
    AccountHandle,
    AccountRef,
    Invalid,
    Resource,
    ResourceAnnotations,
    ResourceConditions,
    ResourceError,
    ResourceHeaders,
    ResourceHeadersInput,
    ResourceLabels,
    ResourceName,
    ResourceStatus,
    SpecCodec,
    json_value,
    model_spec,
    read_resource,
    read_resource_input,
    resource_schema,
    write_resource,
)
from storage.catalog.resources import PutResult, ResourceRecord, ResourceTable
from storage.workspace import Workspace

DATASET_SCHEMA = "https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset"
MIRROR_SCHEMA = "https://odfd.dev/schemas/mirror/v1alpha1/Mirror"
CONDITION_BASE = "https://odfd.dev/schemas/daemon/v1alpha1/"
RECONCILE_ERROR = CONDITION_BASE + "ReconciliationError"
SYNCED = CONDITION_BASE + "Synced"
AUDITED = CONDITION_BASE + "Audited"

KINDS: Mapping[str, str] = {"Dataset": DATASET_SCHEMA, "Mirror": MIRROR_SCHEMA}
DEFAULT_ACCOUNT = AccountName("kamu")
"""Owns the datasets whose alias has no account part (kamu-cli's single-tenant account)."""
DATASET_SPEC = model_spec("DatasetSpecInput")
_MAX_ACCOUNT_SEED = 32
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def utc_now_text() -> str:
    """Now as RFC 3339 UTC with a ``Z`` (how resources and reports spell instants)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        """The spec as stored (JSON); errors read ``<where>: spec.<field>: <reason>``."""
        try:
            return cls.read(spec)
        except Invalid as error:
            raise ManifestError(
                f"{where}: spec{'.' if error.path else ''}{error.field_path()}: {error.reason}"
            ) from None

    @classmethod
    def read(cls, tree: Any) -> MirrorSpec:
        """The spec from a manifest's tree (raising ``Invalid`` with the field path, as a
        ``SpecCodec`` reader does)."""
        spec = json_value(tree)
        if not isinstance(spec, dict):
            raise Invalid("", "expected a mapping")
        unknown = sorted(set(spec) - {"source", "targets", "every", "paused"})
        if unknown:
            raise Invalid(
                "",
                f"unknown field(s) {', '.join(unknown)} (a Mirror has source, targets, every, paused)",
            )
        source = spec.get("source")
        if not isinstance(source, str) or not source:
            raise Invalid("source", "expected the URL of the dataset to mirror")
        targets = spec.get("targets", [])
        urls = [t for t in targets if isinstance(t, str) and t] if isinstance(targets, list) else []
        if not isinstance(targets, list) or len(urls) != len(targets):
            raise Invalid("targets", "expected a list of URLs")
        for field, url in [("source", source)] + [(f"targets[{i}]", t) for i, t in enumerate(urls)]:
            try:
                parse_remote(url)
            except OdfError as err:
                raise Invalid(field, str(err)) from None
        every = spec.get("every")
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, str | int | float)
        ):
            raise Invalid("every", "expected a duration such as 1h30m, or seconds")
        try:
            seconds = None if every is None else parse_duration(every)
        except ValueError as err:
            raise Invalid("every", str(err)) from None
        if seconds is not None and seconds <= 0:
            raise Invalid("every", "must be longer than zero")
        paused = spec.get("paused", False)
        if not isinstance(paused, bool):
            raise Invalid("paused", "expected true or false")
        return cls(source, tuple(urls), seconds, paused)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.targets:
            out["targets"] = list(self.targets)
        if self.every is not None:
            out["every"] = format_duration(self.every)
        if self.paused:
            out["paused"] = True
        return out


MIRROR_SPEC: SpecCodec[MirrorSpec] = SpecCodec(MirrorSpec.read, MirrorSpec.to_json)


@dataclass(frozen=True, slots=True)
class Manifest:
    schema: str
    name: str
    """The dataset alias the resource is about: ``[account/]name``."""
    spec: dict[str, Any]
    """Canonical form: what is stored and compared between applies."""
    labels: dict[str, Any]
    annotations: dict[str, Any]
    resource_id: str | None
    where: str

    @property
    def kind(self) -> str:
        return kind_of(self.schema)


def account_handle(name: AccountName) -> AccountHandle:
    """The account of that name on this node.

    Its DID is derived from the (lowercased) name as kamu-cli derives the DIDs of its predefined
    accounts, so ``kamu`` — the owner of datasets whose alias has no account part — has kamu-cli's
    single-tenant account DID; the account's resource id is that DID's text. Like kamu-cli's
    derivation, it takes names of at most 32 bytes.
    """
    seed = str(name).lower().encode()
    if len(seed) > _MAX_ACCOUNT_SEED:
        raise ManifestError(
            f"account name {name} is longer than {_MAX_ACCOUNT_SEED} bytes, which odfd cannot "
            "give a DID"
        )
    did = DatasetId.new_seeded(seed)
    return AccountHandle(id=str(did), did=did, name=name)


def _account_of(ref: AccountRef | None, where: str) -> AccountName | None:
    """The account part of the dataset alias that ``headers.account`` names (None: the node's own)."""
    if ref is None:
        return None
    if ref.name is None:
        raise ManifestError(
            f"{where}: headers.account: odfd identifies accounts by name; add `name`"
        )
    try:
        handle = account_handle(ref.name)
    except ManifestError as err:
        raise ManifestError(f"{where}: headers.account.name: {err}") from None
    for field, given, expected in (("id", ref.id, handle.id), ("did", ref.did, handle.did)):
        if given is not None and given != expected:
            raise ManifestError(
                f"{where}: headers.account.{field}: {given} is not the {field} of account "
                f"{ref.name} on this node ({expected})"
            )
    return None if ref.name == DEFAULT_ACCOUNT else ref.name


def manifest_files(paths: Iterable[Path]) -> list[Path]:
    """Files named on the command line, and the manifests (``*.yaml``, ``*.yml``, ``*.json``)
    directly in folders named there, in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file())
            )
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
                raise ManifestError(
                    f"{manifest.where}: {manifest.kind} {manifest.name} is also defined in "
                    f"{seen[key]}"
                )
            seen[key] = manifest.where
            manifests.append(manifest)
    return manifests


def parse_manifest(document: Any, where: str) -> Manifest:
    """A resource in the input form (kamu-cli's header forms: account short form, labels,
    annotations) or in the canonical form ``odfd get -o yaml`` writes (its ``status`` and
    system-populated headers are ignored)."""
    try:
        schema = resource_schema(document, where)
        if schema not in KINDS.values():
            raise ManifestError(
                f"{where}: $schema: {schema!r} is not a resource type odfd knows; "
                f"use one of {', '.join(KINDS.values())}"
            )
        codec = _spec_codec(schema)
        if isinstance(document, dict) and "status" in document:
            resource = read_resource(document, codec, where).to_input()
        else:
            resource = read_resource_input(document, codec, where)
    except ResourceError as err:
        raise ManifestError(str(err)) from None
    if schema == DATASET_SCHEMA and resource.spec.volume is not None:
        raise ManifestError(
            f"{where}: spec.volume: storage volumes are not supported; datasets are "
            "stored in the node's workspace"
        )
    headers = resource.headers
    alias = DatasetAlias(_account_of(headers.account, where), DatasetName(str(headers.name)))
    return Manifest(
        schema,
        str(alias),
        codec.write(resource.spec),
        dict(headers.labels or {}),
        dict(headers.annotations or {}),
        headers.id,
        where,
    )


def _spec_codec(schema: str) -> SpecCodec[Any]:
    return DATASET_SPEC if schema == DATASET_SCHEMA else MIRROR_SPEC


def dataset_resource(record: ResourceRecord) -> DatasetResource:
    """The stored ``Dataset`` resource as the model type (it was validated when applied); its
    headers name the dataset and the account of its alias, as the manifest did."""
    alias = DatasetAlias.parse(record.name)
    account = None if alias.account_name is None else AccountRef(name=alias.account_name)
    headers = ResourceHeadersInput(
        id=record.id, name=ResourceName(str(alias.dataset_name)), account=account
    )
    return DatasetResource(
        schema=record.schema,
        headers=headers,
        spec=from_tree(record.spec, "DatasetSpecInput", f"resource {record.id}", "spec"),
    )


PENDING_STATUS: dict[str, Any] = {"phase": "Pending", "conditions": {}}


async def apply_manifests(workspace: Workspace, manifests: list[Manifest]) -> list[PutResult]:
    table = ResourceTable(workspace.catalog)
    return [
        await table.put(
            m.schema,
            m.name,
            m.spec,
            labels=m.labels,
            annotations=m.annotations,
            resource_id=m.resource_id,
            initial_status=PENDING_STATUS,
        )
        for m in manifests
    ]


def resource_of(record: ResourceRecord) -> Resource[Any]:
    """A stored resource in the canonical RFC-018 form: ``headers.name`` is the dataset name and
    ``headers.account`` the account of its alias (this node's own account when it has none)."""
    alias = DatasetAlias.parse(record.name)
    status = record.status
    reconciled_at = status.get("reconciledAt")
    spec = (
        dataset_resource(record).spec
        if record.schema == DATASET_SCHEMA
        else MirrorSpec.from_json(record.spec, f"resource {record.id}")
    )
    return Resource(
        schema=record.schema,
        headers=ResourceHeaders(
            id=record.id,
            name=ResourceName(str(alias.dataset_name)),
            account=account_handle(alias.account_name or DEFAULT_ACCOUNT),
            labels=ResourceLabels(record.labels),
            annotations=ResourceAnnotations(record.annotations),
            generation=record.generation,
            created_at=Timestamp.from_datetime(record.created_at),
            updated_at=Timestamp.from_datetime(record.updated_at),
        ),
        spec=spec,
        status=ResourceStatus(
            phase=ResourcePhase(status["phase"]),
            conditions=ResourceConditions(status.get("conditions") or {}),
            observed_generation=status.get("observedGeneration"),
            reconciled_at=None if reconciled_at is None else Timestamp.parse_rfc3339(reconciled_at),
        ),
    )


def resource_document(record: ResourceRecord) -> dict[str, Any]:
    """A resource as ``odfd get`` shows it (YAML or JSON): the canonical form, fields in the
    reference's order."""
    return write_resource(resource_of(record), _spec_codec(record.schema))
