"""Uploading a file ahead and ingesting it with ``POST /{dataset}/ingest?uploadToken=``, on a
real server through real HTTP requests.

``test_reference_upload_cases`` restates the reference's ``test_upload_local.rs``: its requests,
status codes and messages (unauthorized, too large, another account's upload, a length other than
the declared one, reading an upload back with any token or none). The others cover the ingest of
an upload: the same data and logical hash as the same bytes in the body, and every bad token a 4xx
with one message and nothing committed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest

from odfd.app.accounts import add_account, create_token
from odfd.app.node import Node
from odfd.app.uploads import UploadToken, owner_id
from odfd.server.app import Mount, running
from odfd.server.ingest_api import IngestApi
from odfd.server.upload_api import UploadApi
from protocol.model import Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events
from tests.pipeline.test_ingest_api import (
    PUSH,
    READ,
    SOURCE1,
    _records,
    _snapshot,
    node_with_tokens,
)

LIMIT = 1000
"""The test node's ``[server] upload_max_bytes``."""
CSV = b"2020-01-01T00:00:00Z,A,100\n2020-01-02T00:00:00Z,B,200\n"


@dataclass
class Uploading:
    url: str
    http: aiohttp.ClientSession
    dataset: Dataset
    nodes: list[Node]
    """The node the server's routes use (``nodes[0]``; a test swaps it to change settings)."""
    workspace: Workspace

    async def call(
        self,
        method: str,
        path_or_url: str,
        *,
        token: str | None = PUSH,
        params: dict[str, str] | None = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        url = path_or_url if "://" in path_or_url else self.url + path_or_url
        async with self.http.request(
            method, url, params=params or {}, data=data, headers=sent
        ) as response:
            body = await response.read()
            if response.content_type == "application/json" and body:
                return response.status, json.loads(body)
            return response.status, body

    async def prepare(
        self, file_name: str, length: int, content_type: str = "", token: str | None = PUSH
    ) -> tuple[int, Any]:
        params = {"fileName": file_name, "contentLength": str(length)}
        if content_type:
            params["contentType"] = content_type
        return await self.call("POST", "platform/file/upload/prepare", token=token, params=params)

    async def send(self, url: str, content: bytes, token: str | None = PUSH) -> tuple[int, Any]:
        """The file as the reference's client sends it: the form part ``file``."""
        form = aiohttp.FormData()
        form.add_field("file", content, filename="test.txt", content_type="text/plain")
        return await self.call("POST", url, token=token, data=form)

    async def upload(self, file_name: str, content: bytes, content_type: str = "") -> str:
        """A prepared and sent upload's token."""
        status, context = await self.prepare(file_name, len(content), content_type)
        assert status == 200, context
        status, body = await self.send(context["uploadUrl"], content)
        assert status == 200, body
        return str(context["uploadToken"])

    async def ingest_upload(
        self, upload_token: str, token: str | None = PUSH, path: str = "population"
    ) -> tuple[int, Any]:
        return await self.call(
            "POST", f"{path}/ingest", token=token, params={"uploadToken": upload_token}
        )


@pytest.fixture
async def uploading(workspace: Workspace) -> AsyncIterator[Uploading]:
    node, server = node_with_tokens(workspace, upload_max_bytes=LIMIT)
    nodes = [node]
    dataset = await create(workspace, _snapshot(SOURCE1))
    mounts: list[Mount] = [IngestApi(lambda: nodes[0]), UploadApi(lambda: nodes[0])]
    async with (
        running(workspace, server, mounts=mounts) as served,
        aiohttp.ClientSession() as http,
    ):
        yield Uploading(served.url, http, dataset, nodes, workspace)


async def test_reference_upload_cases(uploading: Uploading) -> None:
    body = b"a-test-file-body"
    bob = await _account_token(uploading, "bob")
    unauthorized = {"message": "No authentication token provided"}
    made_up = UploadToken("123", "someFile.json", owner_id("kamu"), 123, "application/json")

    # unauthorized: the prepare and the upload
    assert await uploading.prepare("test.txt", 100, "text/plain", token=None) == (401, unauthorized)
    made_up_url = f"platform/file/upload/{made_up.encode()}"
    assert await uploading.send(made_up_url, b"some file", token=None) == (401, unauthorized)

    # authorized: the reference's UploadContext, and the file stored under the workspace
    status, context = await uploading.prepare("test.txt", len(body), "text/plain")
    assert status == 200
    assert context["method"] == "POST"
    assert context["useMultipart"] is True
    assert context["fields"] == []
    assert context["headers"] == [["Authorization", f"Bearer {PUSH}"]]
    assert context["uploadUrl"] == f"{uploading.url}platform/file/upload/{context['uploadToken']}"
    token = UploadToken.decode(context["uploadToken"])
    assert (token.file_name, token.content_length, token.content_type) == (
        "test.txt",
        len(body),
        "text/plain",
    )
    assert await uploading.send(context["uploadUrl"], body) == (200, b"")
    stored = uploading.workspace.layout.uploads_dir / token.owner_account_id / token.upload_id
    assert (stored / "content").read_bytes() == body

    # by a different account: refused
    status, reply = await uploading.send(context["uploadUrl"], body, token=bob)
    assert status == 403, reply
    assert "belongs to another account" in reply["message"]

    # too large: at the prepare, and a file past the node's limit sent for a smaller declared one
    too_large = await uploading.prepare("test.txt", LIMIT + 1, "text/plain")
    assert too_large[0] == 400
    assert too_large[1]["message"].startswith("Content too large")
    assert str(LIMIT) in too_large[1]["message"]
    status, reply = await uploading.send(context["uploadUrl"], b"x" * (LIMIT + 1))
    assert status == 400
    assert reply["message"].startswith("Content too large")

    # a length other than declared: refused, the file sent before kept
    status, short = await uploading.prepare("test.txt", len("Some text"), "text/plain")
    assert status == 200
    assert await uploading.send(short["uploadUrl"], b"Some totally different text") == (
        400,
        {"message": "Actual content length 27 does not match the initially declared length 9"},
    )
    assert (stored / "content").read_bytes() == body

    # read back with the same token, another account's, and anonymously
    for reader in (PUSH, bob, None):
        assert await uploading.call("GET", context["uploadUrl"], token=reader) == (200, body)

    # a read token may not upload; a file name is a plain name
    assert (await uploading.prepare("test.txt", 1, token=READ))[0] == 403
    status, reply = await uploading.prepare("../escape.csv", 1)
    assert status == 400
    assert "plain file name" in reply["message"]


async def test_bad_upload_tokens_are_refused_and_commit_nothing(uploading: Uploading) -> None:
    head = await uploading.dataset.chain.head()
    bob = await _account_token(uploading, "bob")
    kamus = await uploading.upload("data.csv", CSV)
    token = UploadToken.decode(kamus)
    altered = replace(token, content_length=token.content_length + 1).encode()
    status, never_sent = await uploading.prepare("data.csv", len(CSV))
    assert status == 200
    plain = await uploading.upload("data.txt", b"x", "text/plain")
    status, context = await uploading.prepare("data.csv", len(CSV), token=bob)
    assert status == 200
    assert await uploading.send(context["uploadUrl"], CSV, token=bob) == (200, b"")
    bobs = context["uploadToken"]

    cases: list[tuple[str, str | None, int, str]] = [
        ("not-a-token!", PUSH, 400, "not an upload token"),
        (UploadToken("0" * 32, "a.csv", owner_id("kamu"), 1).encode(), PUSH, 404, "no upload"),
        (altered, PUSH, 404, "altered"),
        (bobs, PUSH, 403, "another account"),
        (never_sent["uploadToken"], PUSH, 404, "never sent"),
        (plain, PUSH, 415, "not supported"),
        (kamus, None, 401, "bearer token"),
    ]
    for upload_token, bearer, expected, words in cases:
        status, reply = await uploading.ingest_upload(upload_token, token=bearer)
        assert status == expected, (upload_token, reply)
        assert words in reply["message"], reply
    status, reply = await uploading.ingest_upload(kamus, path="no-such-dataset")
    assert status == 404, reply

    # expired: refused, then removed by the next prepare
    node = uploading.nodes[0]
    expiring = replace(node.config, server=replace(node.config.server, upload_ttl=0.2))
    uploading.nodes[0] = Node(uploading.workspace, expiring, engines=TEST_ENGINES)
    soon_gone = await uploading.upload("data.csv", CSV)
    await asyncio.sleep(0.3)
    status, reply = await uploading.ingest_upload(soon_gone)
    assert status == 404
    assert "expired" in reply["message"]
    await uploading.prepare("next.csv", 1)
    gone = UploadToken.decode(soon_gone)
    uploads = uploading.workspace.layout.uploads_dir
    assert not (uploads / gone.owner_account_id / gone.upload_id).exists()
    assert (uploads / token.owner_account_id / token.upload_id).exists()  # its expiry is later

    assert await uploading.dataset.chain.head() == head
    assert await _records(uploading.dataset) == []


@pytest.mark.spark
async def test_an_upload_ingests_as_the_same_bytes_in_the_body(
    uploading: Uploading, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same CSV into two datasets of the same source, once as the body and once uploaded
    (its media type from its file name): the same records and the same logical hash."""
    at = Timestamp.parse_rfc3339("2024-05-06T07:08:09Z")
    monkeypatch.setattr(Timestamp, "now", classmethod(lambda cls: at))
    twin = await create(uploading.workspace, _snapshot(SOURCE1, name="population-twin"))

    status, reply = await uploading.call(
        "POST", "population/ingest", data=CSV, headers={"Content-Type": "text/csv"}
    )
    assert status == 200, reply
    upload_token = await uploading.upload("data.csv", CSV)
    status, reply = await uploading.ingest_upload(upload_token, path="population-twin")
    assert status == 200, reply

    direct, uploaded = await data_events(uploading.dataset), await data_events(twin)
    assert len(direct) == len(uploaded) == 1
    assert direct[0].new_data is not None and uploaded[0].new_data is not None
    assert direct[0].new_data.logical_hash == uploaded[0].new_data.logical_hash
    assert direct[0].new_data.offset_interval == uploaded[0].new_data.offset_interval
    assert await _records(uploading.dataset) == await _records(twin) != []
    # the upload stays usable until it expires (the reference keeps it too)
    assert UploadToken.decode(upload_token).upload_id in {
        path.name for path in uploading.workspace.layout.uploads_dir.glob("*/*")
    }


async def _account_token(uploading: Uploading, name: str) -> str:
    node = uploading.nodes[0]
    await add_account(node, name, password=None)
    return (await create_token(node, name)).secret
