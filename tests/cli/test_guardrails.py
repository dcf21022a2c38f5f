"""What a new user runs into on day one (issue "the everyday CLI"): every case answers with one
line naming the problem and the fix, the documented exit code, and leaves the disk as it was."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest

from odfd.config import unknown_environment
from protocol.model import SetInfo, Timestamp
from storage.errors import RefCasError
from storage.workspace import Workspace
from tests.cli.helpers import MANIFESTS, fingerprint, run
from verifier.engine.spark.session import _start_failure
from verifier.engine.spark.settings import SparkSettings


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- silent wrong answers -------------------------------------------------------------------------


def test_tail_with_a_negative_count_is_an_argument_error(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(workspace_root)
    code, out, err = run(
        capsys, "tail", "--root", str(workspace_root), "-n", "-5", "test.root.mqtt"
    )
    assert code == 2 and out == ""
    assert "argument -n/--num-records: must be at least 1, got -5" in err
    assert fingerprint(workspace_root) == before


def test_tail_of_a_dataset_without_data_is_its_count_not_an_empty_frame(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "tail", "--root", str(workspace_root), "test.root.mqtt")
    assert (code, out) == (0, "0 rows\n")  # no schema yet: no columns to frame
    code, out, _ = run(
        capsys, "tail", "--root", str(workspace_root), "test.root.mqtt", "-o", "json"
    )
    assert (code, out) == (0, "[]\n")


def test_log_filter_with_an_unknown_kind_is_an_argument_error(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "log", "--root", str(workspace_root), "--filter", "Bogus", "test.root.mqtt"
    )
    assert code == 2 and out == ""
    assert "unknown event kind 'Bogus'" in err and "AddData" in err and "watermark" in err
    code, _, err = run(capsys, "log", "--root", str(workspace_root), "--limit", "0", "x")
    assert code == 2 and "--limit: must be at least 1, got 0" in err


def test_tail_of_a_dataset_deleted_by_hand_says_so(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "list", "--root", str(workspace_root), "-o", "json")
    dataset_id = {r["alias"]: r["id"] for r in json.loads(out)}["test.root.mqtt"]
    shutil.rmtree(workspace_root / "datasets" / dataset_id.removeprefix("did:odf:"))
    before = fingerprint(workspace_root)
    code, out, err = run(capsys, "tail", "--root", str(workspace_root), "test.root.mqtt")
    assert code == 1 and out == ""
    line = _one_line(err)
    assert line.startswith("error: dataset test.root.mqtt: its folder ")
    assert "is missing" in line and "run `odfd repair`" in line
    assert fingerprint(workspace_root) == before
    # what the message points to works: repair drops the dataset, tail then says it is unknown
    assert run(capsys, "repair", "--root", str(workspace_root))[0] == 0
    code, _, err = run(capsys, "tail", "--root", str(workspace_root), "test.root.mqtt")
    assert code == 1 and "is not in the workspace" in err


def test_misspelled_environment_variables_are_warned_about(
    workspace_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_SERVR_PORT", "9000")
    monkeypatch.setenv("ODFD_SPARK_DRIVER_MEMORY", "2g")  # known: no warning
    code, out, err = run(capsys, "list", "--root", str(workspace_root))
    assert code == 0 and "test.root.mqtt" in out
    assert _one_line(err) == (
        "warning: ignoring unknown environment variable ODFD_SERVR_PORT "
        "(did you mean ODFD_SERVER_PORT?)"
    )
    read_elsewhere = ("ODFD_HOME", "ODFD_TOKEN", "ODFD_VERBOSE", "ODFD_CRASH_AT", "ODFD_NO_DAEMON")
    assert unknown_environment({name: "1" for name in read_elsewhere} | {"PATH": "/"}) == []


def test_list_refuses_a_broken_config(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open(workspace_root / "config.toml", "a") as config:
        config.write("[servr]\nport = 1\n")
    before = fingerprint(workspace_root)
    code, out, err = run(capsys, "list", "--root", str(workspace_root))
    assert code == 1 and out == ""
    line = _one_line(err)
    assert line.startswith(f"error: {workspace_root / 'config.toml'}: unknown section(s) [servr]")
    assert fingerprint(workspace_root) == before


@pytest.mark.parametrize(
    ("workspace", "message"),
    [
        ("version = 2", "[workspace] version 2: this odfd reads workspaces of version 1"),
        ('version = "1"', "[workspace] version '1': this odfd reads workspaces of version 1"),
        ("version = 1\nverison = 2", "[workspace] unknown key(s) verison; known: version"),
    ],
)
def test_a_workspace_of_another_version_is_refused_not_misread(
    workspace: str, message: str, workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = workspace_root / "config.toml"
    config.write_text(
        config.read_text().replace("[workspace]\nversion = 1\n", f"[workspace]\n{workspace}\n")
    )
    assert workspace in config.read_text()
    code, out, err = run(capsys, "list", "--root", str(workspace_root))
    assert (code, out) == (1, "")
    assert _one_line(err) == f"error: {config}: {message}"


def test_an_empty_manifest_is_refused(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    folder = tmp_path / "none"
    folder.mkdir()
    (folder / "notes.yaml").write_text("just: notes\n")
    before = fingerprint(workspace_root)
    code, _, err = run(capsys, "add", "--root", str(workspace_root), str(empty))
    assert code == 1 and _one_line(err) == (
        f"error: {empty}: holds no DatasetSnapshot (it is empty or only comments)"
    )
    code, _, err = run(capsys, "add", "--root", str(workspace_root), str(folder))
    assert code == 1 and _one_line(err) == (
        f"error: {folder}: no *.yaml file in it holds a DatasetSnapshot"
    )
    assert fingerprint(workspace_root) == before


# --- ordinary OS errors ---------------------------------------------------------------------------


def test_init_on_a_file_or_below_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "file"
    file.write_text("keep me")
    code, _, err = run(capsys, "init", "--root", str(file))
    assert code == 1 and _one_line(err) == (
        f"error: cannot create a workspace at {file}: it is a file (pick another folder with --root DIR)"
    )
    code, _, err = run(capsys, "init", "--root", str(file / "ws"))
    line = _one_line(err)
    assert code == 1 and line.startswith(f"error: cannot create a workspace at {file / 'ws'}: ")
    assert "Not a directory" in line and "--root DIR" in line
    assert file.read_text() == "keep me" and sorted(tmp_path.iterdir()) == [file]


def test_a_corrupt_catalog_is_named_with_the_fix(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = workspace_root / "catalog.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{catalog}{suffix}").unlink(missing_ok=True)
    catalog.write_bytes(b"this is not a database" * 100)
    before = fingerprint(workspace_root)
    code, out, err = run(capsys, "list", "--root", str(workspace_root))
    assert code == 1 and out == ""
    assert _one_line(err) == (
        f"error: the catalog {catalog} is unreadable (file is not a database); "
        "run `odfd repair` to rebuild it from the dataset folders"
    )
    assert fingerprint(workspace_root) == before
    code, out, _ = run(capsys, "repair", "--root", str(workspace_root))
    assert code == 0 and out.count("Registered: ") == 11


def test_serve_on_a_busy_port(workspace_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run(capsys, "serve", "--root", str(workspace_root), "--port", str(port))
    assert code == 1
    assert _one_line(err) == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another process listens there; stop it or pick another --port)"
    )


def test_push_to_a_folder_that_cannot_be_written(
    workspace_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder would go")
    before = fingerprint(workspace_root)
    code, _, err = run(
        capsys,
        "push",
        "--root",
        str(workspace_root),
        "test.root.mqtt",
        f"file://{blocker}/remote",
    )
    line = _one_line(err)
    assert code == 1 and line.startswith(f"error: {blocker}")
    assert "Not a directory (a part of the path is a file, not a folder)" in line
    assert fingerprint(workspace_root) == before and blocker.read_text().startswith("a file")


# --- misleading messages --------------------------------------------------------------------------


def test_bad_spark_settings_are_named_before_any_jvm_starts(
    workspace_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_SPARK_DRIVER_MEMORY", "lots")
    code, _, err = run(capsys, "sql", "--root", str(workspace_root), "SELECT 1")
    assert code == 1 and _one_line(err) == (
        "error: environment variable ODFD_SPARK_DRIVER_MEMORY: config [spark].driver_memory: "
        "'lots' is not a memory size (a number with an optional unit: 512m, 2g, 4gb)"
    )
    monkeypatch.delenv("ODFD_SPARK_DRIVER_MEMORY")
    with open(workspace_root / "config.toml", "a") as config:
        config.write('[spark]\nmaster = "sprak://host:7077"\n')
    code, _, err = run(capsys, "sql", "--root", str(workspace_root), "SELECT 1")
    assert (
        code == 1 and "config [spark].master: 'sprak://host:7077' is not a Spark master URL" in err
    )
    assert "Java 17" not in err
    for good in ("local", "local[*]", "local[4]", "local[4,2]", "spark://h:7077", "yarn"):
        SparkSettings(master=good, driver_memory="512m").validate()


def test_a_failed_spark_start_blames_java_only_when_there_is_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = SparkSettings(master="local[2]", driver_memory="64g")
    failure = RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited\nstack...")
    log = tmp_path / "spark.log"
    message = _start_failure(settings, failure, log)
    assert "Java 17" not in message and "check the [spark] settings" in message
    assert message.endswith(f"the JVM's own messages are in {log}")
    assert message.startswith("could not start Spark (master local[2], driver_memory 64g): ")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java anywhere
    assert _start_failure(settings, failure, log).endswith(
        "odfd needs Java 17 on PATH or JAVA_HOME"
    )


async def test_the_loser_of_a_race_for_the_head_is_told_to_retry(workspace: Workspace) -> None:
    snapshot = (MANIFESTS / "root-ethereum.yaml").read_bytes()
    from protocol.codec import yaml as odf_yaml

    await workspace.create_from_snapshot(odf_yaml.load_snapshot(snapshot, source="manifest"))
    record = (await workspace.list_datasets())[0]
    winner = workspace.open_dataset(record.id)
    loser = workspace.open_dataset(record.id)
    old_head = await loser.chain.head()
    await winner.commit_event(SetInfo(description="won"), expected_head=old_head)
    new_head = await winner.chain.head()
    with pytest.raises(RefCasError) as caught:
        await loser.commit_event(
            SetInfo(description="lost"), expected_head=old_head, system_time=Timestamp.now()
        )
    message = str(caught.value)
    assert "another write won" in message and "run it again" in message
    assert "moved concurrently" not in message
    assert await loser.chain.head() == new_head


# --- guardrails -----------------------------------------------------------------------------------


def _aliases(capsys: pytest.CaptureFixture[str], root: Path) -> set[str]:
    _, out, _ = run(capsys, "list", "--root", str(root), "-o", "json")
    return {row["alias"] for row in json.loads(out)}


def test_delete_checks_every_name_and_dependency_first(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(workspace_root)
    before = fingerprint(workspace_root)
    code, _, err = run(capsys, "delete", "--root", root, "-y", "test.root.mqtt", "nosuch")
    assert code == 1 and _one_line(err) == (
        f"error: no dataset nosuch in the workspace {workspace_root}; nothing was deleted"
    )
    code, _, err = run(capsys, "delete", "--root", root, "-y", "test.root.url-csv")
    assert code == 1 and _one_line(err) == (
        "error: dataset test.root.url-csv is an input of test.deriv.joined, test.deriv.summary "
        "(delete those too with --recursive); nothing was deleted"
    )
    # without a terminal to ask on, a delete needs -y
    code, _, err = run(capsys, "delete", "--root", root, "test.root.mqtt")
    assert code == 1 and "not confirmed: pass -y" in _one_line(err)
    assert fingerprint(workspace_root) == before

    code, _, err = run(capsys, "delete", "--root", root, "-y", "-r", "test.root.url-csv")
    assert code == 0
    deleted = [line.split()[1] for line in err.splitlines()]
    assert set(deleted) == {"test.root.url-csv", "test.deriv.joined", "test.deriv.summary"}
    assert deleted[-1] == "test.root.url-csv"  # readers go first
    assert len(_aliases(capsys, workspace_root)) == 8
    assert run(capsys, "delete", "--root", root, "-y", "--all")[0] == 0
    assert _aliases(capsys, workspace_root) == set()
    assert list((workspace_root / "datasets").iterdir()) == []


def test_system_gc_removes_only_old_leftovers(
    workspace_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(workspace_root)
    _, out, _ = run(capsys, "list", "--root", root, "-o", "json")
    folder = workspace_root / "datasets" / json.loads(out)[0]["id"].removeprefix("did:odf:")
    old = Timestamp.of(2020, 1, 1).to_datetime().timestamp()
    leftovers = {
        workspace_root / "run" / "0123abcd": None,  # an empty transaction folder after a kill
        workspace_root / "run" / "stdin-x1": b"copied stdin",
        folder / "data" / ("f1620" + "ab" * 32): b"a slice the lost race wrote",
        folder / "blocks" / ".pending-0011": b"half a block",
    }
    fresh = workspace_root / "run" / "in-use"
    for path, content in leftovers.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if content is None else path.write_bytes(content)
        os.utime(path, (old, old))
    fresh.mkdir()
    kept = fingerprint(workspace_root / "datasets")
    for path in leftovers:
        if path.is_relative_to(workspace_root / "datasets"):
            kept.pop(str(path.relative_to(workspace_root / "datasets")))

    code, out, err = run(capsys, "system", "gc", "--root", root, "--dry-run", "-o", "json")
    assert code == 0 and "Would remove 4 leftover(s)" in err
    listed = {row["path"]: row["kind"] for row in json.loads(out)}
    assert listed == {
        str(workspace_root / "run" / "0123abcd"): "run scratch",
        str(workspace_root / "run" / "stdin-x1"): "run scratch",
        str(folder / "data" / ("f1620" + "ab" * 32)): "unreferenced data file",
        str(folder / "blocks" / ".pending-0011"): "unfinished write",
    }
    assert all(path.exists() for path in leftovers)

    code, out, err = run(capsys, "system", "gc", "--root", root)
    assert code == 0 and "Removed 4 leftover(s)" in err
    assert not any(path.exists() for path in leftovers) and fresh.is_dir()
    assert fingerprint(workspace_root / "datasets") == kept
    assert run(capsys, "verify", "--root", root, "--integrity-only", "test.root.url-csv")[0] == 0


# --- workspace discovery --------------------------------------------------------------------------


def test_the_nearest_enclosing_workspace_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ODFD_HOME", raising=False)
    project = tmp_path / "project"
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(project)
    assert run(capsys, "init")[0] == 0
    assert run(capsys, "add", str(MANIFESTS / "root-ethereum.yaml"))[0] == 0
    monkeypatch.chdir(deep)
    code, out, _ = run(capsys, "list")
    assert code == 0 and "test.root.ethereum" in out
    monkeypatch.chdir(project / ".odfd" / "datasets")
    assert "test.root.ethereum" in run(capsys, "list")[1]
    monkeypatch.chdir(deep)
    code, _, err = run(capsys, "init")
    assert code == 1 and _one_line(err) == (
        f"error: {deep} is inside the odfd workspace {project / '.odfd'}, which odfd commands "
        "use from here; pass --root DIR to create a separate one"
    )
    assert not (deep / ".odfd").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run(capsys, "list")
    assert code == 1 and _one_line(err) == (
        f"error: no odfd workspace in {elsewhere} or any folder above it (run `odfd init` to "
        "create one here, or pass --root DIR / set ODFD_HOME)"
    )


# --- argument errors before any engine ------------------------------------------------------------


def test_sql_argument_errors_come_before_the_workspace_and_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = str(tmp_path / "no-workspace")  # reaching the workspace would be another error
    code, _, err = run(capsys, "sql", "--root", nowhere, "-o", "parquet", "SELECT 1")
    assert code == 2 and _one_line(err) == (
        "error: --output-format parquet needs --output-path FILE"
    )
    code, _, err = run(capsys, "sql", "--root", nowhere, "-c", "SELECT 1", "SELECT 2")
    assert code == 2 and "give one of QUERY, -c QUERY and --script FILE" in err
    script = tmp_path / "empty.sql"
    script.write_text("-- nothing here\n;\n")
    code, _, err = run(capsys, "sql", "--root", nowhere, "--script", str(script))
    assert code == 2 and _one_line(err) == f"error: {script}: holds no SQL statement"
    code, _, err = run(capsys, "tail", "--root", nowhere, "-o", "parquet", "x")
    assert code == 2 and "needs --output-path FILE" in err
