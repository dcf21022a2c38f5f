"""No leftovers: a real ``odfd pull`` process killed with ``SIGKILL`` in the middle of a data file,
between fetching its objects and naming them, or as it renames a new dataset's folder into place
leaves nothing that the next run does not clean up or adopt by itself; ``odfd system gc``
removes what interrupted runs left."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from protocol.identity import DatasetId
from storage.chain import validate_chain
from storage.crashpoints import ENV as CRASH_AT
from storage.scratch import try_lock_folder
from storage.workspace import Workspace
from tests.replication.conftest import ServeFactory
from tests.replication.datagen import create_root, verify_integrity
from tests.replication.test_wild_peers import Peer, peer, remote_head, stray_files

__all__ = ["peer"]  # the fixture, shared with the wild-peer tests

# ``odfd`` with ``os.rename`` killing the process (SIGKILL) right after it renamed a first
# pull's staging folder into place, before anything else runs.
KILL_AT_RENAME = """
import os, signal, sys
from odfd.cli.main import main
rename = os.rename
def killing_rename(src, dst, *args, **kwargs):
    rename(src, dst, *args, **kwargs)
    if os.path.basename(os.fspath(src)).startswith(".pull-"):
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = killing_rename
sys.exit(main(sys.argv[1:]))
"""


async def run_odfd(*args: str, code: str | None = None) -> tuple[int, str]:
    returncode, _, err = await run_odfd_out(*args, code=code)
    return returncode, err


async def run_odfd_out(*args: str, code: str | None = None) -> tuple[int, str, str]:
    command = ["-c", code, *args] if code else ["-m", "odfd.cli.main", *args]
    process = await asyncio.create_subprocess_exec(
        sys.executable, *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def started() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    processes: list[asyncio.subprocess.Process] = []
    yield processes
    for process in processes:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_kill_9_in_the_middle_of_a_data_file(
    node_b: Workspace, peer: Peer, started: list[asyncio.subprocess.Process]
) -> None:
    data = sorted((peer.liar.root / "data").iterdir())[0]
    body = data.read_bytes()
    halfway = asyncio.Event()

    async def half_then_stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": str(len(body))})
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        halfway.set()
        await peer.closing.wait()
        return response

    peer.routes[f"/ds/data/{data.name}"] = half_then_stall
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "odfd.cli.main",
        "pull",
        peer.url,
        "--as",
        "copy",
        "--parallel",
        "1",
        "--min-rate",
        "0",  # wait for the stalled file until killed (a loaded machine starts slowly)
        "--first-byte-timeout",
        "300s",
        "--root",
        str(node_b.root),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    started.append(process)
    staging = node_b.layout.staging_dir
    # Served half the data file, then the pull has staged bytes (the staged files of metadata
    # blocks come and go: they are renamed once stored).
    await asyncio.wait_for(halfway.wait(), 120)
    partial: list[Path] = []
    deadline = time.monotonic() + 60
    while not partial and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        partial = _staged(staging)
    assert partial, "the pull never started writing the data file"
    await asyncio.sleep(0.2)  # the half on its way to the staged file
    process.send_signal(signal.SIGKILL)
    assert await process.wait() == -signal.SIGKILL
    # The partial file is only in the dead process's staging folder.
    assert not [p for p in node_b.layout.datasets_dir.rglob(".pending-*")]
    assert _staged(staging), "the killed pull left no staged file"

    del peer.routes[f"/ds/data/{data.name}"]
    code, err = await run_odfd("pull", peer.url, "--as", "copy", "--root", str(node_b.root))
    assert code == 0, err
    assert "Updated: copy" in err
    assert (await node_b.resolve("copy")).head == await remote_head(peer)
    await verify_integrity(await node_b.get_dataset("copy"))
    assert stray_files(node_b) == []


def _staged(staging: Path) -> list[Path]:
    """The staged files in ``staging`` with bytes in them, skipping any renamed meanwhile."""
    found = []
    for path in staging.rglob(".pending-*"):
        try:
            if path.stat().st_size > 0:
                found.append(path)
        except FileNotFoundError:
            continue
    return found


def _named(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []


async def test_kill_9_between_staging_the_objects_and_naming_them(
    node_a: Workspace,
    node_b: Workspace,
    serve: ServeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pull's objects are written to its process's staging folder and named only once they
    are checked and durable, just before the head moves: killed in between, a first pull and an
    incremental one leave no head on an object that is missing, and the next pull completes."""
    writer = await create_root(node_a, "cities", slices=2)
    url = (await serve(node_a)).url + "cities"
    root = str(node_b.root)
    staged = node_b.layout.staging_dir

    monkeypatch.setenv(CRASH_AT, "pull.objects-staged")
    code, err = await run_odfd("pull", url, "--as", "copy", "--root", root)
    assert code == -signal.SIGKILL, err
    assert await node_b.list_datasets() == []
    [pulling] = list(node_b.layout.datasets_dir.iterdir())
    assert pulling.name.startswith(".pull-")  # no dataset folder: nothing points at anything
    assert _named(pulling / "blocks") and not _named(pulling / "data")  # blocks kept to resume
    assert len([p for p in staged.rglob(".pending-*") if p.stat().st_size > 0]) >= 2

    monkeypatch.delenv(CRASH_AT)
    code, err = await run_odfd("pull", url, "--as", "copy", "--root", root)
    assert code == 0, err
    copy = await node_b.get_dataset("copy")
    assert await copy.chain.head() == await writer.dataset.chain.head()
    await verify_integrity(copy)
    assert stray_files(node_b) == []  # the dead process's staged objects were swept

    old_head = await copy.chain.head()
    assert copy.layout is not None
    named_before = _named(copy.layout.data_dir)
    new_head = await writer.append(slices=2)
    monkeypatch.setenv(CRASH_AT, "pull.objects-staged")
    code, err = await run_odfd("pull", "copy", "--root", root)
    assert code == -signal.SIGKILL, err
    assert await copy.chain.head() == old_head
    await validate_chain(copy.chain, data=copy.data, checkpoints=copy.checkpoints)
    assert _named(copy.layout.data_dir) == named_before

    monkeypatch.delenv(CRASH_AT)
    code, err = await run_odfd("pull", "copy", "--root", root)
    assert code == 0, err
    assert await copy.chain.head() == new_head
    assert (await node_b.resolve("copy")).head == new_head
    await verify_integrity(copy)
    assert stray_files(node_b) == []


