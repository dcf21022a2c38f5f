"""A folder store's large batch of small objects, written by a process of its own.

Why: a pull stores its 10,000 metadata blocks while its downloads are checked. In the pulling
process every ``open``/``write``/``close``/``rename`` of a block gives up the GIL and waits to get
it back behind the checks, so writing the blocks took 1.7-3.1 s inside a pull against 1.1 s
alone. This script (standard library only, started with ``python -I -S``) does the same steps
as ``LocalFsObjectStore``'s in-process batch, on its own GIL and core: each object hashed
(SHA3-256) and staged unsynced under ``<stem>.<n>`` unless its name exists already, one
``syncfs`` of the file system, each staged file renamed to its name unless that exists by now,
one fsync of the objects' folder. Into an empty folder (a new dataset's blocks: a first pull)
the objects are staged under their names in a folder ``<stem>.d`` that, after the ``syncfs``,
replaces the empty one by one ``rename(2)`` (10,000 renames cost the child 0.16 s of its 0.38 s
CPU in a pull). No object has its name in the store before its bytes are durable; what a
failure staged is removed, and what a kill left lies in the pulling process's staging folder,
which the next process to open the workspace empties. The script dies with the process
that started it (``PR_SET_PDEATHSIG``), so a killed pull does not go on writing behind it.

Input on stdin: ``<QQQQ`` lengths of the objects' folder, the staging folder, the staged
name's stem and the object count, those three as UTF-8, ``count`` sizes as ``<Q``, then the
objects' bytes one after another. Output: ``K``, each object's SHA3-256 digest in order and a
byte per object, 1 if its stored file was read back after the batch and hashes to its name (the
check a commit makes of every stored block, done here off the pulling process's GIL); ``N``
(nothing written: no ``syncfs`` here) or ``E`` and ``{"errno", "strerror", "filename"}``.
"""

import ctypes
import functools
import hashlib
import json
import os
import struct
import sys
from collections.abc import Callable, Iterable

HEADER = struct.Struct("<QQQQ")
_NAME_PREFIX = "f1620"
"""An object's name: base16 multibase of its SHA3-256 multihash (``storage.layout.object_name``)."""


def main() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    _die_with_parent(libc, int(sys.argv[1]))
    answer = store_batch(sys.stdin.buffer.read(), functools.partial(_syncfs, libc))
    sys.stdout.buffer.write(answer)


def store_batch(payload: bytes, syncfs: Callable[[str], bool]) -> bytes:
    """Store the batch ``payload`` describes; the answer to write back (module docstring).
    ``syncfs(folder)`` makes that folder's file system durable, ``False`` if it cannot."""
    data = memoryview(payload)
    root_len, stage_len, stem_len, count = HEADER.unpack_from(data)
    at = HEADER.size
    root, stage, stem = (
        str(data[at : at + root_len], "utf-8"),
        str(data[at + root_len : at + root_len + stage_len], "utf-8"),
        str(data[at + root_len + stage_len : at + root_len + stage_len + stem_len], "utf-8"),
    )
    at += root_len + stage_len + stem_len
    sizes = struct.unpack_from(f"<{count}Q", data, at)
    at += 8 * count
    # Into an empty folder (a new dataset's blocks), the objects are staged under their names in
    # a folder of their own that then replaces it: one rename, not one per object.
    fresh = stage != root and _is_empty_folder(root)
    folder = f"{stage}/{stem}.d"
    staged: dict[str, str] = {}
    digests = bytearray()
    try:
        if fresh:
            os.mkdir(folder)
        for number, size in enumerate(sizes):
            item = data[at : at + size]
            at += size
            digest = hashlib.sha3_256(item).digest()
            digests += digest
            name = _NAME_PREFIX + digest.hex()
            target = os.path.join(root, name)
            if target not in staged and (fresh or not os.path.exists(target)):
                path = f"{folder}/{name}" if fresh else f"{stage}/{stem}.{number}"
                _write_new(path, item)
                staged[target] = path
        if staged and not syncfs(stage):
            return b"N"
        if fresh and staged and _replace_empty_folder(folder, root):
            staged.clear()
            _fsync_folder(os.path.dirname(root))
        for target, path in list(staged.items()):
            if not os.path.exists(target):
                os.rename(path, target)
                del staged[target]
        _fsync_folder(root)
    except OSError as err:
        failure = {"errno": err.errno, "strerror": err.strerror, "filename": err.filename}
        return b"E" + json.dumps(failure).encode()
    finally:
        _unlink_all(staged.values())  # stored already, not reached, or not named at all
        if fresh:
            _remove_folder(folder)
    return b"K" + bytes(digests) + _read_back(root, digests)


def _read_back(root: str, digests: bytes | bytearray) -> bytes:
    """One byte per object: 1 if the file under its name now holds bytes that hash to it (re-read
    here, off the pulling process's GIL, instead of by its commit), else 0."""
    flags = bytearray()
    for at in range(0, len(digests), 32):
        digest = digests[at : at + 32]
        try:
            with open(f"{root}/{_NAME_PREFIX}{digest.hex()}", "rb", buffering=0) as f:
                same = hashlib.sha3_256(f.read()).digest() == digest
        except OSError:
            same = False
        flags.append(same)
    return bytes(flags)


def _is_empty_folder(path: str) -> bool:
    """An empty folder, not a link to one (replacing a link would move the store)."""
    if os.path.islink(path):
        return False
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _replace_empty_folder(folder: str, root: str) -> bool:
    """``rename(2)`` replaces an empty folder whole; ``False`` if ``root`` is not empty by now
    (another writer) or cannot be replaced (a mount point): then each object is renamed."""
    try:
        os.rename(folder, root)
    except OSError:
        return False
    return True


def _fsync_folder(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_folder(folder: str) -> None:
    """The staging folder of a batch not named whole (gone if it replaced the empty one)."""
    try:
        _unlink_all(os.path.join(folder, name) for name in os.listdir(folder))
        os.rmdir(folder)
    except FileNotFoundError:
        pass


def _die_with_parent(libc: ctypes.CDLL, parent: int) -> None:
    try:
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except AttributeError:  # not Linux: the parent's death is noticed no sooner than the end
        return
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _write_new(path: str, item: memoryview) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        while item:
            item = item[os.write(fd, item) :]
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def _syncfs(libc: ctypes.CDLL, folder: str) -> bool:
    """``syncfs(2)`` of ``folder``'s file system; ``False`` where the call does not exist."""
    try:
        syncfs = libc.syncfs
    except AttributeError:
        return False
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), folder)
    finally:
        os.close(fd)
    return True


def _unlink_all(paths: Iterable[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


if __name__ == "__main__":
    main()
