"""``/graphql``'s ``datasets`` mutations over raw HTTP against a served node, as the kamu web UI
sends them: create (empty and from a manifest), rename, delete and set visibility, each checked
by its effect (``odfd list`` on the workspace, what others may then read) and every refusal:
anonymous, another account's dataset, a name taken, a manifest that does not read or cannot be
stored, inputs not found, a dataset others read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odfd.app.accounts import add_account, create_token
from odfd.app.node import Node
from odfd.app.resources import apply_manifests, parse_manifest
from odfd.config import NodeConfig
from protocol.codec.yaml import load_snapshot
from protocol.model import DatasetKind
from storage.workspace import Workspace
from tests.server.graphql_node import Served, serve
from tests.server.odata_node import PRIVATE, SERVER, add_datasets

TOKENS: dict[str, str] = {}
"""Each account's issued token, made when the node is set up."""

CREATE_EMPTY = """mutation($kind: DatasetKind!, $alias: DatasetAlias!, $vis: DatasetVisibility!) {
  datasets { createEmpty(datasetKind: $kind, datasetAlias: $alias, datasetVisibility: $vis) {
    __typename isSuccess message
    ... on CreateDatasetResultSuccess { dataset { id alias kind owner { accountName }
      visibility { __typename } } }
    ... on CreateDatasetResultNameCollision { accountName datasetName } } } }"""
CREATE_FROM_SNAPSHOT = """mutation($snapshot: String!, $vis: DatasetVisibility!) {
  datasets { createFromSnapshot(snapshot: $snapshot, snapshotFormat: YAML,
                                datasetVisibility: $vis) {
    __typename isSuccess message
    ... on CreateDatasetResultSuccess { dataset { id alias kind
      metadata { currentInfo { description } } } }
    ... on CreateDatasetResultMissingInputs { missingInputs } } } }"""
RENAME = """mutation($id: DatasetID!, $name: DatasetName!) {
  datasets { byId(datasetId: $id) { rename(newName: $name) {
    __typename message
    ... on RenameResultSuccess { oldName newName }
    ... on RenameResultNoChanges { preservedName }
    ... on RenameResultNameCollision { collidingAlias } } } } }"""
DELETE = """mutation($id: DatasetID!) {
  datasets { byId(datasetId: $id) { delete {
    __typename message
    ... on DeleteResultSuccess { deletedDataset }
    ... on DeleteResultDanglingReference { notDeletedDataset danglingChildRefs } } } } }"""
SET_VISIBILITY = """mutation($id: DatasetID!, $vis: DatasetVisibilityInput!) {
  datasets { byId(datasetId: $id) { setVisibility(visibility: $vis) { __typename message } } } }"""
PERMISSIONS = """query($id: DatasetID!) { datasets { byId(datasetId: $id) { role permissions {
  general { canRename canSetVisibility canDelete } metadata { canCommit }
  flows { canView canRun } collaboration { canView canUpdate } } } } }"""
LOOKUP = """query($id: DatasetID!) { datasets { byId(datasetId: $id) {
  alias visibility { __typename ... on PublicDatasetVisibility { anonymousAvailable } } } } }"""


def manifest(name: str, kind: str, metadata: str) -> str:
    return (
        f"kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: {name}\n  kind: {kind}\n{metadata}"
    )


DERIVED = manifest(
    "alice/hot-days",
    "Derivative",
    """  metadata:
    - kind: SetInfo
      description: Days above 20 degrees.
    - kind: SetTransform
      inputs:
        - datasetRef: alice/weather
      transform:
        kind: Sql
        engine: datafusion
        query: SELECT * FROM "alice/weather"
""",
)


WATCHER = "bob/watcher"
"""bob's private derivative reading ``alice/weather``: alice may not read it."""
SHARED = "alice/shared"
"""A dataset of alice's where bob is an editor and carol an owner (a ``Relations`` resource)."""
ROLES = {
    "$schema": "https://opendatafabric.org/schemas/auth/v1alpha1/Relations",
    "headers": {"name": "shared-roles", "account": {"name": "alice"}},
    "spec": {
        "relations": [
            {
                "subject": f"Account:{who}",
                "relation": "role",
                "value": role,
                "object": f"Dataset:{SHARED}",
            }
            for who, role in (("bob", "editor"), ("carol", "owner"))
        ],
        "attributes": [{"object": f"Dataset:{WATCHER}", "name": "allowPublicRead", "value": False}],
    },
}


