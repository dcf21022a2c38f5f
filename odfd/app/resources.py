"""Declarative resources (RFC-018): reading manifests and applying them to the catalog.

Every type of :mod:`odfd.app.resource_types` is read the same way: ``$schema`` (its URL or short
type name), ``headers`` (name, account, labels, annotations, optionally the id) and ``spec``,
checked against the spec's JSON Schema (an unknown field is refused with its path), then read by
the type's own reader where it has one:

* ``Dataset``: the desired metadata of a dataset named ``headers.name`` (``spec`` is the spec's
  ``DatasetSpecInput``: ``kind``, ``metadata`` events, optional ``did``), i.e. a
  ``DatasetSnapshot`` in resource form;
* ``Mirror`` (``$schema:`` :data:`MIRROR_SCHEMA`), odfd's own: keep the local dataset
  ``headers.name`` in sync with ``spec.source`` and push it on to ``spec.targets`` (see
  ``docs/daemon.md`` for every field).

A resource is identified by (account, type, name): the stored name is ``[account/]name``, as a
dataset alias is. Applying validates every manifest first (nothing is stored if one is invalid),
then stores each: a new resource gets an id and generation 1; a changed ``spec``/labels/annotations
bumps the generation and sets the phase back to ``Pending``; an unchanged manifest changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from odfd.app.node_secrets import node_secrets
from odfd.app.references import references_of
from odfd.app.resource_datasets import FOLLOWED, refuse_stale_manifests
from odfd.app.resource_types import (
    DATASET,
    MIRROR,
    RESOURCE,
    short_name,
    type_of,
)
from odfd.app.secret_values import check_encodings, encrypt_secrets
from odfd.app.write_log import Actor, local_actor, record_write
from odfd.config import format_duration, parse_duration
from odfd.errors import ManifestError
from odfd.sync.transport.url import parse_remote
from protocol.codec.tree import from_tree
from protocol.codec.yaml import parse_documents
from protocol.errors import DecodeError, OdfError
from protocol.identity import AccountName, DatasetAlias, DatasetId, DatasetName
from protocol.model import Dataset as DatasetResource
from protocol.model import DatasetSnapshot, DatasetSpecInput, ResourcePhase, Timestamp
from protocol.resource import (
    GENERIC_SPEC,
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
from protocol.resource.validation import SchemaViolation, validate
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resource_references import (
    ReferenceRow,
    ResourceReferenceTable,
    WrittenReference,
)
from storage.catalog.resources import PutResult, ResourceRecord, ResourceTable
from storage.workspace import Workspace

DATASET_SCHEMA = DATASET.schema
MIRROR_SCHEMA = MIRROR.schema
CONDITION_BASE = "https://odfd.dev/schemas/daemon/v1alpha1/"
RECONCILE_ERROR = CONDITION_BASE + "ReconciliationError"
REFERENCES = CONDITION_BASE + "References"
"""Set while a reference of the resource does not reach an existing resource."""
SYNCED = CONDITION_BASE + "Synced"
AUDITED = CONDITION_BASE + "Audited"

DEFAULT_ACCOUNT = AccountName("kamu")
"""Owns the datasets whose alias has no account part (kamu-cli's single-tenant account)."""
DATASET_SPEC = model_spec("DatasetSpecInput")
_MAX_ACCOUNT_SEED = 32
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def utc_now_text() -> str:
    """Now as RFC 3339 UTC with a ``Z`` (how resources and reports spell instants)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def kind_of(schema: str) -> str:
    return short_name(schema)


def schema_of_kind(text: str) -> str:
    """``dataset``, ``datasets``, ``Mirror``, ``SecretSet``, … or a full ``$schema`` URI."""
    return type_of(text).schema


@dataclass(frozen=True, slots=True)
class MirrorSpec:
    source: str
    targets: tuple[str, ...] = ()
    every: float | None = None
    """Seconds between syncs; ``None``: the node's ``[sync] default_interval``."""
    paused: bool = False
    subscribe: bool = False
    """Ask the source node (an odfd node over HTTP) to notify this node of head moves by
    webhook, and sync on each (polling stays the fallback)."""

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
        unknown = sorted(set(spec) - {"source", "targets", "every", "paused", "subscribe"})
        if unknown:
            raise Invalid(
                "",
                f"unknown field(s) {', '.join(unknown)} (a Mirror has source, targets, every, "
                "paused, subscribe)",
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
        subscribe = spec.get("subscribe", False)
        if not isinstance(subscribe, bool):
            raise Invalid("subscribe", "expected true or false")
        return cls(source, tuple(urls), seconds, paused, subscribe)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        if self.targets:
            out["targets"] = list(self.targets)
        if self.every is not None:
            out["every"] = format_duration(self.every)
        if self.paused:
            out["paused"] = True
        if self.subscribe:
            out["subscribe"] = True
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
    def documents() -> Iterator[tuple[Any, str]]:
        for path in manifest_files(paths):
            try:
                parsed = parse_documents(path.read_bytes(), str(path))
            except DecodeError as err:
                raise ManifestError(str(err)) from None
            for n, document in enumerate(parsed):
                if document is not None:
                    yield document, f"{path} document {n}"

    return read_documents(documents())


def read_documents(
    documents: Iterable[tuple[Any, str]], account: AccountName | None = None
) -> list[Manifest]:
    """Manifests from parsed documents (each with where it came from, for errors), checked as one
    batch: a type and name declared twice is refused. A document that names no account is the
    ``account``'s (None: the node's own)."""
    manifests: list[Manifest] = []
    seen: dict[tuple[str, str], str] = {}
    for document, where in documents:
        if account is not None and isinstance(document, dict):
            headers = document.get("headers")
            if isinstance(headers, dict) and "account" not in headers:
                document = {**document, "headers": {**headers, "account": {"name": str(account)}}}
        manifest = parse_manifest(document, where)
        key = (manifest.schema, manifest.name.lower())
        if key in seen:
            raise ManifestError(
                f"{manifest.where}: {manifest.kind} {manifest.name} is also defined in {seen[key]}"
            )
        seen[key] = manifest.where
        manifests.append(manifest)
    return manifests


def parse_manifest(document: Any, where: str) -> Manifest:
    """A resource in the input form (kamu-cli's header forms: account short form, labels,
    annotations) or in the canonical form ``odfd get -o yaml`` writes (its ``status`` and
    system-populated headers are ignored)."""
    try:
        written = resource_schema(document, where)
    except ResourceError as err:
        raise ManifestError(str(err)) from None
    try:
        kind = type_of(written)
    except ManifestError as err:
        raise ManifestError(f"{where}: $schema: {err}") from None
    tree = json_value({**document, "$schema": kind.schema})
    assert isinstance(tree, dict)  # resource_schema read `$schema` from it
    canonical = "status" in tree
    if kind is RESOURCE:
        return _generic_resource(tree, canonical, where)
    # A Dataset's spec is read by the reference's own rules (its reader names unknown fields too,
    # and accepts the spellings kamu-cli does, e.g. `type: int64`, that the schema's enums do not).
    if kind.spec_schema is not None and kind is not DATASET:
        try:
            validate(_input_form(tree) if canonical else tree, kind.schema, where)
        except SchemaViolation as err:
            raise ManifestError(str(err)) from None
    codec = _spec_codec(kind.schema)
    volume = _take_volume(tree) if kind is DATASET else None
    try:
        if canonical:
            resource = read_resource(tree, codec, where).to_input()
        else:
            resource = read_resource_input(tree, codec, where)
    except ResourceError as err:
        raise ManifestError(str(err)) from None
    spec = codec.write(resource.spec)
    if volume is not None:
        spec["volume"] = volume
    check_encodings(kind.schema, spec, where)
    references_of(kind.schema, spec, where)
    headers = resource.headers
    account = _account_of(headers.account, where)
    if kind is DATASET:
        name = str(DatasetAlias(account, DatasetName(str(headers.name))))
    else:
        name = str(headers.name) if account is None else f"{account}/{headers.name}"
    return Manifest(
        kind.schema,
        name,
        spec,
        dict(headers.labels or {}),
        dict(headers.annotations or {}),
        headers.id,
        where,
    )


REMOTE_ANNOTATION = CONDITION_BASE + "ViewOf"
"""Set on a generic ``Resource`` that shows another node's resource: whose it is there."""
_SECRET_FIELDS = frozenset({"secret", "secrets", "password", "token", "apiKey", "api_key"})


def _generic_resource(tree: dict[str, Any], canonical: bool, where: str) -> Manifest:
    """A generic ``Resource`` (its ``$schema`` names no type): stored as given, reconciled by
    nothing (its status says so). One whose account is not an account of this node (another
    node's resource as that node shows it, e.g. the spec's canonical webhook view) is stored as
    a view: under this node's own account with an id of its own, its identity there kept in the
    ``…/daemon/v1alpha1/ViewOf`` annotation. So it never takes an id or an account this node did not
    give, and the identity checks of every resource of this node stay as they are."""
    try:
        validate(tree, RESOURCE.schema if canonical else RESOURCE.schema + "Input", where)
    except SchemaViolation as err:
        raise ManifestError(str(err)) from None
    headers: dict[str, Any] = tree["headers"]
    spec: dict[str, Any] = tree["spec"]
    _refuse_plain_secrets(spec, f"{where}: spec", where)
    name = str(headers["name"])
    annotations = dict(headers.get("annotations") or {})
    account = headers.get("account")
    account_name = account.get("name") if isinstance(account, dict) else account
    foreign = _foreign_account(account, where)
    if foreign is not None:
        which = f"resource {headers['id']}" if headers.get("id") else "a resource"
        annotations[REMOTE_ANNOTATION] = f"{which} of {foreign}"
        resource_id = None
        stored = name
    else:
        try:
            owner = None if account_name is None else AccountName(str(account_name))
        except OdfError as err:
            raise ManifestError(f"{where}: headers.account.name: {err}") from None
        owner = None if owner == DEFAULT_ACCOUNT else owner
        resource_id = headers.get("id")
        stored = name if owner is None else f"{owner}/{name}"
    return Manifest(
        RESOURCE.schema,
        stored,
        spec,
        dict(headers.get("labels") or {}),
        annotations,
        resource_id,
        where,
    )


def _foreign_account(account: Any, where: str) -> str | None:
    """``account`` (a handle or a name) described, when it is not an account of this node (its
    id or DID is not the one this node gives that name); ``None`` when it is."""
    if not isinstance(account, dict):
        return None
    name = account.get("name")
    if not isinstance(name, str):
        return f"account {account.get('did') or account.get('id')}"
    try:
        handle = account_handle(AccountName(name))
    except (OdfError, ManifestError) as err:
        raise ManifestError(f"{where}: headers.account.name: {err}") from None
    given_id, given_did = account.get("id"), account.get("did")
    if given_id not in (None, handle.id) or given_did not in (None, str(handle.did)):
        parts = [f"id {given_id}" if given_id else "", f"did {given_did}" if given_did else ""]
        return f"account {name} ({', '.join(p for p in parts if p)}) of another node"
    return None


def _refuse_plain_secrets(value: Any, path: str, where: str) -> None:
    """odfd cannot know which fields of a generic resource are secrets; those named like one must
    come encrypted (``{value, contentEncoding: jwe}``), never to be stored in plain text."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            if key in _SECRET_FIELDS and isinstance(item, str | int | float):
                raise ManifestError(
                    f"{here}: a generic Resource is stored as given, and this looks like a plain "
                    "secret: give it encrypted ({value: <JWE>, contentEncoding: jwe}) or apply "
                    "the resource with its own type's $schema"
                )
            _refuse_plain_secrets(item, here, where)
    elif isinstance(value, list):
        for n, item in enumerate(value):
            _refuse_plain_secrets(item, f"{path}[{n}]", where)


_SYSTEM_HEADERS = ("generation", "createdAt", "updatedAt", "deletedAt")


def _take_volume(tree: dict[str, Any]) -> Any:
    """A Dataset's ``volume`` (a reference to a ``PersistentVolume``, in any of its forms, read by
    ``odfd.app.references``), taken out of the spec before the model reads the rest."""
    spec = tree.get("spec")
    if not isinstance(spec, dict) or "volume" not in spec:
        return None
    tree["spec"] = {k: v for k, v in spec.items() if k != "volume"}
    return spec["volume"]


def _input_form(tree: dict[str, Any]) -> dict[str, Any]:
    """The canonical form (``odfd get -o yaml``) as its input form, to validate it."""
    headers = tree.get("headers")
    if isinstance(headers, dict):
        headers = {k: v for k, v in headers.items() if k not in _SYSTEM_HEADERS}
    return {k: v for k, v in tree.items() if k != "status"} | {"headers": headers}


def split_name(stored: str) -> tuple[AccountName | None, str]:
    """A stored ``[account/]name`` as its account (None: the node's own) and resource name."""
    account, slash, name = stored.rpartition("/")
    return (AccountName(account) if slash else None), name


def _spec_codec(schema: str) -> SpecCodec[Any]:
    if schema == DATASET_SCHEMA:
        return DATASET_SPEC
    return MIRROR_SPEC if schema == MIRROR_SCHEMA else GENERIC_SPEC


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
        spec=_dataset_spec(record.spec, f"resource {record.id}"),
    )


def manifest_snapshot(manifest: Manifest) -> DatasetSnapshot:
    """A ``Dataset`` manifest as the snapshot its dataset is created from (by the controller)."""
    spec = _dataset_spec(manifest.spec, manifest.where)
    return DatasetSnapshot(
        name=DatasetAlias.parse(manifest.name), kind=spec.kind, metadata=spec.metadata
    )


def _dataset_spec(spec: Mapping[str, Any], where: str) -> DatasetSpecInput:
    """A ``Dataset``'s spec as the model's ``DatasetSpecInput``, its ``volume`` (a reference to
    another resource: see ``_take_volume``) left out."""
    return from_tree(
        {k: v for k, v in spec.items() if k != "volume"}, "DatasetSpecInput", where, "spec"
    )


PENDING_STATUS: dict[str, Any] = {"phase": "Pending", "conditions": {}}


async def apply_manifests(
    workspace: Workspace, manifests: list[Manifest], *, actor: Actor | None = None
) -> list[PutResult]:
    """Store the manifests, then record and resolve their references (those among the manifests
    applied together resolve to each other, whatever their order); each change is recorded as
    done by ``actor`` (default: a local command)."""
    table = ResourceTable(workspace.catalog)
    await refuse_stale_manifests(workspace, manifests)
    secrets = node_secrets(workspace.keys)
    results = []
    for m in manifests:
        previous = await (
            table.get(m.resource_id) if m.resource_id is not None else table.find(m.schema, m.name)
        )
        spec = encrypt_secrets(m.schema, m.spec, previous and previous.spec, secrets)
        result = await table.put(
            m.schema,
            m.name,
            spec,
            labels=m.labels,
            annotations=m.annotations,
            resource_id=m.resource_id,
            initial_status=PENDING_STATUS,
        )
        if FOLLOWED in (result.record.status.get("conditions") or {}):
            # The manifest passed refuse_stale_manifests: it now says what the user means.
            await table.update_status(result.record.id, conditions={FOLLOWED: None})
        results.append(result)
    references = ResourceReferenceTable(workspace.catalog)
    for result in results:
        record = result.record
        written = [
            WrittenReference(ref.path, ref.schema, ref.name, ref.id, ref.key)
            for ref in references_of(record.schema, record.spec)
        ]
        await references.replace(record.id, written)
    await references.resolve()
    await refresh_reference_conditions(workspace, around=[r.record.id for r in results])
    for result in results:
        if result.change != "unchanged":
            target = f"{kind_of(result.record.schema)}:{result.record.name}"
            await record_write(workspace, actor or local_actor(), "apply", target)
    return results


async def refresh_reference_conditions(
    workspace: Workspace, around: Iterable[str] | None = None
) -> None:
    """Set the ``References`` condition of every resource with a reference that does not reach an
    existing resource (naming each), and clear it where all do. With ``around``: only of those
    resources and of the ones referencing them (what applying them can change), so an apply
    reads what it touches, not every resource."""
    references = ResourceReferenceTable(workspace.catalog)
    also = [] if around is None else list(around)
    rows = await (references.list() if around is None else references.list_around(also))
    table = ResourceTable(workspace.catalog)
    problems: dict[str, list[str]] = {resource_id: [] for resource_id in also}
    targets: dict[str, ResourceRecord | None] = {}
    for row in rows:
        found = problems.setdefault(row.resource_id, [])
        target = f"{kind_of(row.target_schema)}:{row.target_name or row.target_id}"
        if not row.target_exists:
            why = "was deleted" if row.target_id is not None else "does not exist (yet)"
            found.append(f"{row.path}: {target} {why}")
        elif row.target_key is not None and row.target_id is not None:
            if row.target_id not in targets:
                targets[row.target_id] = await table.get(row.target_id)
            record = targets[row.target_id]
            if record is not None and row.target_key not in _values_of(record):
                found.append(f"{row.path}: {target} has no key {row.target_key}")
    current = await table.condition_everywhere(
        REFERENCES, None if around is None else problems.keys()
    )
    for resource_id, messages in problems.items():
        condition = {"status": "Unresolved", "message": "; ".join(messages)} if messages else None
        # Written only where it changes: an apply must not rewrite every referencing resource.
        if resource_id in current and current[resource_id] != condition:
            await table.update_status(resource_id, conditions={REFERENCES: condition})


def resource_of(record: ResourceRecord) -> Resource[Any]:
    """A stored resource in the canonical RFC-018 form: ``headers.name`` is the resource name and
    ``headers.account`` its account (this node's own account when it has none)."""
    account, name = split_name(record.name)
    status = record.status
    reconciled_at = status.get("reconciledAt")
    spec: Any
    if record.schema == DATASET_SCHEMA:
        spec = dataset_resource(record).spec
    elif record.schema == MIRROR_SCHEMA:
        spec = MirrorSpec.from_json(record.spec, f"resource {record.id}")
    else:
        spec = json_value(record.spec)
    return Resource(
        schema=record.schema,
        headers=ResourceHeaders(
            id=record.id,
            name=ResourceName(name),
            account=account_handle(account or DEFAULT_ACCOUNT),
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


def resource_document(
    record: ResourceRecord, references: Iterable[ReferenceRow] = ()
) -> dict[str, Any]:
    """A resource as ``odfd get`` shows it (YAML or JSON): the canonical form, fields in the
    reference's order; each resolved reference in its long form with the target's id."""
    document = write_resource(resource_of(record), _spec_codec(record.schema))
    if record.schema == DATASET_SCHEMA and "volume" in record.spec:
        document["spec"]["volume"] = record.spec["volume"]
    for row in references:
        if row.target_id is not None:
            _show_id(document, row)
    return document


def _values_of(record: ResourceRecord) -> dict[str, Any]:
    """The keys of a ``SecretSet`` (``secrets``) or ``VariableSet`` (``variables``)."""
    values = record.spec.get("secrets", record.spec.get("variables"))
    return values if isinstance(values, dict) else {}


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _show_id(document: dict[str, Any], row: ReferenceRow) -> None:
    parts = [int(i) if i else name for name, i in _PATH_PART.findall(row.path)]
    parent: Any = document
    for part in parts[:-1]:
        parent = parent[part]
    written = parent[parts[-1]]
    kind = kind_of(row.target_schema)
    if isinstance(written, str):
        key = written.partition("#")[2] if kind in ("SecretSet", "VariableSet") else None
        # A volume reference has no `type`: it can only name a PersistentVolume.
        written = {} if kind == "PersistentVolume" else {"type": kind}
        if row.target_name is not None:
            account, slash, name = row.target_name.rpartition("/")
            written |= {"name": name} | ({"account": {"name": account}} if slash else {})
        if key:
            written["path"] = key
    parent[parts[-1]] = {**written, "id": row.target_id}


@dataclass(frozen=True, slots=True)
class ResourceKey:
    """A resource named on the command line: ``Type:[account/]name`` (the spec's short reference
    form), or as a manifest declares it."""

    schema: str
    name: str

    @classmethod
    def parse(cls, text: str) -> ResourceKey:
        type_text, colon, name = text.partition(":")
        if not colon or not name:
            raise ManifestError(
                f"{text!r} does not name a resource: expected Type:name or Type:account/name "
                "(e.g. SecretSet:my-secrets)"
            )
        return cls(type_of(type_text).schema, name)

    def __str__(self) -> str:
        return f"{kind_of(self.schema)}:{self.name}"


async def delete_resources(
    workspace: Workspace, keys: list[ResourceKey], *, actor: Actor | None = None
) -> list[ResourceRecord]:
    """Delete the named resources (every one is found before any is deleted), each recorded as
    done by ``actor`` (default: a local command). The objects a resource made are left in place
    (a ``Dataset`` resource's dataset stays in the workspace), except a ``Mirror``'s sync
    schedule, which exists only to serve the resource."""
    table = ResourceTable(workspace.catalog)
    records = []
    for key in keys:
        record = await table.find(key.schema, key.name)
        if record is None:
            raise ManifestError(f"no resource {key} (see `odfd get {kind_of(key.schema)}`)")
        records.append(record)
    mirrors = MirrorTable(workspace.catalog)
    for record in records:
        if record.schema == MIRROR_SCHEMA:
            mirror = await mirrors.get(record.name)
            if mirror is not None and mirror.resource_id == record.id:
                await mirrors.remove(record.name)
        await table.delete(record.id)
        target = f"{kind_of(record.schema)}:{record.name}"
        await record_write(workspace, actor or local_actor(), "delete", target)
    await refresh_reference_conditions(workspace)
    return records
