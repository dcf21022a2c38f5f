"""Writes the objects ``localfs_ahead`` stages, in a process of its own (standard library only,
started with ``python -I -S``): creating 10,002 files in the pulling process cost it 1.6 s of
system time, and each ``open``/``write``/``close`` waited to get the GIL back behind the walk
and the data checks (6 s for the writes of a pull that took 6.5 s).

Arguments: the staging folder to write into and the parent's pid (the child dies with it:
``PR_SET_PDEATHSIG``). Input on stdin, until it ends: records of ``<HI`` (name length, size),
the name (UTF-8) and the bytes; each is written, unsynced, to a new file of that name (the parent
makes the folder durable with one ``syncfs`` before anything there gets a name in a store), then
read back. Output once stdin ends: a byte per record, 1 if its file read back hashes (SHA3-256)
to its name (the check a commit makes of every stored block, done here off the pulling
process's GIL and event loop). Exit status 0: every record was written; else the error is on
stderr."""

import ctypes
import hashlib
import os
import struct
import sys

RECORD = struct.Struct("<HI")
_NAME_PREFIX = "f1620"
"""An object's name: base16 multibase of its SHA3-256 multihash (``storage.layout.object_name``)."""


def main() -> None:
    folder, parent = sys.argv[1], int(sys.argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except AttributeError:  # not Linux: the parent's death is noticed at the end of stdin
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    source = sys.stdin.buffer
    flags = bytearray()
    while header := source.read(RECORD.size):
        name_length, size = RECORD.unpack(header)
        name, data = source.read(name_length).decode(), source.read(size)
        if len(data) != size:
            sys.exit("the input ends inside a record")
        path = os.path.join(folder, name)
        _write_new(path, data)
        flags.append(_read_back(path) == name[len(_NAME_PREFIX) :])
    sys.stdout.buffer.write(flags)


def _read_back(path: str) -> str:
    """The SHA3-256 digest (hex) of what the file holds now."""
    with open(path, "rb", buffering=0) as f:
        return hashlib.sha3_256(f.read()).hexdigest()


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