async def add_with_accounts(workspace: Workspace) -> None:
    await add_datasets(workspace)
    await workspace.create_dataset(SHARED, DatasetKind.ROOT)
    await workspace.create_from_snapshot(load_snapshot(DERIVED.replace("alice/hot-days", WATCHER)))
    await apply_manifests(workspace, [parse_manifest(ROLES, "roles")])
    node = Node(workspace, NodeConfig(server=SERVER))
    for name in ("alice", "bob", "carol", "root"):
        await add_account(node, name, password=None, is_admin=name == "root")
        TOKENS[name] = (await create_token(node, name)).secret


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = Path(tmp_path_factory.mktemp("graphql-datasets")) / "ws"
    yield from serve(root, add=add_with_accounts)


def ask(served: Served, query: str, who: str | None, **variables: Any) -> dict[str, Any]:
    status, answer = served.post(query, TOKENS[who] if who else None, variables=variables)
    assert status == 200, answer
    result: dict[str, Any] = answer
    return result


def refusal(answer: dict[str, Any]) -> str:
    assert answer["data"] is None or "errors" in answer, answer
    [error] = answer["errors"]
    message: str = error["message"]
    return message


def odfd(served: Served, *args: str) -> str:
    """What an ``odfd`` command prints about the served workspace."""
    done = subprocess.run(
        [sys.executable, "-m", "odfd.cli.main", *args, "--root", str(served.root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def listed(served: Served) -> set[str]:
    """The aliases ``odfd list`` prints for the served workspace."""
    return {line.split()[0] for line in odfd(served, "list").splitlines()[1:] if line.strip()}


def create_empty(served: Served, who: str | None, alias: str, vis: str = "PUBLIC") -> Any:
    return ask(served, CREATE_EMPTY, who, kind="ROOT", alias=alias, vis=vis)


def created_id(answer: dict[str, Any], field: str = "createEmpty") -> str:
    result = answer["data"]["datasets"][field]
    assert result["__typename"] == "CreateDatasetResultSuccess", result
    dataset_id: str = result["dataset"]["id"]
    return dataset_id


def test_create_empty_makes_a_dataset_of_the_callers_account(served: Served) -> None:
    answer = create_empty(served, "alice", "alice/fresh")
    result = answer["data"]["datasets"]["createEmpty"]
    assert (result["isSuccess"], result["message"]) == (True, "Success")
    assert result["dataset"]["alias"] == "alice/fresh"
    assert result["dataset"]["owner"]["accountName"] == "alice"
    assert result["dataset"]["kind"] == "ROOT"
    assert result["dataset"]["visibility"] == {"__typename": "PublicDatasetVisibility"}
    assert "alice/fresh" in listed(served)
    assert "[alice by add via http," in odfd(served, "log", "alice/fresh", "--who")
    dataset_id = result["dataset"]["id"]
    found = ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"]
    assert found["visibility"] == {
        "__typename": "PublicDatasetVisibility",
        "anonymousAvailable": True,
    }


def test_create_refuses_anonymous_and_other_accounts(served: Served) -> None:
    before = listed(served)
    assert refusal(create_empty(served, None, "alice/anon")) == "Anonymous access forbidden"
    assert refusal(ask(served, CREATE_FROM_SNAPSHOT, None, snapshot=DERIVED, vis="PUBLIC")) == (
        "Anonymous access forbidden"
    )
    words = refusal(create_empty(served, "bob", "alice/by-bob"))
    assert words.startswith("Dataset access error: bob may not create alice/by-bob")
    words = refusal(create_empty(served, "bob", "unowned"))
    assert words.startswith("Dataset access error: bob may not create unowned")
    assert listed(served) == before


def test_create_answers_a_name_taken(served: Served) -> None:
    result = create_empty(served, "alice", "alice/Weather")["data"]["datasets"]["createEmpty"]
    assert result == {
        "__typename": "CreateDatasetResultNameCollision",
        "isSuccess": False,
        "message": "Dataset with name 'Weather' already exists",
        "accountName": "alice",
        "datasetName": "Weather",
    }


def test_create_from_snapshot_and_its_failures(served: Served) -> None:
    missing = DERIVED.replace("alice/hot-days", "alice/orphan").replace(
        "datasetRef: alice/weather", "datasetRef: alice/nowhere"
    )
    result = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=missing, vis="PUBLIC")
    assert result["data"]["datasets"]["createFromSnapshot"] == {
        "__typename": "CreateDatasetResultMissingInputs",
        "isSuccess": False,
        "message": "Dataset is referencing non-existing inputs: alice/nowhere",
        "missingInputs": ["alice/nowhere"],
    }
    malformed = DERIVED.replace("datasetRef:", "datasetReff:")
    result = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=malformed, vis="PUBLIC")
    found = result["data"]["datasets"]["createFromSnapshot"]
    assert (found["__typename"], found["isSuccess"]) == ("MetadataManifestMalformed", False)
    assert "datasetReff" in found["message"], found
    other_version = DERIVED.replace("version: 1", "version: 2")
    result = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=other_version, vis="PUBLIC")
    assert result["data"]["datasets"]["createFromSnapshot"] == {
        "__typename": "MetadataManifestMalformed",
        "isSuccess": False,
        "message": "snapshot document 0: DatasetSnapshot manifest version 2 is not supported "
        "(supported: 1)",
    }
    invalid = manifest(
        "alice/bad-root",
        "Root",
        """  metadata:
    - kind: SetTransform
      inputs: []
      transform: {kind: Sql, engine: datafusion, query: SELECT 1}
""",
    )
    result = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=invalid, vis="PUBLIC")
    found = result["data"]["datasets"]["createFromSnapshot"]
    assert (found["__typename"], found["isSuccess"]) == (
        "CreateDatasetResultInvalidSnapshot",
        False,
    )
    assert "metadata[0] (SetTransform): only allowed on derivative datasets" in found["message"]
    assert not {"alice/orphan", "alice/bad-root"} & listed(served)
    assert "bad-root-visibility" not in relations(served)
    spying = DERIVED.replace("alice/hot-days", "alice/spy").replace(
        "datasetRef: alice/weather", f"datasetRef: {PRIVATE}"
    )
    result = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=spying, vis="PRIVATE")
    assert result["data"]["datasets"]["createFromSnapshot"]["missingInputs"] == [PRIVATE]
    assert "alice/spy" not in listed(served)
    created = ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=DERIVED, vis="PUBLIC")
    dataset = created["data"]["datasets"]["createFromSnapshot"]["dataset"]
    assert (dataset["alias"], dataset["kind"]) == ("alice/hot-days", "DERIVATIVE")
    assert dataset["metadata"]["currentInfo"]["description"] == "Days above 20 degrees."
    assert "alice/hot-days" in listed(served)


