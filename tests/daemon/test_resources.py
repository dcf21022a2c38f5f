"""RFC-018 resources applied without a daemon: generations, status, the controllers' effect on
the workspace, idempotent re-apply, kamu-cli's header forms and canonical output, and manifest
errors that name file, document and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfd.config import SyncConfig
from odfd.daemon.controllers import Reconciler
from odfd.daemon.resources import (
    RECONCILE_ERROR,
    ManifestError,
    apply_manifests,
    dataset_resource,
    load_manifests,
    resource_document,
)
from protocol.codec.yaml_emitter import dump
from protocol.identity import AccountName, DatasetId
from protocol.model import DatasetKind, ResourcePhase, SetInfo
from protocol.resource import GENERIC_SPEC, AccountRef, ResourceName, load_resource
from storage.catalog.mirrors import MirrorTable
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace
from tests.fixtures.manifests import push_source

MANIFESTS = (
    """\
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
headers:
  name: local.events
  labels: {{team: data}}
spec:
  kind: Root
  metadata:
    - kind: SetInfo
      description: {description}
"""
    + push_source("""
    kind: NdJson
    schema:
      fields:
        - {{name: event_time, type: timestamp}}
        - {{name: value, type: int64}}
""")
    + """\
---
$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror
headers:
  name: remote.cities