async def test_kill_9_as_the_new_dataset_folder_is_renamed_into_place(
    node_b: Workspace, peer: Peer
) -> None:
    root = str(node_b.root)
    code, err = await run_odfd(
        "pull", peer.url, "--as", "copy", "--root", root, code=KILL_AT_RENAME
    )
    assert code == -signal.SIGKILL, err
    head = await remote_head(peer)
    [folder] = [p for p in node_b.layout.datasets_dir.iterdir()]
    assert (folder / "refs" / "head").read_text() == str(head)
    assert await node_b.list_datasets() == []  # on disk, not in the catalog

    code, err = await run_odfd("pull", peer.url, "--as", "copy", "--root", root)
    assert code == 0, err
    assert (
        f"Recovered: adopted dataset folder {folder.name}: a complete, valid dataset not in the "
        f"catalog, now copy at {head}" in err
    ), err
    record = await node_b.resolve("copy")
    assert record.head == head and record.id == DatasetId.from_multibase(folder.name)
    assert [p for p in node_b.layout.datasets_dir.iterdir()] == [folder]
    await verify_integrity(await node_b.get_dataset("copy"))
    assert stray_files(node_b) == []


def _age(path: Path, seconds: float = 600) -> None:
    """Make ``path`` and everything in it look untouched for ``seconds``."""
    then = time.time() - seconds
    for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(item, (then, then))


