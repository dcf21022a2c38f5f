"""``/graphql``'s ``auth`` mutations, as the kamu web UI signs in: ``login`` with a password gives
a token and its account, refused in ``POST /platform/login``'s words and slowed by the same
throttle; ``accountDetails`` names a token's account and refuses a bad one as every route does;
a mutation sent with GET is refused."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odfd.app.accounts import add_account
from odfd.app.node import Node
from odfd.config import NodeConfig
from storage.workspace import Workspace
from tests.server.graphql_node import Served, send, serve
from tests.server.odata_node import SERVER, add_datasets

PASSWORD = "correct horse battery"
LOGIN = """mutation($method: AccountProvider!, $credentials: String!) {
  auth { login(loginMethod: $method, loginCredentialsJson: $credentials) {
    accessToken account { id accountName displayName } } } }"""
DETAILS = """mutation($token: String!) {
  auth { accountDetails(accessToken: $token) { id accountName } } }"""


async def add_with_account(workspace: Workspace) -> None:
    await add_datasets(workspace)
    await add_account(Node(workspace, NodeConfig(server=SERVER)), "bob", password=PASSWORD)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("graphql-auth")) / "ws", add=add_with_account)


def credentials(login: str, password: str) -> str:
    return json.dumps({"login": login, "password": password})


def graphql_login(served: Served, text: str, method: str = "PASSWORD") -> dict[str, Any]:
    status, answer = served.post(LOGIN, variables={"method": method, "credentials": text})
    assert status == 200, answer
    result: dict[str, Any] = answer
    return result


def platform_login(served: Served, text: str) -> tuple[int, Any]:
    body = json.dumps({"loginMethod": "password", "loginCredentialsJson": text}).encode()
    request = urllib.request.Request(f"{served.url}/platform/login", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    return send(request)


def test_login_gives_a_token_of_the_account(served: Served) -> None:
    answer = graphql_login(served, credentials("Bob", PASSWORD))
    assert "errors" not in answer, answer
    found = answer["data"]["auth"]["login"]
    account = found["account"]
    assert (account["accountName"], account["displayName"]) == ("bob", "bob")
    assert account["id"].startswith("did:odf:")
    status, details = served.post(DETAILS, variables={"token": found["accessToken"]})
    assert status == 200 and "errors" not in details, details
    assert details["data"]["auth"]["accountDetails"] == {
        "id": account["id"],
        "accountName": "bob",
    }


def test_refusals_are_the_platform_logins_words(served: Served) -> None:
    for text in (credentials("bob", "wrong"), "{not json", json.dumps({"login": "bob"})):
        answer = graphql_login(served, text)
        assert answer["data"] is None, answer
        [error] = answer["errors"]
        assert error["path"] == ["auth", "login"]
        status, platform = platform_login(served, text)
        assert status in (400, 401)
        assert error["message"] == platform["message"]
        assert PASSWORD not in json.dumps(answer)
    answer = graphql_login(served, credentials("bob", PASSWORD), method="OAUTH_GITHUB")
    assert answer["errors"][0]["message"] == (
        "unsupported loginMethod OAUTH_GITHUB: odfd supports PASSWORD"
    )


def test_failed_logins_slow_both_routes(served: Served) -> None:
    for _ in range(3):
        assert "errors" in graphql_login(served, credentials("carol", "guess"))
    started = time.monotonic()
    status, _answer = platform_login(served, credentials("carol", "guess"))
    assert status == 401
    assert time.monotonic() - started >= 0.5
    started = time.monotonic()
    assert "errors" in graphql_login(served, credentials("carol", "guess"))
    assert time.monotonic() - started >= 1.0


def test_account_details_refuses_a_bad_token_as_every_route(served: Served) -> None:
    status, answer = served.post(DETAILS, variables={"token": "not-a-token"})
    assert status == 200 and answer["data"] is None
    request = urllib.request.Request(f"{served.url}/platform/token/validate")
    request.add_header("Authorization", "Bearer not-a-token")
    refused, words = send(request)
    assert refused == 401
    assert answer["errors"][0]["message"] == words["message"]


def test_a_mutation_sent_with_get_is_refused(served: Served) -> None:
    query = urllib.parse.urlencode(
        {"query": DETAILS, "variables": json.dumps({"token": "not-a-token"})}
    )
    status, answer = served.get(f"/graphql?{query}")
    assert (status, answer) == (405, {"message": "a mutation is sent with POST, not GET"})
