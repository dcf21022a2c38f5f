"""Local FS object, ref and named stores: naming, hashing, atomicity and compare-and-swap."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import resource
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from protocol.identity import Multicodec, Multihash
from storage.atomic import sync_file_system
from storage.errors import (
    CorruptRefError,
    HashMismatchError,
    ObjectNotFoundError,
    RefCasError,
    StorageError,
)
from storage.stores import batch_child, localfs
from storage.stores.batch_run import encode_batch
from storage.stores.localfs import LocalFsNamedStore, LocalFsObjectStore, LocalFsRefStore


def sha3(data: bytes) -> Multihash:
    return Multihash(code=Multicodec.SHA3_256, digest=hashlib.sha3_256(data).digest())


async def test_object_is_named_by_base16_multihash_of_its_bytes(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path / "data")
    h = await store.put_bytes(b"hello")
    assert h == sha3(b"hello")
    path = tmp_path / "data" / ("f1620" + hashlib.sha3_256(b"hello").hexdigest())
    assert path.read_bytes() == b"hello"
    assert store.path_of(h) == path
    assert await store.contains(h)
    assert await store.size(h) == 5
    assert await store.get_bytes(h) == b"hello"
    assert [x async for x in store.iter_hashes()] == [h]


async def test_put_with_wrong_expected_hash_stores_nothing(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path)
    with pytest.raises(HashMismatchError):
        await store.put_bytes(b"evil", expected=sha3(b"good"))
    assert os.listdir(tmp_path) == []
    src = tmp_path / "src"
    src.write_bytes(b"evil")
    with pytest.raises(HashMismatchError):
        await store.put_file(src, expected=sha3(b"good"), move=True)
    assert src.exists()
    assert sorted(os.listdir(tmp_path)) == ["src"]

    async def chunks():
        yield b"ev"
        yield b"il"

    with pytest.raises(HashMismatchError):
        await store.put_stream(chunks(), expected=sha3(b"good"))
    assert sorted(os.listdir(tmp_path)) == ["src"]


async def test_put_file_move_and_copy_and_stream(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path / "objects")
    payload = os.urandom(3 * 1024 * 1024 + 7)
    src = tmp_path / "big.bin"
    src.write_bytes(payload)
    h = await store.put_file(src)
    assert src.exists() and h == sha3(payload)
    src2 = tmp_path / "big2.bin"
    src2.write_bytes(payload)
    assert await store.put_file(src2, expected=h, move=True) == h
    assert not src2.exists()
    assert b"".join([c async for c in store.iter_chunks(h, 1 << 20)]) == payload

    async def chunks():
        for i in range(0, len(payload), 100_000):
            yield payload[i : i + 100_000]

    other = LocalFsObjectStore(tmp_path / "other")
    assert await other.put_stream(chunks()) == h
    assert other.path_of(h).read_bytes() == payload
    assert [n for n in os.listdir(tmp_path / "other") if n.startswith(".")] == []


async def test_missing_object_raises_not_found(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path)
    missing = sha3(b"nope")
    assert not await store.contains(missing)
    with pytest.raises(ObjectNotFoundError, match=str(missing)):
        await store.get_bytes(missing)
    with pytest.raises(ObjectNotFoundError):
        await store.size(missing)
    with pytest.raises(ObjectNotFoundError):
        [c async for c in store.iter_chunks(missing)]


async def test_a_large_batch_is_stored_whole_and_leaves_no_staged_files(tmp_path: Path) -> None:
    """A pull's thousands of blocks, written by a child process (``batch_child``): every
    object under its name, an object already stored and a repeat in the batch are fine, and
    nothing is left in the staging folder."""
    (tmp_path / "stage").mkdir()
    store = LocalFsObjectStore(tmp_path / "objects", staging=lambda: tmp_path / "stage")
    await store.put_bytes(b"already")
    items = [b"already", *(f"block {i}".encode() for i in range(400)), b"block 7"]
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    hashes = await store.put_many(items)
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > children_before
    assert hashes == [sha3(item) for item in items]
    for item, hash in zip(items, hashes, strict=True):
        assert await store.get_bytes(hash) == item
    assert sorted(os.listdir(tmp_path / "objects")) == sorted({h.to_multibase() for h in hashes})
    assert os.listdir(tmp_path / "stage") == []


@pytest.mark.parametrize("has_syncfs", [True, False])
def test_a_batch_child_names_objects_only_once_they_are_durable(
    tmp_path: Path, has_syncfs: bool
) -> None:
    """The child stages every new object, makes them durable with one ``syncfs``, then names
    them; without ``syncfs`` it names nothing, leaves nothing staged and answers ``N``."""
    objects, stage = tmp_path / "objects", tmp_path / "stage"
    objects.mkdir()
    stage.mkdir()
    (objects / sha3(b"already").to_multibase()).write_bytes(b"already")
    synced: list[str] = []

    def sync(folder: str) -> bool:
        assert os.listdir(objects) == [sha3(b"already").to_multibase()], "named before durable"
        assert len(os.listdir(stage)) == 400  # the new objects, staged
        synced.append(folder)
        return has_syncfs

    items = [b"already", *(f"block {i}".encode() for i in range(400)), b"block 7"]
    answer = batch_child.store_batch(encode_batch(objects, stage, ".pending-x", items), sync)
    assert synced == [str(stage)]
    assert os.listdir(stage) == []
    if not has_syncfs:
        assert answer == b"N"
        assert os.listdir(objects) == [sha3(b"already").to_multibase()]
        return
    digests = b"".join(hashlib.sha3_256(item).digest() for item in items)
    assert answer == b"K" + digests + b"\1" * len(items)
    for item in items:
        assert (objects / sha3(item).to_multibase()).read_bytes() == item


@pytest.mark.parametrize("has_syncfs", [True, False])
def test_a_batch_child_fills_an_empty_folder_with_one_rename_once_durable(
    tmp_path: Path, has_syncfs: bool
) -> None:
    """Into an empty folder (a new dataset's blocks) the child stages the objects under their
    names in a folder of its own, and that folder replaces the empty one only after ``syncfs``;
    without ``syncfs`` nothing is named and nothing stays staged."""
    objects, stage = tmp_path / "objects", tmp_path / "stage"
    objects.mkdir()
    stage.mkdir()
    items = [*(f"block {i}".encode() for i in range(400)), b"block 7"]

    def sync(folder: str) -> bool:
        assert os.listdir(objects) == [], "named before durable"
        assert os.listdir(stage) == [".pending-x.d"]
        assert len(os.listdir(stage / ".pending-x.d")) == 400
        return has_syncfs

    answer = batch_child.store_batch(encode_batch(objects, stage, ".pending-x", items), sync)
    assert os.listdir(stage) == []
    if not has_syncfs:
        assert answer == b"N"
        assert os.listdir(objects) == []
        return
    digests = b"".join(hashlib.sha3_256(item).digest() for item in items)
    assert answer == b"K" + digests + b"\1" * len(items)
    assert sorted(os.listdir(objects)) == sorted({sha3(item).to_multibase() for item in items})
    for item in items:
        assert (objects / sha3(item).to_multibase()).read_bytes() == item


def test_a_batch_child_names_each_object_when_the_empty_folder_filled_meanwhile(
    tmp_path: Path,
) -> None:
    """Another writer's object arriving in the folder during the batch: the folder is not
    replaced (that object stays), each object of the batch is renamed instead."""
    objects, stage = tmp_path / "objects", tmp_path / "stage"
    objects.mkdir()
    stage.mkdir()
    items = [f"block {i}".encode() for i in range(300)]

    def sync(folder: str) -> bool:
        (objects / sha3(b"other").to_multibase()).write_bytes(b"other")
        return True

    answer = batch_child.store_batch(encode_batch(objects, stage, ".pending-x", items), sync)
    assert answer[:1] == b"K"
    assert os.listdir(stage) == []
    expected = {sha3(item).to_multibase() for item in [*items, b"other"]}
    assert sorted(os.listdir(objects)) == sorted(expected)


async def test_a_batch_child_reads_back_what_it_stored(tmp_path: Path) -> None:
    """The child reads every object of the batch back under its name after the batch: one
    already stored with other bytes under that name (not rewritten) is not vouched for, so
    the pull's commit re-reads it and finds it corrupt; the others are."""
    (tmp_path / "stage").mkdir()
    store = LocalFsObjectStore(tmp_path / "objects", staging=lambda: tmp_path / "stage")
    (tmp_path / "objects").mkdir()
    (tmp_path / "objects" / sha3(b"block 3").to_multibase()).write_bytes(b"corrupt")
    items = [f"block {i}".encode() for i in range(300)]
    hashes, read_back = await store.put_many_read_back(items)
    assert hashes == [sha3(item) for item in items]
    assert read_back == set(hashes) - {sha3(b"block 3")}


async def test_a_large_batch_is_stored_in_process_when_no_child_can_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter to start (an embedded Python): the store writes the batch itself."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    (tmp_path / "stage").mkdir()
    store = LocalFsObjectStore(tmp_path / "objects", staging=lambda: tmp_path / "stage")
    items = [f"block {i}".encode() for i in range(300)]
    assert await store.put_many(items) == [sha3(item) for item in items]
    assert sorted(os.listdir(tmp_path / "objects")) == sorted(sha3(i).to_multibase() for i in items)
    assert os.listdir(tmp_path / "stage") == []


async def test_a_large_batch_without_syncfs_is_stored_file_by_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that finds no ``syncfs`` (answer ``N``, nothing written): the store writes the
    batch itself, an fsync per file."""

    def child_without_syncfs(root: Path, stage: Path, stem: str, items: list[bytes]) -> bytes:
        return batch_child.store_batch(encode_batch(root, stage, stem, items), lambda _: False)

    monkeypatch.setattr(localfs, "run_batch_child", child_without_syncfs)
    store = LocalFsObjectStore(tmp_path / "objects", staging=lambda: tmp_path / "objects")
    items = [f"block {i}".encode() for i in range(300)]
    assert await store.put_many(items) == [sha3(item) for item in items]
    assert sorted(os.listdir(tmp_path / "objects")) == sorted(sha3(i).to_multibase() for i in items)


async def test_a_large_batch_on_a_full_disk_names_nothing(
    small_fs: Callable[[str], Path],
) -> None:
    """The child's ``ENOSPC`` comes back as the store's disk-full error; nothing is named and
    nothing stays staged."""
    mount = small_fs("2m")
    (mount / "stage").mkdir()
    store = LocalFsObjectStore(mount / "objects", staging=lambda: mount / "stage")
    items = [bytes([i % 251]) * 10_000 + i.to_bytes(4, "little") for i in range(400)]
    with pytest.raises(StorageError, match="no space left on device"):
        await store.put_many(items)
    assert os.listdir(mount / "objects") == []
    assert os.listdir(mount / "stage") == []


_KILLED_WRITER = """
import asyncio, os, sys
from pathlib import Path
from storage.stores.localfs import LocalFsObjectStore
root = Path(sys.argv[1])
store = LocalFsObjectStore(root / "objects", staging=lambda: root / "stage")
asyncio.run(store.put_many([os.urandom(300) for _ in range(40_000)]))
"""


def test_a_batch_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A pull killed while its blocks are written: the child is killed too (it does not go on
    writing into a staging folder the next process empties), and no object has its name."""
    (tmp_path / "stage").mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 60
    while _files_under(tmp_path / "stage") < 100:
        assert writer.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    children = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and _cmdline(pid).endswith(f"batch_child.py\0{writer.pid}\0")
    ]
    assert len(children) == 1
    writer.kill()
    writer.wait()
    while time.monotonic() < deadline and "batch_child.py" in _cmdline(children[0]):
        time.sleep(0.01)
    assert "batch_child.py" not in _cmdline(children[0]), "the child outlived its parent"
    staged = _files_under(tmp_path / "stage")
    time.sleep(0.2)
    assert _files_under(tmp_path / "stage") == staged
    assert not (tmp_path / "objects").exists() or os.listdir(tmp_path / "objects") == []


