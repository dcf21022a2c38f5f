"""Reading one ref file (``refs/head``) as the reference writes it: the multibase hash as UTF-8
text. Apart from the ref store so that readers without an event loop (``odfd log``) need no
asyncio."""

from __future__ import annotations

from pathlib import Path

from protocol.errors import ParseError
from protocol.identity import Multihash
from storage.errors import CorruptRefError


def read_ref_file(path: Path) -> Multihash | None:
    """The hash in the ref file at ``path``; ``None`` if there is no such file."""
    try:
        text = path.read_bytes().decode("utf-8").strip()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptRefError(f"ref {path} is not UTF-8 text") from None
    try:
        return Multihash.from_multibase(text)
    except ParseError as err:
        raise CorruptRefError(f"ref {path} does not hold a multihash: {err}") from None
