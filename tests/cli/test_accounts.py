"""``odfd account``: accounts with argon2-hashed passwords and hashed, expiring, revocable tokens."""

from __future__ import annotations

import asyncio
import io
import re
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from odfd.app.accounts import account_for_token, check_password, create_token
from odfd.app.node import open_node
from odfd.app.resources import account_handle
from protocol.identity import AccountName
from tests.cli.helpers import run


@pytest.fixture
def ws(workspace_root: Path) -> tuple[str, str]:
    return ("--root", str(workspace_root))


def _add(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    ws: tuple[str, str],
    name: str,
    password: str,
    *extra: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(password + "\n"))
    return run(capsys, "account", "add", *ws, name, "--password-stdin", *extra)


def test_accounts_are_added_listed_and_their_passwords_kept_only_hashed(
    ws: tuple[str, str],
    workspace_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, _, err = _add(capsys, monkeypatch, ws, "Alice", "s3cret-pw", "--email", "a@example.org")
    assert code == 0
    alice_id = account_handle(AccountName("alice")).id
    assert alice_id.startswith("did:odf:") and alice_id in err
    assert _add(capsys, monkeypatch, ws, "alice", "other")[0] != 0  # names are case-insensitive
    code, out, _ = run(capsys, "account", "list", *ws)
    assert code == 0 and f"alice\tAlice <a@example.org>\t{alice_id}" in out.splitlines()
    catalog = next(workspace_root.rglob("catalog.sqlite"))
    with sqlite3.connect(catalog) as db:
        (stored,) = db.execute("SELECT password_hash FROM accounts WHERE name = 'alice'").fetchone()
    assert stored.startswith("$argon2id$") and "s3cret-pw" not in stored

    async def passwords() -> tuple[object, object, object]:
        async with await open_node(workspace_root) as node:
            return (
                await check_password(node, "alice", "s3cret-pw"),
                await check_password(node, "alice", "wrong"),
                await check_password(node, "nobody", "s3cret-pw"),
            )

    good, bad, unknown = asyncio.run(passwords())
    assert good is not None and bad is None and unknown is None

    monkeypatch.setattr("sys.stdin", io.StringIO("new-pw\n"))
    assert run(capsys, "account", "passwd", *ws, "alice", "--password-stdin")[0] == 0

    async def after_passwd() -> tuple[object, object]:
        async with await open_node(workspace_root) as node:
            return (
                await check_password(node, "alice", "s3cret-pw"),
                await check_password(node, "alice", "new-pw"),
            )

    old, new = asyncio.run(after_passwd())
    assert old is None and new is not None
    assert run(capsys, "account", "remove", *ws, "alice")[0] == 0
    assert "alice" not in run(capsys, "account", "list", *ws)[1]
    assert run(capsys, "account", "remove", *ws, "alice")[0] != 0


def test_tokens_are_shown_once_stored_hashed_listed_revoked_and_expire(
    ws: tuple[str, str],
    workspace_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _add(capsys, monkeypatch, ws, "bob", "pw")[0] == 0
    code, out, _ = run(capsys, "account", "token", "create", *ws, "bob", "--label", "ci")
    assert code == 0
    secret = out.strip()
    catalog = next(workspace_root.rglob("catalog.sqlite"))
    with sqlite3.connect(catalog) as db:
        rows = db.execute("SELECT id, token_hash FROM access_tokens").fetchall()
    assert len(rows) == 1 and secret not in rows[0][1]
    token_id = rows[0][0]
    code, out, _ = run(capsys, "account", "token", "list", *ws, "bob")
    assert out.startswith(f"{token_id}\tci\texpires never\tlive")

    async def owner(text: str) -> str | None:
        async with await open_node(workspace_root) as node:
            record = await account_for_token(node, text)
            return None if record is None else record.name

    assert asyncio.run(owner(secret)) == "bob"
    assert asyncio.run(owner(secret + "x")) is None
    assert run(capsys, "account", "token", "revoke", *ws, "bob", token_id)[0] == 0
    assert asyncio.run(owner(secret)) is None
    assert "revoked" in run(capsys, "account", "token", "list", *ws, "bob")[1]
    assert run(capsys, "account", "token", "revoke", *ws, "bob", token_id)[0] != 0

    async def expired() -> str | None:
        async with await open_node(workspace_root) as node:
            issued = await create_token(node, "bob", lifetime=timedelta(seconds=-1))
            record = await account_for_token(node, issued.secret)
            return None if record is None else record.name

    assert asyncio.run(expired()) is None


def test_init_sets_up_the_nodes_admin_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = ("--root", str(tmp_path / "fresh"))
    code, out, _ = run(capsys, "init", *root)
    admin_id = account_handle(AccountName("admin")).id
    assert code == 0 and f"administrator account is admin ({admin_id})" in out
    assert run(capsys, "account", "list", *root)[1] == f"admin\tadmin\t{admin_id} admin\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("admin-pw\n"))
    assert run(capsys, "account", "passwd", *root, "admin", "--password-stdin")[0] == 0

    async def login() -> object:
        async with await open_node(tmp_path / "fresh") as node:
            return await check_password(node, "admin", "admin-pw")

    assert asyncio.run(login()) is not None


def test_access_prints_who_may_do_what_to_a_dataset_and_why(
    ws: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "access", *ws, "test.root.mqtt")
    assert code == 0
    title, header, *rows = out.splitlines()
    assert title == "Access to test.root.mqtt:"
    assert header.split() == ["WHO", "READ", "WRITE", "MAINTAIN", "ADMIN", "WHY"]
    table = {who: cells for who, *cells in (re.split(r"\s{2,}", row) for row in rows)}
    assert table["admin"] == ["yes", "yes", "yes", "yes", "admin is a node admin"]
    assert table["(anonymous)"][:4] == ["yes", "no", "no", "no"]
    assert "allowAnonymousRead is true" in table["(anonymous)"][4]
    code, _, err = run(capsys, "access", *ws, "nosuch")
    assert code == 1 and err.startswith("error: dataset nosuch is not in the workspace")