def _files_under(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@pytest.mark.parametrize("has_syncfs", [True, False])
async def test_a_staged_batch_names_its_objects_only_once_they_are_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, has_syncfs: bool
) -> None:
    """A pull's downloads: each checked as it is written to staging, readable there, named by
    ``commit`` after one syncfs (or an fsync per file); a wrong object keeps nothing."""
    staging, objects = tmp_path / "staging", tmp_path / "objects"
    synced: list[Path] = []
    fsynced: list[Path] = []

    def sync(folder: Path) -> bool:
        assert not objects.exists() or os.listdir(objects) == [], "named before it was durable"
        synced.append(folder)
        return has_syncfs

    monkeypatch.setattr(localfs, "sync_file_system", sync)

    def fsync(path: Path) -> None:
        assert not objects.exists() or os.listdir(objects) == [], "named before it was durable"
        fsynced.append(path)

    monkeypatch.setattr(localfs, "fsync_file", fsync)
    store = LocalFsObjectStore(objects, staging=lambda: staging)
    batch = store.staged()
    good, other = b"good " * 1000, b"other"
    with pytest.raises(HashMismatchError):
        await batch.put_stream(_chunks(b"evil"), sha3(good))
    source = tmp_path / "source"
    source.write_bytes(b"evil")
    with pytest.raises(HashMismatchError):
        await batch.put_file(source, sha3(other))
    assert os.listdir(staging) == [] and batch.staged_bytes == 0  # nothing of them kept
    assert await batch.put_stream(_chunks(good[:7], good[7:]), sha3(good)) == sha3(good)
    source.write_bytes(other)
    assert await batch.put_file(source, sha3(other)) == sha3(other)
    assert batch.staged_bytes == len(good) + len(other)
    staged = batch.readable_path(sha3(good))
    assert staged is not None and staged.parent == staging and staged.read_bytes() == good
    assert not await store.contains(sha3(good))
    await batch.commit()
    assert synced == [staging]
    assert len(fsynced) == (0 if has_syncfs else 2)
    assert await store.get_bytes(sha3(good)) == good and await store.get_bytes(sha3(other)) == other
    assert batch.readable_path(sha3(good)) is None and os.listdir(staging) == []

    await batch.put_stream(_chunks(b"dropped"), sha3(b"dropped"))
    await batch.abort()
    assert os.listdir(staging) == [] and not await store.contains(sha3(b"dropped"))