async def test_system_gc_and_orphans(node_a: Workspace, node_b: Workspace) -> None:
    await create_root(node_b, "kept", slices=1)
    kept = await node_b.resolve("kept")
    datasets = node_b.layout.datasets_dir
    # A complete dataset folder the catalog lost, one without a head, a first pull's staging
    # folder nobody holds, a stale staged ref, a dead process's staging folder, and a live one.
    orphan = await create_root(node_a, "orphan", slices=1)
    orphan_head = await orphan.dataset.chain.head()
    orphan_root = node_a.layout.dataset(orphan.dataset_id).root
    os.rename(orphan_root, datasets / orphan_root.name)
    _age(datasets / orphan_root.name)
    _, headless_id = DatasetId.new_generated()
    headless = node_b.layout.dataset(headless_id).create().root
    _age(headless)
    pull_staging = datasets / ".pull-0123456789abcdef01234567"
    (pull_staging / "blocks").mkdir(parents=True)
    (pull_staging / "blocks" / "f1620aa").write_bytes(b"partial")
    stale_ref = node_b.layout.dataset(kept.id).refs_dir / ".pending-0011223344556677"
    stale_ref.write_bytes(b"f1620")
    _age(stale_ref)
    dead = node_b.layout.staging_dir / "999999999-deadbeef"
    dead.mkdir(parents=True)
    (dead / ".pending-aa").write_bytes(b"half a file")
    live = node_b.scratch.folder()
    (live / ".pending-bb").write_bytes(b"being written")

    code, out, err = await run_odfd_out(
        "system", "gc", "--older-than", "60s", "--root", str(node_b.root)
    )
    assert code == 0, err
    for path in (dead, pull_staging, stale_ref):
        assert str(path) in out, out
    assert f"Recovered: removed dataset folder {headless.name}: no refs/head" in err
    assert f"Recovered: adopted dataset folder {orphan_root.name}" in err
    assert not dead.exists() and not pull_staging.exists() and not stale_ref.exists()
    assert not headless.exists()
    assert (live / ".pending-bb").exists()  # held by this (running) process: left alone
    assert (await node_b.resolve("orphan")).head == orphan_head
    assert (await node_b.resolve("kept")).head == kept.head

    code, out, err = await run_odfd_out(
        "system", "gc", "--older-than", "60s", "--root", str(node_b.root)
    )
    assert code == 0 and "Removed 0 leftover(s)" in err, err


async def test_after_a_kill_at_the_rename_every_command_sees_the_same_datasets(
    node_b: Workspace, peer: Peer
) -> None:
    """Whatever command opens the workspace first after the kill settles the folder and says so
    in one line; from then on `list`, `log` and `verify` agree (issue: a complete folder that
    only the next pull of the same URL adopted)."""
    root = str(node_b.root)
    code, err = await run_odfd(
        "pull", peer.url, "--as", "copy", "--root", root, code=KILL_AT_RENAME
    )
    assert code == -signal.SIGKILL, err
    head = await remote_head(peer)
    [folder] = [p for p in node_b.layout.datasets_dir.iterdir()]

    code, out, err = await run_odfd_out("list", "--root", root, "-o", "json")
    assert code == 0, err
    assert (
        f"Recovered: adopted dataset folder {folder.name}: a complete, valid dataset not in the "
        f"catalog, now copy at {head}" in err
    ), err
    assert [row["alias"] for row in json.loads(out)] == ["copy"]
    for command in (("list",), ("log", "copy"), ("verify", "copy", "--integrity")):
        code, out, err = await run_odfd_out(*command, "--root", root)
        assert code == 0, err
        assert "Recovered" not in err  # said once, by the command that settled it
    assert (await node_b.resolve("copy")).head == head


async def test_a_folder_being_put_in_place_is_left_to_its_owner(
    node_a: Workspace, node_b: Workspace
) -> None:
    """A complete folder whose lock another process holds (a create, import or pull between its
    rename and its catalog row) is not adopted by a command that happens to open the
    workspace; once the lock is free, the next command adopts it."""
    orphan = await create_root(node_a, "orphan", slices=1)
    source = node_a.layout.dataset(orphan.dataset_id).root
    placed = node_b.layout.datasets_dir / source.name
    os.rename(source, placed)
    fd = try_lock_folder(placed)
    assert fd is not None
    try:
        code, out, err = await run_odfd_out("list", "--root", str(node_b.root), "-o", "json")
        assert code == 0 and json.loads(out) == [] and "Recovered" not in err, err
    finally:
        os.close(fd)
    code, out, err = await run_odfd_out("list", "--root", str(node_b.root), "-o", "json")
    assert code == 0 and [row["alias"] for row in json.loads(out)] == ["orphan"], err
    assert f"Recovered: adopted dataset folder {placed.name}" in err


async def test_a_young_headless_folder_is_left_an_old_one_removed(node_b: Workspace) -> None:
    """A folder without a head is no dataset: no command shows it; one that has not changed for
    a minute (an unfinished create, pull or delete) is removed by the next command."""
    _, young_id = DatasetId.new_generated()
    young = node_b.layout.dataset(young_id).create().root
    _, old_id = DatasetId.new_generated()
    old = node_b.layout.dataset(old_id).create().root
    _age(old)
    code, _, err = await run_odfd_out("list", "--root", str(node_b.root))
    assert code == 0, err
    assert young.exists() and not old.exists()
    assert f"Recovered: removed dataset folder {old.name}: no refs/head" in err
    assert young.name not in err