def test_rename(served: Served) -> None:
    dataset_id = created_id(create_empty(served, "alice", "alice/to-rename"))
    renamed = ask(served, RENAME, "alice", id=dataset_id, name="renamed")
    assert renamed["data"]["datasets"]["byId"]["rename"] == {
        "__typename": "RenameResultSuccess",
        "message": "Success",
        "oldName": "to-rename",
        "newName": "renamed",
    }
    names = listed(served)
    assert "alice/renamed" in names and "alice/to-rename" not in names
    same = ask(served, RENAME, "alice", id=dataset_id, name="renamed")
    assert same["data"]["datasets"]["byId"]["rename"] == {
        "__typename": "RenameResultNoChanges",
        "message": "No changes",
        "preservedName": "renamed",
    }
    taken = ask(served, RENAME, "alice", id=dataset_id, name="empty")
    assert taken["data"]["datasets"]["byId"]["rename"] == {
        "__typename": "RenameResultNameCollision",
        "message": "Dataset 'alice/empty' already exists",
        "collidingAlias": "alice/empty",
    }
    words = refusal(ask(served, RENAME, "bob", id=dataset_id, name="bobs"))
    assert words.startswith("Dataset access error: bob may not change alice/renamed")
    assert refusal(ask(served, RENAME, None, id=dataset_id, name="anon")) == (
        "Anonymous access forbidden"
    )
    assert "alice/renamed" in listed(served)


def test_a_dataset_the_caller_may_not_read_does_not_exist(served: Served) -> None:
    private_id = str(served_record_id(served, PRIVATE))
    answer = ask(served, DELETE, "alice", id=private_id)
    assert answer["data"]["datasets"]["byId"] is None
    assert PRIVATE in listed(served)


def served_record_id(served: Served, alias: str) -> str:
    for row in json.loads(odfd(served, "list", "-o", "json")):
        if row["alias"] == alias:
            return str(row["id"])
    raise AssertionError(f"{alias} not listed")


