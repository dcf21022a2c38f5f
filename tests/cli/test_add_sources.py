"""``odfd add`` from standard input and http(s) URLs, and ``add --replace``: each case checks the
message, the exit code and, where nothing should change, that the workspace on disk did not."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from odfd.cli import manifest_source
from tests.cli.helpers import MANIFESTS, fingerprint, run

MQTT = MANIFESTS / "root-mqtt-legacy.yaml"


def _ids(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, str]:
    code, out, err = run(capsys, "list", "--root", str(root), "-o", "json")
    assert code == 0, err
    return {row["alias"]: row["id"] for row in json.loads(out)}


def _renamed_manifest(name: str) -> bytes:
    return MQTT.read_bytes().replace(b"name: test.root.mqtt", f"name: {name}".encode())


def test_add_replace_deletes_and_adds_again_after_asking(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(workspace_root)
    before = fingerprint(workspace_root)
    old_id = _ids(capsys, workspace_root)["test.root.mqtt"]

    code, _, err = run(capsys, "add", "--root", root, str(MQTT))
    assert code == 0 and "Skipped: test.root.mqtt: already exists" in err
    code, _, err = run(capsys, "add", "--root", root, "--replace", str(MQTT))
    assert code == 1
    assert "Replace 1 dataset(s): test.root.mqtt? — not confirmed: pass -y" in err
    assert fingerprint(workspace_root) == before

    code, _, err = run(capsys, "add", "--root", root, "--replace", "-y", str(MQTT))
    assert code == 0, err
    assert f"Deleted: test.root.mqtt ({old_id})" in err and "Added: test.root.mqtt (" in err
    ids = _ids(capsys, workspace_root)
    assert ids["test.root.mqtt"] != old_id and len(ids) == 11

    # --replace of a name that does not exist yet simply adds it
    new = tmp_path / "new.yaml"
    new.write_bytes(_renamed_manifest("test.root.fresh"))
    code, _, err = run(capsys, "add", "--root", root, "--replace", str(new))
    assert code == 0 and "Added: test.root.fresh" in err and "Deleted" not in err


def test_add_replace_refuses_a_dataset_another_reads(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(workspace_root)
    url_csv = MANIFESTS / "root-url-csv.yaml"
    code, _, err = run(
        capsys, "add", "--root", str(workspace_root), "--replace", "-y", str(url_csv)
    )
    assert code == 1
    assert (
        "cannot replace test.root.url-csv: it is an input of test.deriv.joined, "
        "test.deriv.summary (replace or delete those too); nothing was changed"
    ) in err
    assert fingerprint(workspace_root) == before

    # a replacement reading a dataset that does not exist is refused before anything is deleted
    derivatives = MANIFESTS / "derivatives.yaml"
    broken = tmp_path / "broken.yaml"
    broken.write_bytes(
        derivatives.read_bytes().replace(
            b"datasetRef: test.root.url-csv", b"datasetRef: test.root.nowhere", 1
        )
    )
    code, _, err = run(capsys, "add", "--root", str(workspace_root), "--replace", "-y", str(broken))
    assert code == 1
    assert err.strip() == (
        "error: cannot replace test.deriv.joined: its input test.root.nowhere is neither in the "
        "workspace nor in the manifests; nothing was changed"
    )
    assert fingerprint(workspace_root) == before

    # replacing the readers in the same batch is allowed
    code, _, err = run(
        capsys,
        "add",
        "--root",
        str(workspace_root),
        "--replace",
        "-y",
        str(url_csv),
        str(MANIFESTS / "derivatives.yaml"),
    )
    assert code == 0, err
    assert err.count("Deleted: ") == 3 and err.count("Added: ") == 3


def test_add_replace_creates_the_new_datasets_before_deleting_the_old(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A manifest that fails only when its dataset is created (here a transform on a root,
    found by the workspace's checks) leaves every old dataset as it was, even those of the batch
    already staged before it."""

    def datasets() -> dict[str, str]:
        return {
            path: digest
            for path, digest in fingerprint(workspace_root).items()
            if path.startswith(("datasets/", "keys/"))
        }

    ids_before = _ids(capsys, workspace_root)
    files_before = datasets()
    broken = tmp_path / "derivatives.yaml"
    broken.write_bytes(
        (MANIFESTS / "derivatives.yaml")
        .read_bytes()
        .replace(
            b"name: test.deriv.joined\n  kind: Derivative", b"name: test.deriv.joined\n  kind: Root"
        )
    )
    url_csv = MANIFESTS / "root-url-csv.yaml"
    code, _, err = run(
        capsys, "add", "--root", str(workspace_root), "--replace", "-y", str(url_csv), str(broken)
    )
    assert code == 1
    assert err.strip() == (
        "error: cannot replace test.deriv.joined: dataset test.deriv.joined: metadata[0] "
        "(SetTransform): only allowed on derivative datasets; nothing was changed"
    )
    assert _ids(capsys, workspace_root) == ids_before
    assert datasets() == files_before

    code, _, err = run(
        capsys,
        "add",
        "--root",
        str(workspace_root),
        "--replace",
        "-y",
        str(url_csv),
        str(MANIFESTS / "derivatives.yaml"),
    )
    assert code == 0, err
    ids_after = _ids(capsys, workspace_root)
    assert sorted(ids_after) == sorted(ids_before)
    replaced = ["test.root.url-csv", "test.deriv.joined", "test.deriv.summary"]
    assert all(ids_after[name] != ids_before[name] for name in replaced)
    assert "replacing" not in " ".join(ids_after)


