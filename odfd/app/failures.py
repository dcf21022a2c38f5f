"""Ordinary failures as one line naming the path and the fix, instead of a traceback.

``OdfError`` carries its own message; operating-system errors (a read-only folder, a busy port,
a full disk) are described here by their errno. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno

_HINTS = {
    errno.EACCES: "check its permissions or pick a folder you can write to",
    errno.EPERM: "check its permissions or pick a folder you can write to",
    errno.EROFS: "the file system is read-only; pick a writable folder",
    errno.ENOSPC: "the disk is full; free some space (`odfd system gc` removes leftovers)",
    errno.EDQUOT: "the disk quota is used up; free some space",
    errno.EADDRINUSE: "another process listens there; stop it or pick another --port",
    errno.EADDRNOTAVAIL: "this machine has no such address; pick another --address",
    errno.ENOENT: "it does not exist",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
}


def describe_os_error(err: OSError) -> str:
    """``PATH: what went wrong (the fix)`` for an ``OSError``."""
    where = err.filename if err.filename is not None else None
    reason = err.strerror or str(err)
    hint = _HINTS.get(err.errno or 0)
    text = f"{where}: {reason}" if where is not None else reason
    return f"{text} ({hint})" if hint else text


#: Packages whose exceptions are an engine's failure (shown as one line, not a traceback).
ENGINE_PACKAGES = ("pyspark", "py4j", "grpc")


def describe_failure(err: Exception) -> tuple[str | None, int]:
    """A use case's failure as the CLI reports it: the one-line message and the exit code;
    ``None`` for a bug, which keeps its traceback."""
    from protocol.errors import OdfError

    if isinstance(err, OdfError):
        return str(err), getattr(err, "exit_code", 1)
    if isinstance(err, OSError):
        return describe_os_error(err), 1
    if type(err).__module__.startswith(ENGINE_PACKAGES):
        # A Spark failure odfd did not turn into one of its own errors: still one line.
        return f"Spark failed: {_first_line(err)}", 1
    return None, 1


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
