"""Checking that a text file really is UTF-8 before Spark reads it.

Spark's CSV and JSON readers replace bytes that are not valid UTF-8 with U+FFFD without a word,
which would change the data. A file read as UTF-8 (the default ``encoding``) is therefore checked
first; the error names the file, the line (and row) and the byte offset of the first bad byte.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from odfd.ingest.errors import BadInputError

_CHUNK = 1 << 20


def is_utf8(encoding: str) -> bool:
    return encoding.lower().replace("-", "").replace("_", "") == "utf8"


def check_utf8(path: Path, *, header: bool = False) -> None:
    """Raises ``BadInputError`` at the first byte of ``path`` that is not valid UTF-8.

    ``header``: the first line is a header, so row numbers are one less than line numbers.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    lines = 0
    with open(path, "rb") as file:
        while True:
            chunk = file.read(_CHUNK)
            final = not chunk
            pending = len(decoder.getstate()[0])  # a character split across chunks
            try:
                decoder.decode(chunk, final=final)
            except UnicodeDecodeError as err:
                # positions are in the pending bytes followed by this chunk
                seen = err.object
                line = lines + seen.count(b"\n", 0, err.start) + 1
                bad = seen[err.start : err.end]
                raise _error(path, offset - pending + err.start, line, header, bad) from None
            if final:
                return
            lines += chunk.count(b"\n")
            offset += len(chunk)


def _error(path: Path, offset: int, line: int, header: bool, data: bytes) -> BadInputError:
    row = line - 1 if header else line
    where = f"line {line}" + (f" (row {row})" if header else "")
    return BadInputError(
        f"{path}: {where}, byte offset {offset}: byte(s) {data.hex(' ')} are not valid UTF-8; "
        "if the file uses another encoding, name it in the source's read step "
        "(e.g. `encoding: ISO-8859-1`)",
        path=str(path),
        line=line,
        record=row,
    )