spec:
  source: http://127.0.0.1:9/cities
  targets: [file:///tmp/odfd-mirror-copy]
  every: {every}
"""
)


def _write(folder: Path, description: str = "Events", every: str = "10m") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "resources.yaml"
    path.write_text(MANIFESTS.format(description=description, every=every))
    return folder


async def _apply(workspace: Workspace, folder: Path) -> dict[str, str]:
    results = await apply_manifests(workspace, load_manifests([folder]))
    await Reconciler(workspace, SyncConfig()).reconcile_all()
    return {r.record.name: r.change for r in results}


async def test_apply_reconcile_and_reapply(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        folder = _write(tmp_path / "manifests")
        assert await _apply(workspace, folder) == {
            "local.events": "created",
            "remote.cities": "created",
        }
        table = ResourceTable(workspace.catalog)
        dataset_resource = await table.find(
            "https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset", "local.events"
        )
        assert dataset_resource is not None
        assert dataset_resource.generation == 1 and dataset_resource.labels == {"team": "data"}
        assert (
            dataset_resource.status["phase"] == "Ready"
            and dataset_resource.status["observedGeneration"] == 1
        )
        record = await workspace.resolve("local.events")
        assert record.head_sequence == 2  # Seed, SetInfo, AddPushSource
        mirror = await MirrorTable(workspace.catalog).require("remote.cities")
        assert (mirror.source, mirror.targets, mirror.interval, mirror.resource_id) == (
            "http://127.0.0.1:9/cities",
            ("file:///tmp/odfd-mirror-copy",),
            600.0,
            (
                await table.find("https://odfd.dev/schemas/mirror/v1alpha1/Mirror", "remote.cities")
            ).id,
        )

        # The same manifests again: nothing changes, not even a timestamp.
        before = {r.id: r for r in await table.list()}
        assert await _apply(workspace, folder) == {
            "local.events": "unchanged",
            "remote.cities": "unchanged",
        }
        assert {r.id: r for r in await table.list()} == before
        assert (await workspace.resolve("local.events")).head == record.head
        assert await MirrorTable(workspace.catalog).require("remote.cities") == mirror

        # What `odfd get -o yaml` writes (the canonical form) applies back unchanged, for both kinds.
        got = tmp_path / "got.yaml"
        got.write_text("---\n".join(dump(resource_document(r)) for r in await table.list()))
        results = await apply_manifests(workspace, load_manifests([got]))
        assert {r.record.name: r.change for r in results} == {
            "local.events": "unchanged",
            "remote.cities": "unchanged",
        }

        # An edited spec: a new generation, Pending until reconciled, then exactly the change.
        assert await table.list_unsettled() == []  # all Ready: what a sync skips
        _write(folder, description="Events, deduplicated", every="1h")
        results = await apply_manifests(workspace, load_manifests([folder]))
        assert [(r.change, r.record.generation, r.record.status["phase"]) for r in results] == [
            ("configured", 2, "Pending"),
            ("configured", 2, "Pending"),
        ]
        assert {r.name for r in await table.list_unsettled()} == {"local.events", "remote.cities"}
        await Reconciler(workspace, SyncConfig()).reconcile_all(unsettled_only=True)
        assert await table.list_unsettled() == []
        updated = await workspace.resolve("local.events")
        assert updated.head_sequence == 3 and updated.head is not None
        head_block = await workspace.open_dataset(updated.id).chain.get_block(updated.head)
        assert head_block.event == SetInfo(description="Events, deduplicated")
        assert (await MirrorTable(workspace.catalog).require("remote.cities")).interval == 3600
        for resource in await table.list():
            assert (
                resource.status["phase"] == "Ready" and resource.status["observedGeneration"] == 2
            )
            assert resource_document(resource)["headers"]["generation"] == 2

        # A settled resource's mirror edited behind its back (drift): the full pass puts it back.
        mirrors = MirrorTable(workspace.catalog)
        await mirrors.set_paused("remote.cities", True)
        await Reconciler(workspace, SyncConfig()).reconcile_all(unsettled_only=True)
        assert (await mirrors.require("remote.cities")).paused  # a sync's pass leaves it
        await Reconciler(workspace, SyncConfig()).reconcile_all()
        assert not (await mirrors.require("remote.cities")).paused


async def test_failures_are_reported_in_status(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await workspace.create_dataset("remote.cities", DatasetKind.ROOT)
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "derived.yaml").write_text("""\
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
headers: {name: derived}
spec:
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs: [{datasetRef: not.here}]
      transform: {kind: Sql, engine: spark, query: "SELECT * FROM `not.here`"}
""")
        _write(tmp_path / "m")
        await _apply(workspace, tmp_path / "m")
        statuses = {r.name: r.status for r in await ResourceTable(workspace.catalog).list()}
        assert statuses["derived"]["phase"] == "Failed"
        assert "not.here" in statuses["derived"]["conditions"][RECONCILE_ERROR]["message"]
        # A local dataset of that name that is not pulled from the source: a conflict, not a takeover.
        assert statuses["remote.cities"]["phase"] == "Failed"
        assert statuses["remote.cities"]["conditions"][RECONCILE_ERROR]["code"] == "conflict"
        assert await MirrorTable(workspace.catalog).get("remote.cities") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "$schema: https://example.org/Thing\nheaders: {name: a}\nspec: {}\n",
            r"bad.yaml document 0: \$schema: 'https://example.org/Thing' is not a resource type",
        ),
        (
            "$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders: {name: a}\nspec: {targets: []}\n",
            r"bad.yaml document 0: spec.source: expected the URL",
        ),
        (
            "$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders: {name: a}\nspec: {source: 'ftp://x/a'}\n",
            r"spec.source: ftp://x/a: unsupported URL",
        ),
        (
            "$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders: {name: a}\n"
            "spec: {source: 'http://x/a', every: often}\n",
            r"spec.every: 'often' is not a duration",
        ),
        (
            "---\n$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders: {name: a}\nspec: {source: 'http://x/a'}\n"
            "---\n$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\nheaders: {name: A}\nspec: {source: 'http://y/a'}\n",
            r"document 1: Mirror A is also defined in .*document 0",
        ),
        (
            "$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset\nheaders: {name: d}\n"
            "spec: {kind: Root, metadata: [{kind: SetVocab, eventTimeColum: t}]}\n",
            r"bad.yaml document 0: .*eventTimeColum",
        ),
        (
            "$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset\nheaders: {name: 'not a name'}\n"
            "spec: {kind: Root, metadata: []}\n",
            r"headers.name",
        ),
    ],
)
def test_invalid_manifests_name_file_document_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_manifests([path])


KAMU_ACCOUNT_DID = "did:odf:fed016b61ed2ab1b63a006b61ed2ab1b63a00b016d65607000000e0821aafbf163e6f"
"""kamu-cli's single-tenant account (``AccountID::new_seeded_ed25519(b"kamu")``), as its tests print it."""

HEADER_FORMS = """\
$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror
headers:
  name: scores
  account: kamu
  labels: {team: data, https://odfd.dev/tier: 1}
  annotations: {owner: {name: ops, pager: true}}
spec: {source: 'http://127.0.0.1:9/scores', paused: true}
---
$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror
headers:
  name: scores
  account: {name: alice}
spec: {source: 'http://127.0.0.1:9/alice/scores', every: 90s}
"""


async def test_kamu_header_forms_and_canonical_output(tmp_path: Path) -> None:
    path = tmp_path / "mirrors.yaml"
    path.write_text(HEADER_FORMS)
    manifests = load_manifests([path])
    # The node's own account owns aliases without an account part; any other becomes the alias' account.
    assert [m.name for m in manifests] == ["scores", "alice/scores"]
    assert manifests[0].labels == {"https://odfd.dev/tier": 1, "team": "data"}
    assert manifests[0].annotations == {"owner": {"name": "ops", "pager": True}}
    assert manifests[0].spec == {"source": "http://127.0.0.1:9/scores", "paused": True}

    async with await Workspace.init(tmp_path / "ws") as workspace:
        results = await apply_manifests(workspace, manifests)
        texts = [dump(resource_document(r.record)) for r in results]
        ours, alices = (load_resource(text, GENERIC_SPEC, "get output") for text in texts)
        assert (
            ours.headers.account.name == AccountName("kamu")
            and str(ours.headers.account.did) == KAMU_ACCOUNT_DID
        )
        assert ours.headers.account.did == DatasetId.new_seeded(b"kamu")
        assert alices.headers.account.did == DatasetId.new_seeded(b"alice")
        assert str(alices.headers.name) == "scores" and alices.headers.id == results[1].record.id
        assert ours.status.phase is ResourcePhase.PENDING and ours.headers.generation == 1
        record = results[0].record
        assert texts[0] == (
            "$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\n"
            "headers:\n"
            f"  id: {record.id}\n"
            "  name: scores\n"
            "  account:\n"
            f"    id: {KAMU_ACCOUNT_DID}\n"
            f"    did: {KAMU_ACCOUNT_DID}\n"
            "    name: kamu\n"
            "  labels:\n"
            "    https://odfd.dev/tier: 1\n"
            "    team: data\n"
            "  annotations:\n"
            "    owner:\n"
            "      name: ops\n"
            "      pager: true\n"
            "  generation: 1\n"
            f"  createdAt: {ours.headers.created_at}\n"
            f"  updatedAt: {ours.headers.updated_at}\n"
            "spec:\n"
            "  source: http://127.0.0.1:9/scores\n"
            "  paused: true\n"
            "status:\n"
            "  phase: Pending\n"
            "  conditions: {}\n"
        )

        # What `odfd get -o yaml` writes applies back unchanged.
        (tmp_path / "got.yaml").write_text("---\n".join(texts))
        again = await apply_manifests(workspace, load_manifests([tmp_path / "got.yaml"]))
        assert [(r.record.name, r.change) for r in again] == [
            ("scores", "unchanged"),
            ("alice/scores", "unchanged"),
        ]


ACCOUNT_ERRORS = [
    (
        "account: {did: '" + KAMU_ACCOUNT_DID + "'}",
        r"headers.account: odfd identifies accounts by name",
    ),
    (
        "account: {name: alice, did: '" + KAMU_ACCOUNT_DID + "'}",
        r"headers.account.did: did:odf:fed016b6.* is not the did of account alice on this node",
    ),
    (
        "account: {name: kamu, did: 'did:odf:fed01zz'}",
        r"headers.account.did: 'did:odf:fed01zz' is not a valid did:odf",
    ),
    (
        "account: {name: kamu, email: k@kamu.dev}",
        r"headers.account.email: unknown field `email` of AccountRef",
    ),
    ("account: " + "a" * 33, r"headers.account.name: account name a{33} is longer than 32 bytes"),
    ("owner: kamu", r"headers.owner: unknown field `owner` of ResourceHeadersInput"),
    ("labels: {'app/name': x}", r"headers.labels: 'app/name' is not a valid type reference"),
]


@pytest.mark.parametrize(("header", "message"), ACCOUNT_ERRORS)
def test_invalid_headers_name_the_field(tmp_path: Path, header: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror\n"
        f"headers:\n  name: a\n  {header}\nspec: {{source: 'http://x/a'}}\n"
    )
    with pytest.raises(ManifestError, match=r"^.*bad.yaml document 0: " + message):
        load_manifests([path])


async def test_dataset_of_another_account_reads_back_typed(tmp_path: Path) -> None:
    path = tmp_path / "alice.yaml"
    path.write_text(
        "$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset\n"
        "headers: {name: Scores.Daily, account: alice}\n"
        "spec: {kind: Root, metadata: [{kind: SetInfo, description: Daily scores}]}\n"
    )
    async with await Workspace.init(tmp_path / "ws") as workspace:
        (result,) = await apply_manifests(workspace, load_manifests([path]))
        assert result.record.name == "alice/Scores.Daily"
        resource = dataset_resource(result.record)
        assert (
            resource.headers.name == ResourceName("scores.daily")
            and str(resource.headers.name) == "Scores.Daily"
        )
        assert resource.headers.account == AccountRef(name=AccountName("alice"))
        assert resource.spec.metadata == (SetInfo(description="Daily scores"),)
        document = load_resource(dump(resource_document(result.record)), GENERIC_SPEC, "get output")
        assert document.headers.account.did == DatasetId.new_seeded(b"alice")
        assert document.spec["metadata"] == [{"kind": "SetInfo", "description": "Daily scores"}]
