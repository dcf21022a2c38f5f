"""``odfd sql --remote`` misused or refused: each failure says what to do next, against a real
served node (the query API on a thread) and a port nothing listens on; and its answers typed as
a local one (the answer's schema read back)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.config import ServerConfig
from protocol.identity import DatasetAliasPattern
from storage.workspace import Workspace
from tests.cli.helpers import run
from tests.cli.test_sql_proof import serving
from tests.verifier.builders import root_with_slices


async def _workspace(root: Path) -> None:
    async with await Workspace.init(root) as workspace:
        await root_with_slices(workspace, "match.nums", [[1, 2, 3]])
        await root_with_slices(workspace, "hidden", [[4]])


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A served node with a public ``match.nums`` and a private ``hidden``."""
    root = tmp_path_factory.mktemp("served") / "ws"
    asyncio.run(_workspace(root))
    config = ServerConfig(
        address="127.0.0.1", port=0, private=(DatasetAliasPattern.parse("hidden"),)
    )
    with serving(root, config) as url:
        yield url


@pytest.fixture
def client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "client"
    assert run(capsys, "-q", "init", "--root", str(root))[0] == 0
    return root


def _remote(capsys: pytest.CaptureFixture[str], client: Path, url: str, sql: str) -> str:
    code, _, err = run(capsys, "sql", "--remote", url, "-c", sql, "--root", str(client))
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_node_that_is_not_running_is_named_with_what_to_check(
    capsys: pytest.CaptureFixture[str], client: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: refused
        err = _remote(capsys, client, f"http://127.0.0.1:{port}/", "SELECT 1")
    assert f"cannot reach the node at http://127.0.0.1:{port}/ (connection refused)" in err
    assert "`odfd serve`" in err and "ssl:default" not in err


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "file:///tmp/ws", "ipfs://bafy"])
def test_a_url_that_is_no_http_node_says_which_url_is_wanted(
    capsys: pytest.CaptureFixture[str], client: Path, url: str
) -> None:
    err = _remote(capsys, client, url, "SELECT 1")
    assert f"{url}: a remote query goes to a node's query API, at its http(s):// URL" in err
    assert "logins" not in err and "file://," not in err


def test_a_dataset_url_is_told_to_use_the_nodes_own(
    capsys: pytest.CaptureFixture[str], client: Path, node: str
) -> None:
    err = _remote(capsys, client, node + "match.nums", "SELECT 1")
    assert f"{node}match.nums/ has no query API (404" in err
    assert "its root, e.g. http://node:8080/" in err


def test_an_unquoted_alias_gets_the_nodes_own_spelling(
    capsys: pytest.CaptureFixture[str], client: Path, node: str
) -> None:
    err = _remote(capsys, client, node, "SELECT * FROM match.nums")
    assert "table 'odf.match.nums' not found" in err
    assert 'did you mean "match.nums"? (dataset names go in double quotes)' in err
    assert err.count("did you mean") == 1  # the node's hint (its query API), not one more here


def test_a_private_dataset_without_a_token_suggests_logging_in_never_naming_it(
    capsys: pytest.CaptureFixture[str], client: Path, node: str
) -> None:
    err = _remote(capsys, client, node, 'SELECT * FROM "Hidden"')
    assert f"no token was sent: a private dataset there needs `odfd login {node}` first" in err
    assert 'did you mean "hidden"' not in err


def test_a_refused_token_says_to_log_in_again(
    capsys: pytest.CaptureFixture[str], client: Path, node: str
) -> None:
    with (client / "config.toml").open("a") as config:
        config.write(f'\n[sync.tokens]\n"{node}" = "not-a-token-of-that-node"\n')
    err = _remote(capsys, client, node, "SELECT 1")
    assert f"{node}query answered 401: " in err
    assert f"the token kept for {node} is refused: log in again (`odfd login {node}`)" in err


