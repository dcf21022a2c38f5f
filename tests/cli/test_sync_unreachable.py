"""``odfd pull`` and ``odfd push`` to a node that does not answer say what failed and what to
check, in ``odfd sql --remote``'s words (``cannot_reach``), not aiohttp's ``Cannot connect to
host … ssl:default [Connect call failed …]``: a closed port, and ``https://`` to a node serving
plain HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import run
from tests.cli.test_sql_remote_errors import node  # noqa: F401  (a served node, plain HTTP)
from tests.verifier.builders import root_with_slices


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]  # bound, not listening: refused


@pytest.fixture
def client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    import asyncio

    from storage.workspace import Workspace

    root = tmp_path / "client"
    assert run(capsys, "-q", "init", "--root", str(root))[0] == 0

    async def add() -> None:
        async with await Workspace.open(root) as workspace:
            await root_with_slices(workspace, "mine", [[1, 2]])

    asyncio.run(add())
    return root


def _fails(capsys: pytest.CaptureFixture[str], client: Path, *args: str) -> str:
    code, _, err = run(capsys, "--no-daemon", *args, "--root", str(client))
    assert code != 0, err
    assert "Traceback" not in err and "ssl:default" not in err, err
    return err


def test_a_closed_port_is_named_with_what_to_check(
    capsys: pytest.CaptureFixture[str], client: Path, closed_port: int
) -> None:
    url = f"http://127.0.0.1:{closed_port}/mine"
    for args in (("pull", url), ("push", "mine", "--to", url)):
        err = _fails(capsys, client, *args)
        assert f"{url}: cannot reach the node at http://127.0.0.1:{closed_port}/ " in err
        assert "(connection refused)" in err and "`odfd serve`" in err


def test_https_to_a_plain_http_node_is_named_as_tls(
    capsys: pytest.CaptureFixture[str],
    client: Path,
    node: str,  # noqa: F811
) -> None:
    url = node.replace("http://", "https://") + "match.nums"
    for args in (("pull", url), ("push", "mine", "--to", url)):
        err = _fails(capsys, client, *args)
        assert "TLS failed" in err and "answers plain HTTP there: use an http:// URL" in err
        assert "is it serving" not in err