def test_delete_refuses_while_others_read_it(served: Served) -> None:
    weather_id = served_record_id(served, "alice/weather")
    derived = DERIVED.replace("alice/hot-days", "alice/reader")
    reader_id = created_id(
        ask(served, CREATE_FROM_SNAPSHOT, "alice", snapshot=derived, vis="PUBLIC"),
        "createFromSnapshot",
    )
    blocked = ask(served, DELETE, "alice", id=weather_id)["data"]["datasets"]["byId"]["delete"]
    assert blocked["__typename"] == "DeleteResultDanglingReference"
    assert blocked["notDeletedDataset"] == "alice/weather"
    refs = blocked["danglingChildRefs"]
    assert sorted(refs) == ["alice/hot-days", "alice/reader"]
    assert blocked["message"] == "Dataset 'alice/weather' has 3 dangling reference(s)"
    assert WATCHER in listed(served)
    assert "alice/weather" in listed(served)
    words = refusal(ask(served, DELETE, "bob", id=reader_id))
    assert words.startswith("Dataset access error: bob may not change alice/reader")
    deleted = ask(served, DELETE, "alice", id=reader_id)["data"]["datasets"]["byId"]["delete"]
    assert deleted == {
        "__typename": "DeleteResultSuccess",
        "message": "Success",
        "deletedDataset": "alice/reader",
    }
    assert "alice/reader" not in listed(served)


def test_set_visibility_changes_who_reads(served: Served) -> None:
    answer = create_empty(served, "alice", "alice/hidden", vis="PRIVATE")
    dataset = answer["data"]["datasets"]["createEmpty"]["dataset"]
    assert dataset["visibility"] == {"__typename": "PrivateDatasetVisibility"}
    dataset_id = created_id(answer)
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    assert ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"] is None
    mine = ask(served, LOOKUP, "alice", id=dataset_id)["data"]["datasets"]["byId"]
    assert mine["visibility"]["__typename"] == "PrivateDatasetVisibility"
    assert (
        ask(
            served,
            SET_VISIBILITY,
            "bob",
            id=dataset_id,
            vis={"public": {"anonymousAvailable": True}},
        )["data"]["datasets"]["byId"]
        is None
    )
    public = {"public": {"anonymousAvailable": False}}
    done = ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis=public)
    assert done["data"]["datasets"]["byId"]["setVisibility"] == {
        "__typename": "SetDatasetVisibilityResultSuccess",
        "message": "Success",
    }
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    seen = ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"]
    assert seen["alias"] == "alice/hidden"
    words = refusal(ask(served, SET_VISIBILITY, "bob", id=dataset_id, vis=public))
    assert words.startswith("Dataset access error: bob may not change alice/hidden")
    anyone = {"public": {"anonymousAvailable": True}}
    ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis=anyone)
    seen = ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"]
    assert seen["visibility"] == {
        "__typename": "PublicDatasetVisibility",
        "anonymousAvailable": True,
    }
    ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis={"private": {}})
    assert ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"] is None
    both = refusal(
        ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis={**public, "private": {}})
    )
    assert "exactly one field must be specified" in both


def relations(served: Served) -> str:
    """``odfd get Relations`` of the served workspace: the visibility resources made here."""
    return odfd(served, "get", "Relations")


def test_visibility_moves_with_a_rename_and_goes_with_a_delete(served: Served) -> None:
    dataset_id = created_id(create_empty(served, "alice", "alice/kept-private", vis="PRIVATE"))
    assert "alice/kept-private-visibility" in relations(served)
    ask(served, RENAME, "alice", id=dataset_id, name="moved-private")
    # The one mechanism every rename uses rewrote the resource in place (its name stays).
    shown = json.loads(
        odfd(served, "get", "Relations", "alice/kept-private-visibility", "-o", "json")
    )
    assert {a["object"] for a in shown["spec"]["attributes"]} == {"Dataset:alice/moved-private"}
    assert ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"] is None
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    mine = ask(served, LOOKUP, "alice", id=dataset_id)["data"]["datasets"]["byId"]
    assert mine["alias"] == "alice/moved-private"
    # Setting it again changes that resource, not a second one that would contradict it.
    public = {"public": {"anonymousAvailable": True}}
    ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis=public)
    assert "moved-private-visibility" not in relations(served)
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is not None
    ask(served, SET_VISIBILITY, "alice", id=dataset_id, vis={"private": {}})
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    # A new dataset under the old alias gets a resource of its own.
    again = created_id(create_empty(served, "alice", "alice/kept-private", vis="PUBLIC"))
    assert "alice/kept-private-visibility-2" in relations(served)
    assert ask(served, LOOKUP, None, id=again)["data"]["datasets"]["byId"] is not None
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    ask(served, DELETE, "alice", id=dataset_id)
    assert "alice/moved-private" not in listed(served)
    assert "alice/kept-private-visibility\n" not in relations(served) + "\n"