def test_a_remote_verify_says_the_same_as_a_remote_query(
    capsys: pytest.CaptureFixture[str], client: Path, tmp_path: Path
) -> None:
    """``--verify FILE --remote URL``: the same words for a URL that is no node's and for a
    node that does not answer (was "cannot ask ftp://x/verify: ftp://x/verify")."""
    code, out, err = run(
        capsys, "sql", "-c", "SELECT 1 AS x", "-o", "json", "--proof", "--root", str(client)
    )
    assert code == 0, err
    answer = tmp_path / "answer.json"
    answer.write_text(out)
    verify = ("sql", "--verify", str(answer), "--root", str(client), "--remote")
    code, _, err = run(capsys, *verify, "ftp://node/")
    assert code == 2  # no verdict (1 is a failed check)
    assert "ftp://node/: a remote query goes to a node's query API, at its http(s):// URL" in err
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        code, _, err = run(capsys, *verify, f"http://127.0.0.1:{port}")
    assert code == 2
    assert f"cannot reach the node at http://127.0.0.1:{port}/ (connection refused)" in err


def test_a_node_that_does_not_speak_tls_is_named_as_a_tls_failure(
    capsys: pytest.CaptureFixture[str], client: Path, node: str
) -> None:
    """``https://`` to a node serving plain HTTP fails in TLS: the node answered, so the error
    says what TLS said rather than asking whether the node is serving."""
    url = node.replace("http://", "https://")
    err = _remote(capsys, client, url, "SELECT 1")
    assert f"cannot reach the node at {url}: " in err
    assert "is it serving" not in err


def test_a_machine_without_a_workspace_asks_anonymously(
    capsys: pytest.CaptureFixture[str],
    node: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It was refused (``no odfd workspace in …``, run ``odfd init``) though a remote query
    needs nothing local: without one it is asked with no token, as anyone may read."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ODFD_HOME", raising=False)
    sql = 'SELECT count(*) AS n FROM "match.nums"'
    code, out, err = run(capsys, "sql", "--remote", node, "-c", sql, "-o", "csv")
    assert (code, out, err) == (0, "n\n3\n", "")
    code, _, err = run(capsys, "sql", "--remote", node, "-c", 'SELECT * FROM "hidden"')
    assert code == 1
    assert f"no token was sent: a private dataset there needs `odfd login {node}` first" in err
    # A workspace named and missing is still the error it was.
    code, _, err = run(capsys, "--root", str(tmp_path / "none"), "sql", "--remote", node, "-c", sql)
    assert code == 1 and "no odfd workspace at" in err


TYPED = (
    "SELECT arrow_cast(12.5, 'Decimal128(10, 2)') AS amount, arrow_cast(7, 'Int32') AS small, "
    "to_timestamp_millis('2024-01-02T03:04:05.123Z') AS at, arrow_cast("
    "to_timestamp_seconds('2024-01-02T03:04:05Z'), 'Timestamp(Second, Some(\"+02:00\"))') AS local, "
    "named_struct('z', 1, 'a', arrow_cast(0.5, 'Decimal128(3, 1)')) AS s, "
    "make_array(date '2024-01-02') AS days, cast(NULL AS BIGINT) AS nothing, "
    "time '03:04:05' AS tm"
)


def test_a_remote_answer_keeps_the_types_a_local_one_has(
    capsys: pytest.CaptureFixture[str], client: Path, node: str, tmp_path: Path
) -> None:
    """``--remote`` wrote what JSON carries: timestamps and decimals as text, int32 as int64,
    struct fields in sorted order. Now the answer's schema types the table: a Parquet file from
    another node is the one ``odfd sql`` writes here, bar a time of day (text, as JSON has it)."""
    import pyarrow.parquet as pq

    files = {}
    for where, extra in (("remote", ["--remote", node]), ("local", [])):
        files[where] = tmp_path / f"{where}.parquet"
        argv = ["sql", *extra, "-c", TYPED, "--root", str(client), "-o", "parquet"]
        code, _, err = run(capsys, *argv, "--output-path", str(files[where]))
        assert code == 0, err
    remote, local = (pq.read_table(files[where]) for where in ("remote", "local"))
    assert remote.schema.field("tm").type == "string"
    assert remote.drop_columns(["tm"]).schema == local.drop_columns(["tm"]).schema
    assert remote.drop_columns(["tm"]).to_pylist() == local.drop_columns(["tm"]).to_pylist()
    assert remote.column("tm").to_pylist() == ["03:04:05"]
    assert str(remote.schema.field("local").type) == "timestamp[ms, tz=+02:00]"
    assert remote.schema.field("s").type.names == ["z", "a"]