@pytest.mark.parametrize("parts", [(), (b"one",), (b"a", b"bc", b"def")])
async def test_a_staged_object_costs_one_thread_hop_per_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: tuple[bytes, ...]
) -> None:
    """A pull's objects mostly arrive in one chunk: opening, writing and closing the staging
    file is one hop to a worker thread, not one per step; whatever the chunking, the staged
    bytes are the stream's."""
    hops: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(func: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        hops.append(getattr(func, "__name__", repr(func)))
        return await to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    batch = LocalFsObjectStore(tmp_path / "objects", staging=lambda: tmp_path / "staging").staged()
    whole = b"".join(parts)
    assert await batch.put_stream(_chunks(*parts), sha3(whole)) == sha3(whole)
    assert len(hops) == max(len(parts), 1)
    staged = batch.readable_path(sha3(whole))
    assert staged is not None and staged.read_bytes() == whole


async def test_staged_batch_discards_what_is_not_wanted(tmp_path: Path) -> None:
    """``discard`` removes staged objects (file and bytes counted) and leaves the rest to be
    named: a pull drops the files a source sent ahead that no block named."""
    staging = tmp_path / "staging"
    store = LocalFsObjectStore(tmp_path / "objects", staging=lambda: staging)
    batch = store.staged()
    kept, dropped = b"kept " * 100, b"dropped " * 10
    for data in (kept, dropped):
        assert await batch.put_stream(_chunks(data), sha3(data)) == sha3(data)
    await batch.discard([sha3(dropped), sha3(b"never staged")])
    assert batch.readable_path(sha3(dropped)) is None and batch.staged_bytes == len(kept)
    assert len(os.listdir(staging)) == 1
    await batch.commit()
    assert await store.get_bytes(sha3(kept)) == kept
    assert not await store.contains(sha3(dropped)) and os.listdir(staging) == []


def test_sync_file_system_reaches_the_kernel(tmp_path: Path) -> None:
    assert sync_file_system(tmp_path) is True  # Linux has syncfs(2)
    with pytest.raises(FileNotFoundError):
        sync_file_system(tmp_path / "missing")


async def test_listing_skips_staging_files(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path)
    h = await store.put_bytes(b"x")
    (tmp_path / ".pending-abc").write_bytes(b"partial")
    assert [x async for x in store.iter_hashes()] == [h]


async def test_ref_is_stored_as_multibase_without_newline(tmp_path: Path) -> None:
    refs = LocalFsRefStore(tmp_path / "refs")
    h = sha3(b"block")
    assert await refs.get("head") is None
    await refs.set("head", h, expected=None)
    assert (tmp_path / "refs" / "head").read_text() == h.to_multibase()
    assert await refs.get("head") == h
    assert await refs.names() == ["head"]


async def test_ref_cas_rejects_stale_expectation(tmp_path: Path) -> None:
    refs = LocalFsRefStore(tmp_path)
    a, b, c = sha3(b"a"), sha3(b"b"), sha3(b"c")
    await refs.set("head", a, expected=None)
    with pytest.raises(RefCasError) as err:
        await refs.set("head", b, expected=None)
    assert err.value.actual == a
    await refs.set("head", b, expected=a)
    with pytest.raises(RefCasError):
        await refs.set("head", c, expected=a)
    assert await refs.get("head") == b
    with pytest.raises(RefCasError):
        await refs.delete("head", expected=a)
    await refs.delete("head", expected=b)
    assert await refs.get("head") is None


async def test_corrupt_ref_is_reported(tmp_path: Path) -> None:
    (tmp_path / "head").write_text("not a hash")
    with pytest.raises(CorruptRefError, match="head"):
        await LocalFsRefStore(tmp_path).get("head")


def _race(root: str, start: str, new: str, barrier, results) -> None:
    import asyncio

    async def go() -> str:
        refs = LocalFsRefStore(Path(root))
        barrier.wait()
        try:
            await refs.set(
                "head", Multihash.from_multibase(new), expected=Multihash.from_multibase(start)
            )
            return "won"
        except RefCasError:
            return "lost"

    results.put(asyncio.run(go()))


async def test_ref_cas_across_processes_has_exactly_one_winner(tmp_path: Path) -> None:
    refs = LocalFsRefStore(tmp_path)
    start = sha3(b"start")
    await refs.set("head", start, expected=None)
    ctx = multiprocessing.get_context("fork")
    n = 6
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    contenders = [sha3(f"w{i}".encode()) for i in range(n)]
    procs = [
        ctx.Process(target=_race, args=(str(tmp_path), str(start), str(h), barrier, results))
        for h in contenders
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    assert outcomes == ["lost"] * (n - 1) + ["won"]
    assert await refs.get("head") in contenders


async def test_named_store_roundtrip_and_name_checks(tmp_path: Path) -> None:
    info = LocalFsNamedStore(tmp_path / "info")
    assert await info.get("alias") is None
    await info.set("alias", b"my-dataset")
    assert (tmp_path / "info" / "alias").read_bytes() == b"my-dataset"
    assert await info.get("alias") == b"my-dataset"
    await info.delete("alias")
    assert await info.get("alias") is None
    with pytest.raises(Exception, match="invalid info file name"):
        await info.set("../escape", b"x")


async def test_objects_are_not_group_or_world_writable(tmp_path: Path) -> None:
    store = LocalFsObjectStore(tmp_path)
    h = await store.put_bytes(b"perm")
    mode = stat.S_IMODE(store.path_of(h).stat().st_mode)
    assert mode & 0o022 == 0
