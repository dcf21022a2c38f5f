"""The transfer routes refuse as the reference's HTTP adapter does, ``{"message": ...}`` with
the status (404 for no dataset or object, 400 for a malformed hash or a missing protocol
header, 401 for a push without a token), at ``/{dataset}/…`` and ``/{account}/{dataset}/…``;
and odfd's client reads both a JSON refusal and an older node's plain text."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from odfd.config import ServerConfig
from odfd.server.app import running
from storage.stores.http import refusal_message
from storage.workspace import Workspace
from tests.verifier.builders import root_with_slices

HASH = "f1620" + "0" * 64


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("GET", "nosuch/refs/head", 404, "no dataset nosuch"),
        ("GET", "alice/nosuch/refs/head", 404, "no dataset alice/nosuch"),
        ("GET", "nums/refs/tail", 404, "no ref tail"),
        ("GET", "nums/blocks/not-a-hash", 400, ""),
        ("GET", f"nums/blocks/{HASH}", 404, "no object"),
        ("GET", f"nums/data/{HASH}", 404, "no object"),
        ("GET", f"nums/checkpoints/{HASH}", 404, "no object"),
        ("GET", "nosuch/pull", 404, "no dataset nosuch"),
        ("GET", "nums/push", 400, "Header of type `x-odf-smtp-version` was missing"),
        ("GET", "nums/pull", 400, "Header of type `x-odf-smtp-version` was missing"),
        ("PUT", f"nums/data/{HASH}", 403, "signed upload URL"),
        ("DELETE", "nums/refs/head", 405, "DELETE is not allowed"),
    ],
)
async def test_transfer_route_refusals_are_json(
    tmp_path: Path, method: str, path: str, status: int, words: str
) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await root_with_slices(workspace, "nums", [[1, 2]])
        async with running(workspace, ServerConfig(port=0)) as server:
            async with aiohttp.ClientSession() as session:
                async with session.request(method, server.url + path) as response:
                    answer = response.status, response.content_type, await response.json()
    assert answer[:2] == (status, "application/json")
    assert words in answer[2]["message"]


async def test_a_push_without_a_token_is_refused_in_the_reference_words(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        async with running(workspace, ServerConfig(port=0)) as server:
            async with aiohttp.ClientSession() as session:
                headers = {"x-odf-smtp-version": "1"}
                async with session.get(server.url + "nums/push", headers=headers) as response:
                    answer = response.status, await response.json()
    # kamu-cli's push handler: AccessError::Unauthorized, whose words are "Unauthorized"
    assert answer == (401, {"message": "Unauthorized: No authentication token provided"})


async def test_a_protocol_version_mismatch_is_refused_in_the_reference_words(
    tmp_path: Path,
) -> None:
    """The reference's ``Incompatible client version`` first, then odfd's explanation."""
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await root_with_slices(workspace, "nums", [[1, 2]])
        async with running(workspace, ServerConfig(port=0)) as server:
            async with aiohttp.ClientSession() as session:
                headers = {"x-odf-smtp-version": "2"}
                async with session.get(server.url + "nums/pull", headers=headers) as response:
                    answer = response.status, await response.json()
    assert answer == (
        400,
        {
            "message": "Incompatible client version: the client speaks '2', this server "
            "Smart Transfer Protocol version 1"
        },
    )


@pytest.mark.parametrize(
    ("headers", "status", "words"),
    [
        ({}, 400, "Header of type `x-odf-smtp-version` was missing"),
        ({"x-odf-smtp-version": "2"}, 401, "Unauthorized: No authentication token provided"),
        (
            {"x-odf-smtp-version": "2", "Authorization": "Bearer wrong"},
            401,
            "Authentication token invalid",
        ),
        (
            {"x-odf-smtp-version": "2", "Authorization": "Bearer pusher"},
            400,
            "Incompatible client version",
        ),
        ({"Authorization": "Bearer pusher"}, 400, "Header of type `x-odf-smtp-version` was"),
        ({"x-odf-smtp-version": "v1"}, 400, "invalid HTTP header (x-odf-smtp-version)"),
        ({"x-odf-smtp-version": "9" * 10}, 400, "invalid HTTP header (x-odf-smtp-version)"),
    ],
)
async def test_a_push_is_refused_in_the_references_order(
    tmp_path: Path, headers: dict[str, str], status: int, words: str
) -> None:
    """The reference looks at the version header's presence, then the token, then the
    version: a client with a wrong version and no token is told about the token."""
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await root_with_slices(workspace, "nums", [[1, 2]])
        config = ServerConfig(port=0, push_tokens=frozenset({"pusher"}))
        async with running(workspace, config) as server:
            async with aiohttp.ClientSession() as session:
                async with session.get(server.url + "nums/push", headers=headers) as response:
                    answer = response.status, await response.json()
    assert answer[0] == status
    assert answer[1]["message"].startswith(words)


@pytest.mark.parametrize("version", ["1", "+1", "01"])
async def test_the_version_is_read_as_the_integer_the_reference_parses(
    tmp_path: Path, version: str
) -> None:
    """As Rust's ``i32`` parse reads it, ``+1`` and ``01`` are version 1: the upgrade goes on."""
    async with await Workspace.init(tmp_path / "ws") as workspace:
        await root_with_slices(workspace, "nums", [[1, 2]])
        async with running(workspace, ServerConfig(port=0)) as server:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(
                    server.url + "nums/pull",
                    headers={"x-odf-smtp-version": version},
                    protocols=("odf/smart-transfer-protocol/v1",),
                ) as ws:
                    protocol = ws.protocol
    assert protocol == "odf/smart-transfer-protocol/v1"


def test_the_client_reads_json_and_plain_text_refusals() -> None:
    assert refusal_message('{"message": "Authentication token invalid"}') == (
        "Authentication token invalid"
    )
    assert refusal_message("no dataset foo on this node\n") == "no dataset foo on this node"
    assert refusal_message('{"other": 1}') == '{"other": 1}'


async def test_a_path_nothing_serves_is_the_references_not_found(tmp_path: Path) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        async with running(workspace, ServerConfig(port=0)) as server:
            async with aiohttp.ClientSession() as session:
                async with session.get(server.url + "a/b/c/d") as response:
                    answer = response.status, await response.text()
    assert answer == (404, "Not Found")