TEAM_ROLES = """\
$schema: Relations
headers: {name: team-notes-roles, account: {name: alice}}
spec:
  relations:
    - {subject: Account:bob, relation: role, value: reader, object: Dataset:alice/team-notes}
"""


def test_roles_follow_a_rename_and_go_with_a_delete(served: Served, tmp_path: Path) -> None:
    dataset_id = created_id(create_empty(served, "alice", "alice/team-notes", vis="PRIVATE"))
    manifest = tmp_path / "roles.yaml"
    manifest.write_text(TEAM_ROLES)
    odfd(served, "apply", "-f", str(manifest))
    assert ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"] is not None
    ask(served, RENAME, "alice", id=dataset_id, name="renamed-notes")
    seen = ask(served, LOOKUP, "bob", id=dataset_id)["data"]["datasets"]["byId"]
    assert seen["alias"] == "alice/renamed-notes"
    assert ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"] is None
    # Another private dataset under the old alias: bob's role stayed with the renamed one.
    other = created_id(create_empty(served, "alice", "alice/team-notes", vis="PRIVATE"))
    assert ask(served, LOOKUP, "bob", id=other)["data"]["datasets"]["byId"] is None
    ask(served, DELETE, "alice", id=dataset_id)
    assert "team-notes-roles" not in relations(served)
    later = created_id(create_empty(served, "alice", "alice/renamed-notes", vis="PRIVATE"))
    assert ask(served, LOOKUP, "bob", id=later)["data"]["datasets"]["byId"] is None


def test_roles_decide_who_may_rename_and_delete(served: Served) -> None:
    shared_id = served_record_id(served, SHARED)
    for who, role, admin in (("bob", "EDITOR", False), ("carol", None, True)):
        found = ask(served, PERMISSIONS, who, id=shared_id)["data"]["datasets"]["byId"]
        assert found["role"] == role
        assert found["permissions"]["general"] == {
            "canRename": admin,
            "canSetVisibility": admin,
            "canDelete": admin,
        }
        assert found["permissions"]["metadata"] == {"canCommit": True}
    words = refusal(ask(served, RENAME, "bob", id=shared_id, name="bobs-now"))
    assert words.startswith(f"Dataset access error: bob may not rename {SHARED} (editor")
    words = refusal(ask(served, DELETE, "bob", id=shared_id))
    assert words.startswith(f"Dataset access error: bob may not delete {SHARED} (editor")
    assert SHARED in listed(served)
    renamed = ask(served, RENAME, "carol", id=shared_id, name="carols-edit")
    assert renamed["data"]["datasets"]["byId"]["rename"]["__typename"] == "RenameResultSuccess"
    assert "alice/carols-edit" in listed(served)


def test_permissions_say_what_the_mutations_allow(served: Served) -> None:
    dataset_id = created_id(create_empty(served, "alice", "alice/settings"))
    ask(
        served,
        SET_VISIBILITY,
        "alice",
        id=dataset_id,
        vis={"public": {"anonymousAvailable": True}},
    )
    seen = {
        who: ask(served, PERMISSIONS, who, id=dataset_id)["data"]["datasets"]["byId"]
        for who in ("alice", "bob", None)
    }
    off = {"flows": {"canView": False, "canRun": False}}
    off["collaboration"] = {"canView": False, "canUpdate": False}
    assert seen["alice"] == {
        "role": None,
        "permissions": {
            "general": {"canRename": True, "canSetVisibility": True, "canDelete": True},
            "metadata": {"canCommit": True},
            **off,
        },
    }
    nothing = {"canRename": False, "canSetVisibility": False, "canDelete": False}
    for who in ("bob", None):
        assert seen[who] == {
            "role": None,
            "permissions": {"general": nothing, "metadata": {"canCommit": False}, **off},
        }


def test_a_node_admin_manages_the_built_in_accounts_datasets(served: Served) -> None:
    dataset_id = created_id(create_empty(served, "root", "node-notes", vis="PRIVATE"))
    assert "node-notes" in listed(served)
    assert "node-notes-visibility" in relations(served)
    assert ask(served, LOOKUP, "alice", id=dataset_id)["data"]["datasets"]["byId"] is None
    public = {"public": {"anonymousAvailable": True}}
    ask(served, SET_VISIBILITY, "root", id=dataset_id, vis=public)
    seen = ask(served, LOOKUP, None, id=dataset_id)["data"]["datasets"]["byId"]
    assert seen["alias"] == "node-notes"
    gone = ask(served, DELETE, "root", id=dataset_id)["data"]["datasets"]["byId"]["delete"]
    assert gone["deletedDataset"] == "node-notes"
    assert "node-notes" not in listed(served)
