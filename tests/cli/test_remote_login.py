"""``odfd login`` / ``odfd logout`` against a second, real ``odfd serve``: the token is kept per
node in a 0600 store, never printed, sent by push, pull and search to that node only, and
forgotten on logout (the push is then refused again)."""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import os
import pty
import select
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.app.accounts import add_account, set_password
from odfd.app.login_store import tokens_by_url
from odfd.app.node import open_node
from odfd.config import ServerConfig
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import node_url, parse_remote
from protocol.identity import DatasetAliasPattern
from tests.cli.helpers import MANIFESTS, odfd_serve, run
from tests.cli.test_sql_proof import serving, workspace_with_nums

ADMIN_PASSWORD = "a long admin passphrase"
ALICE_PASSWORD = "alice's own passphrase"
ROLE_PASSWORD = "a passphrase of a role's holder"
DATASET = "test.root.url-csv"
READ_TOKEN = "a-read-token-of-the-served-node"


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """Node B, served by ``odfd serve`` in a subprocess, with an admin password and a
    non-admin account; no ``[server] push_tokens``."""
    root = tmp_path_factory.mktemp("remote") / "node-b"
    subprocess.run([sys.executable, "-m", "odfd.cli.main", "-q", "init", "--root", str(root)])

    async def prepare() -> None:
        async with await open_node(root) as node:
            await set_password(node, "admin", ADMIN_PASSWORD)
            await add_account(node, "alice", password=ALICE_PASSWORD)
            for name in ("maint", "ed"):
                await add_account(node, name, password=ROLE_PASSWORD)

    asyncio.run(prepare())
    with odfd_serve(root) as (url, _):
        yield root, url


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Node A with one dataset; the user's store in a folder of the test's own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "node-a"
    subprocess.run([sys.executable, "-m", "odfd.cli.main", "-q", "init", "--root", str(root)])
    subprocess.run(
        [sys.executable, "-m", "odfd.cli.main", "-q", "add", "--root", str(root)]
        + [str(MANIFESTS / "root-url-csv.yaml")]
    )
    return root


def _login(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    url: str,
    name: str,
    password: str,
    *extra: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(password + "\n"))
    return run(
        capsys, "login", url, "--root", str(root), "--user", name, "--password-stdin", *extra
    )


def _push(capsys: pytest.CaptureFixture[str], root: Path, url: str, *extra: str) -> tuple[int, str]:
    """``odfd push DATASET URL`` from ``root``: exit code and stderr."""
    code, _, err = run(capsys, "push", DATASET, url, "--root", str(root), *extra)
    return code, err


def _refused_without_login(
    capsys: pytest.CaptureFixture[str], root: Path, url: str, *extra: str
) -> bool:
    """No login kept for the node: ``--check`` says so and a push is refused for want of a
    token."""
    code, err = _push(capsys, root, url + DATASET, *extra)
    checked, _, said = run(capsys, "login", url, "--check", "--root", str(root))
    return code != 0 and "token" in err and checked != 0 and "not logged in" in said


