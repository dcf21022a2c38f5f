"""``POST /platform/login``, ``GET /platform/token/validate`` and ``GET /accounts/me`` on a real
``odfd serve``: password logins issue tokens of the account, expired and revoked tokens are
refused, the ``[server]`` token lists keep working, failed logins are slowed and nothing secret
is echoed or logged."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from odfd.app.accounts import add_account, create_token, revoke_token
from odfd.app.node import open_node
from storage.workspace import Workspace
from tests.cli.helpers import odfd_serve

PUSH_TOKEN = "legacy-push-token-123"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, str, subprocess.Popen[str]]]:
    root = tmp_path_factory.mktemp("login") / "node"

    async def prepare() -> None:
        async with await Workspace.init(root):
            pass
        async with await open_node(root) as opened:
            await add_account(
                opened, "alice", password=PASSWORD, display_name="Alice", email="a@example.org"
            )

    asyncio.run(prepare())
    with open(root / "config.toml", "a") as config:
        config.write(f'\n[server]\npush_tokens = ["{PUSH_TOKEN}"]\n')
    with odfd_serve(root) as (url, process):
        yield root, url, process


def _login(url: str, login: str, password: str) -> requests.Response:
    credentials = json.dumps({"login": login, "password": password})
    body = {"loginMethod": "password", "loginCredentialsJson": credentials}
    return requests.post(url + "platform/login", json=body, timeout=30)


def _get(url: str, path: str, token: str | None) -> requests.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return requests.get(url + path, headers=headers, timeout=30)


def _in_node(root: Path, work: Any) -> Any:
    async def run() -> Any:
        async with await open_node(root) as opened:
            return await work(opened)

    return asyncio.run(run())


def test_a_password_login_issues_a_token_of_the_account(node: tuple[Path, str, Any]) -> None:
    _, url, _ = node
    reply = _login(url, "alice", PASSWORD)
    assert reply.status_code == 200, reply.text
    token = reply.json()["accessToken"]
    assert _get(url, "platform/token/validate", token).status_code == 200
    me = _get(url, "accounts/me", token)
    assert me.status_code == 200
    assert me.json()["accountName"] == "alice"
    assert me.json()["id"].startswith("did:odf:")
    assert me.json()["displayName"] == "Alice" and me.json()["email"] == "a@example.org"
    anonymous = _get(url, "platform/token/validate", None)
    assert (anonymous.status_code, anonymous.json()) == (
        401,
        {"message": "No authentication token provided"},  # the reference's words
    )
    invalid = _get(url, "platform/token/validate", token + "x")
    assert (invalid.status_code, invalid.json()) == (
        401,
        {"message": "Authentication token invalid"},
    )


def test_bad_logins_are_refused_without_echoing_the_password(node: tuple[Path, str, Any]) -> None:
    _, url, _ = node
    wrong = _login(url, "alice", "not-the-password")
    assert wrong.status_code == 401 and "not-the-password" not in wrong.text
    assert wrong.json() == {"message": "Rejected credentials: invalid login or password"}
    unknown = _login(url, "nobody", PASSWORD)
    assert unknown.status_code == 401 and unknown.json() == wrong.json()
    method = requests.post(
        url + "platform/login",
        json={"loginMethod": "oauth", "loginCredentialsJson": "{}"},
        timeout=30,
    )
    assert method.status_code == 400 and "loginMethod" in method.json()["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "the body is not JSON"),
        (b"[]", "the body must be a JSON object"),
        (b"{}", "missing field `loginMethod`"),
        (b'{"loginMethod": "password"}', "missing field `loginCredentialsJson`"),
        (
            b'{"loginMethod": "password", "loginCredentialsJson": "{\\"login\\": \\"alice\\", secret"}',
            "loginCredentialsJson is not JSON",
        ),
    ],
)
def test_a_malformed_login_names_the_field_and_quotes_nothing(
    node: tuple[Path, str, Any], body: bytes, message: str
) -> None:
    _, url, _ = node
    reply = requests.post(url + "platform/login", data=body, timeout=30)
    assert (reply.status_code, reply.json()) == (400, {"message": message})


def test_repeated_failures_slow_later_attempts_for_that_login(
    node: tuple[Path, str, Any],
) -> None:
    _, url, _ = node
    for _ in range(3):
        assert _login(url, "mallory-target", "guess").status_code == 401
    started = time.monotonic()
    assert _login(url, "mallory-target", "guess").status_code == 401
    assert time.monotonic() - started >= 0.5


def test_expired_and_revoked_tokens_are_refused(node: tuple[Path, str, Any]) -> None:
    root, url, _ = node
    expired = _in_node(
        root, lambda n: create_token(n, "alice", lifetime=timedelta(seconds=-1))
    ).secret
    refused = _get(url, "platform/token/validate", expired)
    assert (refused.status_code, refused.json()) == (
        401,
        {"message": "Authentication token expired"},
    )
    assert _get(url, "accounts/me", expired).status_code == 401
    for route in ("accounts/me", "query?query=select%201", "x/refs/head", "alice/x/blocks/zQ"):
        # every route refuses it in the reference's words (odfd.server.refusals)
        answer = _get(url, route, expired)
        assert (answer.status_code, answer.json()) == (
            401,
            {"message": "Authentication token expired"},
        ), route
    assert _get(url, "odata/x", expired).text.count("Authentication token expired") == 1
    issued = _in_node(root, lambda n: create_token(n, "alice"))
    assert _get(url, "accounts/me", issued.secret).status_code == 200
    _in_node(root, lambda n: revoke_token(n, "alice", issued.record.id))
    revoked = _get(url, "platform/token/validate", issued.secret)
    assert (revoked.status_code, revoked.json()) == (
        401,
        {"message": "Authentication token invalid"},
    )
    assert _get(url, "accounts/me", issued.secret).status_code == 401
    for route in ("x/refs/head", "query?query=select%201"):
        answer = _get(url, route, issued.secret)
        assert answer.json() == {"message": "Authentication token invalid"}, route


def test_the_server_token_lists_are_tokens_of_the_built_in_account(
    node: tuple[Path, str, Any],
) -> None:
    _, url, _ = node
    assert _get(url, "platform/token/validate", PUSH_TOKEN).status_code == 200
    me = _get(url, "accounts/me", PUSH_TOKEN)
    assert me.status_code == 200 and me.json()["accountName"] == "kamu"


def test_no_password_or_token_reaches_the_log(node: tuple[Path, str, Any]) -> None:
    root, url, process = node
    token = _login(url, "alice", PASSWORD).json()["accessToken"]
    _get(url, f"accounts/me?token={token}", token)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=20)
    assert PASSWORD not in err and token not in err and PUSH_TOKEN not in err
