"""Objects written ahead of the batch that stores them, for a folder store that is empty.

Why: a pull from IPFS receives every block of the remote's ``blocks/`` folder in one export, in
hash order, seconds before its walk can verify the first one; writing the verified blocks only
after the walk (10,002 file creations: 1.5-4.9 s under load, against 0.1 s for the ``syncfs``)
was most of what the pull waited for after its last object. Here each block is written, unsynced
and under its name, into a staging folder of its own by a process of its own (``ahead_child``:
its file creations wait neither for the pulling process's GIL nor on its core) while the export
streams in; the batch that stores the verified blocks (``LocalFsObjectStore.put_many_read_back``)
then only removes what it does not store, writes what was not staged, makes the folder durable
with one ``syncfs`` and renames it onto the empty objects' folder. Nothing staged here has a
name in the store before that: an unverified block is never stored, and a pull that fails
removes the folder.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from protocol.identity import Multihash
from storage.atomic import fsync_dir, staging_path, sync_file_system
from storage.layout import object_name
from storage.stores.ahead_child import RECORD

_CHILD = Path(__file__).with_name("ahead_child.py")


class ObjectsAhead:
    """A staging folder filled in the background (``put``, from any thread) and named whole by
    one batch (``name_batch``) or removed (``discard``)."""

    def __init__(self, root: Path, stage_dir: Path) -> None:
        self._root = root
        self._folder = Path(f"{staging_path(stage_dir)}.d")
        self._folder.mkdir()
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_CHILD), str(self._folder), str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:  # no interpreter to start (an embedded Python): nothing written ahead
            self._folder.rmdir()
            raise
        self._written: set[str] = set()
        self._sent: list[str] = []
        """Names in the order the child is sent them (its answer has a byte per name)."""
        self._read_back: set[str] = set()
        self._lock = threading.Lock()
        self._failed = False
        self._stopped = False
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, name="odfd-ahead", daemon=True)
        self._feeder.start()

    def put(self, name: str, data: bytes) -> None:
        """``data`` is to be stored as ``name`` (its ``object_name``) if the batch holds it.
        Never waits for the child: a feeding thread sends it (a pull's export, which calls this,
        is not to wait on the local disk)."""
        record = RECORD.pack(len(name), len(data)) + name.encode() + data
        with self._lock:
            if self._stopped or name in self._written:
                return
            self._written.add(name)
            self._sent.append(name)
            self._queue.put(record)

    def _feed(self) -> None:
        pipe = self._child.stdin
        assert pipe is not None
        try:
            while (record := self._queue.get()) is not None:
                if not self._failed:
                    pipe.write(record)
        except OSError:
            self._failed = True  # the batch writes them its own way and reports the error
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def _stop(self, *, kill: bool = False) -> None:
        """No more ``put``; wait for the child to write what it was sent (or ``kill`` it)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if kill:
            self._failed = True
            self._child.kill()
        self._queue.put(None)
        self._feeder.join()
        assert self._child.stdout is not None
        with self._child.stdout as answer:
            flags = answer.read()
        if self._child.wait() != 0 or len(flags) != len(self._sent):
            self._failed = True
            return
        self._read_back = {name for name, flag in zip(self._sent, flags, strict=True) if flag}

    def name_batch(self, items: Sequence[bytes]) -> tuple[list[Multihash], set[Multihash]] | None:
        """Store ``items`` (blocking): the staged folder, holding exactly them and made durable,
        replaces the empty objects' folder; their hashes, and those whose files the child read
        back and found to hash to their names (``put_many_read_back``'s answer). ``None``:
        nothing was named (the folder is not empty by now, a write failed, no ``syncfs``) and
        the caller stores them its own way. The staged folder is gone afterwards either way."""
        if self._stopped:
            return None  # discarded
        self._stop()
        named = False
        try:
            if self._failed or not _is_empty_folder(self._root):
                return None
            hashes = [Multihash.from_digest_sha3_256(item) for item in items]
            wanted = {object_name(hash): item for hash, item in zip(hashes, items, strict=True)}
            for name in self._written - wanted.keys():
                os.unlink(self._folder / name)
            for name, item in wanted.items():
                if name not in self._written:
                    _write_new(self._folder / name, item)
            if not sync_file_system(self._folder):
                return None
            os.rename(self._folder, self._root)
            named = True
            fsync_dir(self._root.parent)
            return hashes, {hash for hash in hashes if object_name(hash) in self._read_back}
        except OSError:
            if named:
                raise  # named, but not durably: the caller's error to report
            return None
        finally:
            if not named:
                shutil.rmtree(self._folder, ignore_errors=True)

    def discard(self) -> None:
        """Remove what was staged (blocking; the walk failed, nothing is to be stored)."""
        self._stop(kill=True)
        shutil.rmtree(self._folder, ignore_errors=True)


def _is_empty_folder(path: Path) -> bool:
    """An empty folder, not a link to one (replacing a link would move the store)."""
    if path.is_symlink() or not path.is_dir():
        return False
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