def test_add_stdin(
    workspace_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(workspace_root)
    before = fingerprint(workspace_root)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"# nothing here\n")))
    code, _, err = run(capsys, "add", "--root", root, "--stdin")
    assert code == 1
    assert err.strip() == "error: <stdin>: holds no DatasetSnapshot (it is empty or only comments)"
    assert fingerprint(workspace_root) == before

    code, _, err = run(capsys, "add", "--root", root)
    assert code == 1 and "name manifest files, folders or URLs, or pass --stdin" in err

    monkeypatch.setattr(
        "sys.stdin", io.TextIOWrapper(io.BytesIO(_renamed_manifest("test.root.piped")))
    )
    code, _, err = run(capsys, "add", "--root", root, "--stdin")
    assert code == 0 and "Added: test.root.piped (did:odf:" in err
    assert "test.root.piped" in _ids(capsys, workspace_root)


@pytest.fixture
def manifest_server() -> Iterator[str]:
    """A real aiohttp server on loopback, in its own thread and event loop (``odfd add`` runs
    its own loop with ``asyncio.run``)."""

    async def manifest(_: web.Request) -> web.Response:
        return web.Response(body=_renamed_manifest("test.root.fetched"))

    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # chunked: no Content-Length to refuse it early
        await response.prepare(request)
        for _n in range(40):
            await response.write(b"#" * 65536 + b"\n")
        return response

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    app = web.Application()
    app.router.add_get("/snapshot.yaml", manifest)
    app.router.add_get("/huge.yaml", huge)
    app.router.add_get("/slow.yaml", slow)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def test_add_from_a_url(
    workspace_root: Path,
    manifest_server: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = str(workspace_root)
    before = fingerprint(workspace_root)
    failures = {
        "/missing.yaml": "HTTP 404 Not Found",
        "/huge.yaml": "larger than 1024 KiB, too large for a manifest",
    }
    for path, reason in failures.items():
        code, _, err = run(capsys, "add", "--root", root, manifest_server + path)
        assert code == 1
        assert err.strip() == f"error: cannot fetch {manifest_server}{path}: {reason}"
    monkeypatch.setattr(manifest_source, "FETCH_TIMEOUT_SECONDS", 0.5)
    code, _, err = run(capsys, "add", "--root", root, manifest_server + "/slow.yaml")
    assert code == 1 and err.strip().endswith("slow.yaml: no answer within 0.5 s")
    # a URL and a missing file in one batch: the batch adds nothing
    code, _, err = run(
        capsys, "add", "--root", root, manifest_server + "/snapshot.yaml", "/nonexistent.yaml"
    )
    assert code == 1 and "cannot read /nonexistent.yaml: No such file or directory" in err
    assert fingerprint(workspace_root) == before

    code, _, err = run(capsys, "add", "--root", root, manifest_server + "/snapshot.yaml")
    assert code == 0 and "Added: test.root.fetched (did:odf:" in err
    assert "test.root.fetched" in _ids(capsys, workspace_root)


def test_add_from_an_unreachable_url(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(workspace_root)
    code, _, err = run(capsys, "add", "--root", str(workspace_root), "http://127.0.0.1:9/x.yaml")
    assert code == 1
    assert err.strip() == (
        "error: cannot fetch http://127.0.0.1:9/x.yaml: cannot reach 127.0.0.1:9 "
        "(connection refused)"
    )
    assert fingerprint(workspace_root) == before


def test_add_from_https_to_a_plain_http_server_is_named_as_tls(
    workspace_root: Path, manifest_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = manifest_server.replace("http://", "https://") + "/snapshot.yaml"
    before = fingerprint(workspace_root)
    code, _, err = run(capsys, "add", "--root", str(workspace_root), url)
    assert code == 1
    assert err.startswith(f"error: cannot fetch {url}: cannot reach 127.0.0.1:"), err
    assert "TLS failed" in err and "answers plain HTTP there: use an http:// URL" in err
    assert "ssl:default" not in err and len(err.strip().splitlines()) == 1
    assert fingerprint(workspace_root) == before


def test_add_warns_of_each_secret_a_manifest_holds_in_the_clear(
    empty_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fetch step is kept in the dataset's chain as written: a literal credential there is
    named before the dataset is added (a ``${{ env.NAME }}`` template is not)."""
    url = (MANIFESTS / "root-url-csv.yaml").read_text()
    leaky = tmp_path / "leaky"
    leaky.mkdir()
    (leaky / "url.yaml").write_text(
        url.replace("Bearer ${{ env.TOKEN }}", "Bearer abc123").replace(
            "cases.csv.gz", "cases.csv.gz?access_token=xyz&page=2"
        )
    )
    (leaky / "mqtt.yaml").write_text(
        MQTT.read_text().replace("${{ env.MQTT_PASSWORD }}", "hunter2")
    )
    (leaky / "container.yaml").write_bytes((MANIFESTS / "root-container-parquet.yaml").read_bytes())
    code, _, err = run(capsys, "add", "--root", str(empty_root), str(leaky))
    assert code == 0, err
    warnings = sorted(line for line in err.splitlines() if line.startswith("warning: "))
    advice = (
        " is a literal secret: it would be in the dataset's metadata, which every copy of the "
        "dataset keeps for good; write it as a ${{ env.NAME }} template, set when pulling"
    )
    assert warnings == [
        "warning: test.root.container: SetPollingSource.fetch.env[API_KEY]" + advice,
        "warning: test.root.mqtt: SetPollingSource.fetch.password" + advice,
        "warning: test.root.url-csv: SetPollingSource.fetch.headers[Authorization]" + advice,
        "warning: test.root.url-csv: SetPollingSource.fetch.url (query parameter access_token)"
        + advice,
    ]
    assert "abc123" not in err and "hunter2" not in err and "xyz" not in err
    assert err.count("Added: ") == 3

    templated = tmp_path / "templated"
    templated.mkdir()
    for name in ("root-url-csv.yaml", "root-mqtt-legacy.yaml", "root-ethereum.yaml"):
        (templated / name).write_bytes((MANIFESTS / name).read_bytes())
    other = tmp_path / "other"
    assert run(capsys, "init", "--root", str(other))[0] == 0
    code, _, err = run(capsys, "add", "--root", str(other), str(templated))
    assert (code, err.count("Added: "), "warning" in err) == (0, 3, False), err
