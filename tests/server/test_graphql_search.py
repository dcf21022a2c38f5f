"""``odfd search`` over an ``odf+http://`` repository reads the node's GraphQL search (the
server records a ``POST /graphql`` and no listing), and over a node without GraphQL the odfd
JSON listing at ``/``, with the same results; a refused token is reported either way. And
``odfd serve`` itself answers kamu-cli's search query."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odfd.sync.errors import SyncError
from odfd.sync.search import search_repo
from odfd.sync.transport.settings import TransportSettings
from storage.workspace import Workspace
from tests.cli.helpers import odfd_serve, run
from tests.server.graphql_node import READ_TOKEN, SEARCH_QUERY, Served, serve
from tests.server.odata_node import PRIVATE, add_datasets


@pytest.fixture(scope="module")
def with_graphql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("graphql-search")) / "ws")


@pytest.fixture(scope="module")
def without_graphql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(Path(tmp_path_factory.mktemp("listing-search")) / "ws", query_api=False)


def search(
    capsys: pytest.CaptureFixture[str], root: Path, served: Served, text: str
) -> list[dict[str, Any]]:
    if not root.exists():
        assert run(capsys, "init", "--root", str(root))[0] == 0
        code, _, err = run(capsys, "repo", "add", "hub", f"odf+{served.url}", "--root", str(root))
        assert code == 0, err
    code, out, err = run(capsys, "search", text, "--repo", "hub", "-o", "json", "--root", str(root))
    assert code == 0, err
    found: list[dict[str, Any]] = json.loads(out)
    return found


def test_search_reads_the_graphql_search(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    with_graphql: Served,
    without_graphql: Served,
) -> None:
    first = len(with_graphql.requests)
    by_graphql = search(capsys, tmp_path / "a", with_graphql, "a")
    used = with_graphql.requests[first:]
    assert ("POST", "/graphql") in used and ("GET", "/") not in used, used
    first = len(without_graphql.requests)
    by_listing = search(capsys, tmp_path / "b", without_graphql, "a")
    used = without_graphql.requests[first:]
    assert ("POST", "/graphql") in used and ("GET", "/") in used, used

    def parts(found: list[dict[str, Any]], served: Served) -> list[tuple[str, str, str, str]]:
        return [
            (f["repo"], f["alias"], f["kind"], f["url"].removeprefix(served.url)) for f in found
        ]

    assert parts(by_graphql, with_graphql) == parts(by_listing, without_graphql)
    assert parts(by_graphql, with_graphql) == [
        ("hub", "alice/empty", "Root", "/alice/empty/"),
        ("hub", "alice/weather", "Root", "/alice/weather/"),
        ("hub", "foo.bar", "Root", "/foo.bar/"),
    ]
    assert search(capsys, tmp_path / "a", with_graphql, "WEATHER") == [
        {
            "repo": "hub",
            "alias": "alice/weather",
            "kind": "Root",
            "url": f"{with_graphql.url}/alice/weather/",
        }
    ]


async def test_a_token_reaches_private_datasets_and_a_bad_one_is_reported(
    with_graphql: Served, without_graphql: Served
) -> None:
    for served in (with_graphql, without_graphql):
        url = f"odf+{served.url}"
        tokens = TransportSettings(tokens={f"{served.url}/": READ_TOKEN})
        found = await search_repo("hub", url, "nums", tokens)
        assert [(f.alias, f.url) for f in found] == [(PRIVATE, f"{served.url}/{PRIVATE}/")]
        assert await search_repo("hub", url, "nums") == []
        refused = TransportSettings(tokens={f"{served.url}/": "not-a-token"})
        with pytest.raises(SyncError, match="HTTP 401"):
            await search_repo("hub", url, "nums", refused)


def test_odfd_serve_answers_kamus_search(tmp_path: Path) -> None:
    """The real command: ``odfd serve`` in its own process serves ``/graphql``."""
    root = tmp_path / "ws"

    async def prepare() -> None:
        async with await Workspace.init(root) as workspace:
            await add_datasets(workspace)

    asyncio.run(prepare())
    with odfd_serve(root) as (url, _process):
        request = urllib.request.Request(
            f"{url.rstrip('/')}/graphql",
            data=json.dumps({"query": SEARCH_QUERY.replace("{query}", "bar")}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
    nodes = answer["data"]["search"]["query"]["nodes"]
    assert [(n["name"], n["data"]["numRecordsTotal"]) for n in nodes] == [("foo.bar", 3)]