def test_login_then_push_and_pull_with_the_kept_token_and_logout_forgets_it(
    remote: tuple[Path, str],
    local: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, url = remote
    ws = ("--root", str(local))
    monkeypatch.delenv("ODFD_TOKEN", raising=False)
    assert _refused_without_login(capsys, local, url)

    code, out, err = _login(capsys, monkeypatch, local, url, "admin", "wrong password")
    assert code != 0 and "invalid login or password" in err
    assert "wrong password" not in out + err
    assert not (local / "logins.json").exists()

    code, out, err = _login(capsys, monkeypatch, local, url, "admin", ADMIN_PASSWORD)
    assert code == 0, err
    assert f"admin at {node_url(url)}" in err
    store = local / "logins.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    token = tokens_by_url(local)[node_url(url)]
    assert token.startswith("odfd_") and token not in out + err
    assert ADMIN_PASSWORD not in store.read_text()

    code, out, err = run(capsys, "login", url, "--check", *ws)
    assert code == 0 and out.startswith(f"admin at {node_url(url)}") and token not in out

    code, err = _push(capsys, local, url + DATASET)
    assert code == 0, err
    code, out, err = run(capsys, "log", DATASET, "--who", "--root", str(remote[0]))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 6 and all("[admin by push via http, " in line for line in lines)
    trail = json.loads(
        run(capsys, "log", DATASET, "--writes", "-o", "json", "--root", str(remote[0]))[1]
    )
    assert [(w["action"], w["account"], w["via"]) for w in trail] == [("push", "admin", "http")]
    assert trail[0]["oldHead"] is None and trail[0]["newHead"].endswith(lines[0].split()[3])

    other = tmp_path / "node-c"
    assert run(capsys, "-q", "init", "--root", str(other))[0] == 0
    (other / "logins.json").write_bytes(store.read_bytes())
    code, _, err = run(capsys, "pull", url + DATASET, "--as", "copy", "--root", str(other))
    assert code == 0, err
    assert "copy" in run(capsys, "list", "--root", str(other))[1]

    code, _, err = run(capsys, "logout", url, *ws)
    assert code == 0 and "Logged out: admin" in err
    assert not store.exists()
    assert _refused_without_login(capsys, local, url, "--force")


FORCED = "rewritten"
ROLES = f"""\
$schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
headers:
  name: rewriters
spec:
  relations:
    - {{subject: 'Account:maint', relation: role, value: maintainer, object: 'Dataset:{FORCED}'}}
    - {{subject: 'Account:ed', relation: role, value: editor, object: 'Dataset:{FORCED}'}}
"""


def test_a_forced_push_needs_the_maintainer_role(
    remote: tuple[Path, str],
    local: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``odfd push --force`` that moves a served dataset's head back: an editor is refused and
    the head stays; a maintainer rewrites it."""
    remote_root, url = remote
    target = url + FORCED
    (tmp_path / "roles.yaml").write_text(ROLES)
    code, _, err = run(
        capsys, "apply", "-f", str(tmp_path / "roles.yaml"), "--root", str(remote_root)
    )
    assert code == 0, err
    assert _login(capsys, monkeypatch, local, url, "admin", ADMIN_PASSWORD)[0] == 0
    assert _push(capsys, local, target)[0] == 0
    blocks = json.loads(run(capsys, "log", DATASET, "-o", "json", "--root", str(local))[1])
    served_head = _head(target)
    assert served_head == blocks[0]["hash"]
    # Back one block here: the served history is now ahead, and only a forced push rewinds it.
    assert run(capsys, "-y", "reset", DATASET, blocks[1]["hash"], "--root", str(local))[0] == 0
    for name in ("ed", "maint"):
        assert run(capsys, "logout", url, "--root", str(local))[0] == 0
        assert _login(capsys, monkeypatch, local, url, name, ROLE_PASSWORD)[0] == 0
        code, err = _push(capsys, local, target, "--force")
        if name == "ed":
            # Refused inside Smart Transfer (the force flag comes after the upgrade: no 403).
            assert code != 0 and "forced push needs maintainer role" in err, err
            assert _head(target) == served_head
        else:
            assert code == 0, err
            assert _head(target) == blocks[1]["hash"]
    assert run(capsys, "logout", url, "--root", str(local))[0] == 0


def _head(dataset_url: str) -> str:
    with urllib.request.urlopen(dataset_url + "/refs/head", timeout=30) as response:
        return response.read().decode().strip()


def test_a_token_login_is_checked_and_kept_in_the_user_store(
    remote: tuple[Path, str],
    local: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, url = remote
    code, _, err = _login(capsys, monkeypatch, local, url, "alice", ALICE_PASSWORD, "--global")
    assert code == 0, err
    user_store = tmp_path / "xdg" / "odfd" / "logins.json"
    assert stat.S_IMODE(user_store.stat().st_mode) == 0o600
    assert not (local / "logins.json").exists()
    token = tokens_by_url(local)[node_url(url)]

    monkeypatch.setattr(sys, "stdin", io.StringIO(token + "\n"))
    code, _, err = run(capsys, "login", url, "--token-stdin", "--root", str(local))
    assert code == 0 and "alice" in err and token not in err
    code, out, _ = run(capsys, "login", "--list", "--root", str(local))
    assert code == 0 and out.count("alice") == 2 and token not in out

    monkeypatch.setattr(sys, "stdin", io.StringIO("odfd_not-a-token\n"))
    code, _, err = run(capsys, "login", url, "--token-stdin", "--root", str(local))
    assert code != 0 and "invalid, expired or revoked" in err and "not-a-token" not in err

    code, _, err = run(capsys, "logout", "--all", "--root", str(local))
    assert code == 0 and err.count("Logged out") == 2
    assert not user_store.exists()


def test_a_kept_token_goes_to_its_own_node_only() -> None:
    settings = TransportSettings(tokens={node_url("HTTP://Node.Example:8080"): "t-8080"})
    assert parse_remote("http://node.example:8080/a/ds", settings).token == "t-8080"  # type: ignore[attr-defined]
    assert parse_remote("odf+http://node.example:8080/ds", settings).token == "t-8080"  # type: ignore[attr-defined]
    assert parse_remote("http://node.example:80/ds", settings).token is None  # type: ignore[attr-defined]
    assert parse_remote("http://node.example:8080.evil/ds", settings).token is None  # type: ignore[attr-defined]
    assert parse_remote("https://node.example:8080/ds", settings).token is None  # type: ignore[attr-defined]
    given = parse_remote("http://node.example:8080/ds", settings, token="explicit")
    assert given.token == "explicit"  # type: ignore[attr-defined]


def test_sql_remote_search_and_pull_send_the_kept_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private dataset answers ``odfd sql --remote``, is found by ``odfd search`` and can be
    pulled only while a login with a read token of that node is kept."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    served = tmp_path / "served"
    asyncio.run(workspace_with_nums(served))
    client = tmp_path / "client"
    assert run(capsys, "-q", "init", "--root", str(client))[0] == 0
    config = ServerConfig(
        address="127.0.0.1",
        port=0,
        private=(DatasetAliasPattern.parse("nums"),),
        read_tokens=frozenset({READ_TOKEN}),
    )
    query = ("sql", "-c", "SELECT value FROM nums ORDER BY value", "-o", "json")
    search = ("search", "num", "--repo", "b", "-o", "json", "--root", str(client))
    with serving(served, config) as url:
        assert run(capsys, "repo", "add", "b", url, "--root", str(client))[0] == 0
        code, _, err = run(capsys, *query, "--remote", url, "--root", str(client))
        assert code != 0 and "nums" in err
        assert json.loads(run(capsys, *search)[1]) == []
        pull = ("pull", url + "nums", "--as", "copy", "--root", str(client))
        code, _, err = run(capsys, *pull)
        assert code != 0 and "nums" in err
        monkeypatch.setattr(sys, "stdin", io.StringIO(READ_TOKEN + "\n"))
        code, _, err = run(capsys, "login", url, "--token-stdin", "--root", str(client))
        assert code == 0, err
        code, out, err = run(capsys, *query, "--remote", url, "--root", str(client))
        assert code == 0, err
        assert json.loads(out) == [{"value": 1}, {"value": 2}, {"value": 3}]
        assert [hit["alias"] for hit in json.loads(run(capsys, *search)[1])] == ["nums"]
        code, _, err = run(capsys, *pull)
        assert code == 0, err
        code, out, err = run(
            capsys,
            "sql",
            "-c",
            "SELECT sum(value) AS s FROM copy",
            "-o",
            "json",
            "--root",
            str(client),
        )
        assert code == 0 and json.loads(out) == [{"s": 6}], err
        assert run(capsys, "logout", url, "--root", str(client))[0] == 0
        code, _, err = run(capsys, *query, "--remote", url, "--root", str(client))
        assert code != 0 and "nums" in err


@pytest.mark.parametrize("url", ["ftp://node/", "node-b:8080", "file:///tmp/ws"])
def test_a_url_no_login_can_go_to_is_said_before_any_password_is_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, local: Path, url: str
) -> None:
    """Without --user and without a terminal, the name would be asked first: the URL's error
    comes before that question, and names the URL a login needs."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = run(capsys, "login", url, "--root", str(local))
    assert code == 1
    assert f"{url}: a login goes to a node's http(s):// URL, without credentials" in err
    assert "--user" not in err and "ipfs://" not in err
    code, _, err = run(capsys, "logout", url, "--root", str(local))
    assert code == 1 and "a login goes to a node's http(s):// URL" in err


def test_a_browser_login_waits_for_the_sign_in_on_the_nodes_page(
    remote: tuple[Path, str], local: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``odfd login URL --browser`` prints the node's sign-in page and polls until someone signs
    in there (here the page's form is sent as a browser sends it; the page itself is tested in
    Chromium in ``tests/query_api/test_device_login.py``); the token is then kept."""
    _, url = remote
    login = subprocess.Popen(
        [sys.executable, "-m", "odfd.cli.main", "login", url, "--browser", "--root", str(local)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert login.stderr is not None
        line = login.stderr.readline()
        assert line.startswith("Open this page in a browser and sign in there: "), line
        page = line.split(": ", 1)[1].strip()
        assert page.startswith(url + "v/login?deviceCode=")
        device_code = page.split("deviceCode=")[1]
        form = {"deviceCode": device_code, "login": "alice", "password": ALICE_PASSWORD}
        sign_in = urllib.request.Request(
            url + "v/login", data=urllib.parse.urlencode(form).encode()
        )
        with urllib.request.urlopen(sign_in, timeout=30) as reply:
            assert "Signed in as <b>alice</b>" in reply.read().decode()
        assert login.wait(timeout=60) == 0, login.stderr.read()
        assert "Logged in: alice at " + url in login.stderr.read()
    finally:
        if login.poll() is None:
            login.kill()
    code, out, err = run(capsys, "login", url, "--check", "--root", str(local))
    assert code == 0 and out.startswith(f"alice at {url} (token valid"), err


def test_a_browser_login_to_a_node_without_one_says_to_use_a_password(
    capsys: pytest.CaptureFixture[str], local: Path
) -> None:
    """A server with no device login (here Python's own file server, which takes no POST)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        code, _, err = run(capsys, "login", url, "--browser", "--root", str(local))
    finally:
        server.shutdown()
        thread.join()
    assert code == 1
    assert f"{url}: no device login there (501): log in with --user NAME instead" in err


def test_a_node_that_does_not_answer_is_said_before_the_terminal_asks_a_password(
    local: Path,
) -> None:
    """On a terminal, ``odfd login URL`` asked for the password first and only then found that
    nothing listens at URL: the same words as ``sql --remote`` now come first, no prompt."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/"  # bound, not listening: refused
        leader, follower = pty.openpty()
        login = subprocess.Popen(
            [sys.executable, "-m", "odfd.cli.main", "login", url, "--user", "alice"]
            + ["--root", str(local)],
            stdin=follower,
            stdout=follower,
            stderr=follower,
        )
        os.close(follower)
        said = b""
        deadline = time.monotonic() + 60
        while b"Password" not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the terminal's other end closed: the command ended
                    break
                if not chunk:
                    break
                said += chunk
        login.kill()
        code = login.wait()
        os.close(leader)
    text = said.decode()
    assert "Password" not in text, text
    assert code == 1, text
    assert f"cannot reach the node at {url} (connection refused)" in text
