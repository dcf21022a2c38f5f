"""``Account`` and ``Relations`` resources and the one authorization decision they feed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from odfd.app.accounts import check_password
from odfd.app.authorization import (
    ANONYMOUS,
    Action,
    Policy,
    PolicyCache,
    Principal,
    RelationsError,
    check_relations,
    principal_of,
)
from odfd.app.controllers import Reconciler
from odfd.app.node import open_node
from odfd.app.resource_types import ACCOUNT, RELATIONS
from odfd.app.resources import RECONCILE_ERROR, apply_manifests, load_manifests, resource_document
from odfd.config import ServerConfig, SyncConfig
from storage.catalog.resources import ResourceTable
from storage.workspace import Workspace

EXAMPLE = Path(__file__).parents[1] / "fixtures" / "spec_examples" / "auth-accounts-permissions"


def _private(alias: str) -> bool:
    return False


async def _apply_example(workspace: Workspace) -> dict[tuple[str, str], str]:
    manifests = load_manifests(sorted(EXAMPLE.glob("*.yaml")))
    await apply_manifests(workspace, manifests)
    results = await Reconciler(workspace, SyncConfig()).reconcile_all()
    return {(r.resource.schema.rsplit("/", 1)[1], r.resource.name): r.phase for r in results}


async def test_the_spec_example_applies_accounts_hashed_and_relations_decide(
    tmp_path: Path,
) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        phases = await _apply_example(workspace)
        assert phases[("Account", "alice")] == "Ready"
        assert phases[("Relations", "alice-bob")] == "Ready"
        assert phases[("Dataset", "bob/bobs-dataset")] == "Ready"
        # bob's password is the example's `<jwe>` placeholder: said, never guessed.
        assert phases[("Account", "bob")] == "Failed"
        table = ResourceTable(workspace.catalog)
        bob = await table.find(ACCOUNT.schema, "bob")
        assert bob is not None
        assert "spec.password: not a JWE" in bob.status["conditions"][RECONCILE_ERROR]["message"]
        alice_resource = await table.find(ACCOUNT.schema, "alice")
        assert alice_resource is not None
        shown = str(resource_document(alice_resource))
        assert "swordfish" not in shown and "swordfish" not in str(alice_resource.spec)
        # Re-applying the same manifests changes nothing.
        again = await apply_manifests(workspace, load_manifests(sorted(EXAMPLE.glob("*.yaml"))))
        assert all(r.record.generation == 1 for r in again)
        policy = await PolicyCache(workspace, _private).policy()
    catalog = next((tmp_path / "ws").rglob("catalog.sqlite"))
    with sqlite3.connect(catalog) as db:
        dump = "\n".join(str(row) for row in db.iterdump())
        (stored,) = db.execute("SELECT password_hash FROM accounts WHERE name = 'alice'").fetchone()
    assert "swordfish" not in dump and stored.startswith("$argon2id$")
    async with await open_node(tmp_path / "ws") as node:
        assert await check_password(node, "alice", "swordfish") is not None

    alice, carol = Principal("alice", via="token"), Principal("carol", via="token")
    ds = "bob/bobs-dataset"
    assert policy.decide(alice, Action.WRITE, ds).allowed
    assert policy.decide(alice, Action.MAINTAIN, ds).allowed
    assert not policy.decide(alice, Action.ADMIN, ds).allowed
    assert policy.decide(Principal("bob"), Action.ADMIN, ds).allowed
    refused = policy.decide(carol, Action.WRITE, ds)
    assert (refused.allowed, refused.status) == (False, 403)
    assert policy.decide(carol, Action.READ, ds).allowed  # allowPublicRead: true
    hidden = policy.decide(ANONYMOUS, Action.READ, ds)  # allowAnonymousRead: false
    assert (hidden.allowed, hidden.status) == (False, 404)
    assert (
        "maintainer of the dataset (Relations alice-bob)"
        in policy.decide(alice, Action.WRITE, ds).reason
    )


def _policy(spec: dict[str, object], private: tuple[str, ...] = ()) -> Policy:
    from odfd.app.authorization import read_relations

    policy = Policy(is_private=lambda alias: alias in private)
    read_relations(policy, spec, "test")
    return policy


def test_organisation_roles_hold_on_every_dataset_of_the_organisation() -> None:
    policy = _policy(
        {
            "relations": [
                {
                    "subject": "Account:dan",
                    "relation": "role",
                    "value": "editor",
                    "object": "Account:acme",
                },
                {
                    "subject": {"type": "Account", "name": "erin"},
                    "relation": "role",
                    "value": "reader",
                    "object": {"type": "Dataset", "account": {"name": "acme"}, "name": "secret"},
                },
            ],
            "attributes": [
                {"object": "Dataset:acme/secret", "name": "allowPublicRead", "value": False}
            ],
        }
    )
    dan, erin, frank = Principal("dan"), Principal("erin"), Principal("frank")
    assert policy.decide(dan, Action.WRITE, "acme/anything").allowed
    assert not policy.decide(dan, Action.MAINTAIN, "acme/anything").allowed
    assert policy.decide(dan, Action.WRITE, "ACME/Secret").allowed  # aliases compare lowercased
    assert policy.decide(erin, Action.READ, "acme/secret").allowed
    assert policy.decide(erin, Action.WRITE, "acme/secret").status == 403
    assert policy.decide(frank, Action.READ, "acme/secret").status == 404
    assert policy.decide(frank, Action.WRITE, "acme/other").status == 403
    assert policy.readable(frank, ["acme/secret", "acme/other"]) == ["acme/other"]


async def test_old_token_lists_keep_what_they_allowed(tmp_path: Path) -> None:
    policy = _policy({}, private=("internal.x", "bob/internal.x"))
    async with await Workspace.init(tmp_path / "ws") as workspace:
        server = ServerConfig(
            read_tokens=frozenset({"r"}),
            push_tokens=frozenset({"p"}),
            admin_tokens=frozenset({"a"}),
        )
        reader, pusher, admin, anonymous, unknown = [
            await principal_of(workspace, server, token) for token in ("r", "p", "a", None, "x")
        ]
    assert reader is not None and pusher is not None and admin is not None
    assert anonymous == ANONYMOUS and unknown is None
    assert policy.decide(reader, Action.READ, "internal.x").allowed  # private: read tokens see it
    assert policy.decide(ANONYMOUS, Action.READ, "internal.x").status == 404
    assert policy.decide(Principal("alice"), Action.READ, "internal.x").status == 404
    assert policy.decide(reader, Action.WRITE, "public.x").status == 403
    assert policy.decide(pusher, Action.WRITE, "public.x").allowed
    assert policy.decide(pusher, Action.WRITE, "bob/x").allowed  # push tokens push anywhere
    assert policy.decide(pusher, Action.READ, "internal.x").status == 404  # but read as before
    assert policy.decide(reader, Action.READ, "bob/internal.x").allowed
    assert policy.decide(admin, Action.ADMIN, "bob/x").allowed
    assert policy.decide(ANONYMOUS, Action.READ, "public.x").allowed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {
                "relations": [
                    {
                        "subject": "Account:a",
                        "relation": "role",
                        "value": "god",
                        "object": "Dataset:a/b",
                    }
                ]
            },
            "value of reader, editor",
        ),
        (
            {
                "relations": [
                    {
                        "subject": "Dataset:a/c",
                        "relation": "role",
                        "value": "reader",
                        "object": "Dataset:a/b",
                    }
                ]
            },
            "roles are given to Accounts",
        ),
        (
            {"attributes": [{"object": "Dataset:a/b", "name": "allowEverything", "value": True}]},
            "knows the Dataset attributes",
        ),
        (
            {"attributes": [{"object": "Dataset:a/b", "name": "allowPublicRead", "value": "yes"}]},
            "true or false",
        ),
    ],
)
def test_relations_odfd_does_not_understand_are_refused(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(RelationsError, match=message):
        check_relations(spec)


async def test_the_policy_follows_relations_changes(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        cache = PolicyCache(workspace, _private)
        assert not (await cache.policy()).decide(Principal("x"), Action.WRITE, "y/d").allowed
        (tmp_path / "r.yaml").write_text(
            f"$schema: {RELATIONS.schema}\nheaders:\n  name: r\nspec:\n  relations:\n"
            "    - {subject: 'Account:x', relation: role, value: editor, object: 'Dataset:y/d'}\n"
        )
        await apply_manifests(workspace, load_manifests([tmp_path / "r.yaml"]))
        assert (await cache.policy()).decide(Principal("x"), Action.WRITE, "y/d").allowed
